package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/polygateway/polygateway/internal/core"
)

// source parses the keys {SCOPE}__{PROVIDER}__{N}__{FIELD} of one source,
// field by field in table order.
func (l *loader) source(id sourceID) (core.SourceConfig, *Error) {
	pre := l.prefix + id.provider + "__" + strconv.Itoa(id.n) + "__"
	provider := strings.ToLower(id.provider)
	sc := core.SourceConfig{
		Name:        provider + "_" + strconv.Itoa(id.n),
		Provider:    provider,
		Index:       id.n,
		MissingDone: core.MissingDoneRetry,
		TrustEnv:    true,
		Weight:      defaultWeight,
	}
	var err *Error

	// BASE_URL
	e, err := l.required(pre+"BASE_URL", baseURLForm, "")
	if err != nil {
		return sc, err
	}
	if sc.BaseURL, err = checkBaseURL(e); err != nil {
		return sc, err
	}

	// API_KEY: never echoed.
	if e, err = l.required(pre+"API_KEY", `the key, or "none" for servers without authentication`, ""); err != nil {
		return sc, err
	}
	if strings.IndexFunc(e.val, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return sc, errf(e.key, "invalid value: contains whitespace or control characters (value not shown)")
	}
	sc.APIKey = e.val
	if strings.EqualFold(sc.APIKey, "none") {
		sc.APIKey = "none"
	}

	// MODEL
	if e, err = l.required(pre+"MODEL", "the upstream model name", ""); err != nil {
		return sc, err
	}
	sc.Model = e.val

	// TIMEOUT_S (or LLM_TIMEOUT)
	timeout, err := l.optSeconds(pre+"TIMEOUT_S", true)
	if err != nil {
		return sc, err
	}
	timeout = timeout.or(l.flatTimeout)
	if !timeout.set() {
		return sc, errf(pre+"TIMEOUT_S", "missing: required unless the flat LLM_TIMEOUT is set; expected "+formSecPos)
	}
	sc.Timeout = timeout.d
	l.from(pre+"TIMEOUT_S", timeout.key)

	// MAX_CONCURRENCY, RPM, TPM
	if sc.Limits.MaxConcurrency, err = l.intOr(pre+"MAX_CONCURRENCY", 0, 0); err != nil {
		return sc, err
	}
	if sc.Limits.RPM, err = l.intOr(pre+"RPM", 0, 0); err != nil {
		return sc, err
	}
	if sc.Limits.TPM, err = l.intOr(pre+"TPM", 0, 0); err != nil {
		return sc, err
	}

	// EST_TOKENS (Validate requires it with a TPM gate, and within it)
	if sc.EstTokens, err = l.intOr(pre+"EST_TOKENS", 1, 0); err != nil {
		return sc, err
	}

	// TTFT_TIMEOUT_S, INTER_TOKEN_TIMEOUT_S (or LLM_TTFT_TIMEOUT, LLM_INTER_TOKEN_TIMEOUT)
	ttft, err := l.optSeconds(pre+"TTFT_TIMEOUT_S", false)
	if err != nil {
		return sc, err
	}
	inter, err := l.optSeconds(pre+"INTER_TOKEN_TIMEOUT_S", false)
	if err != nil {
		return sc, err
	}
	ttft, inter = ttft.or(l.flatTTFT), inter.or(l.flatInter)
	l.from(pre+"TTFT_TIMEOUT_S", ttft.key)
	l.from(pre+"INTER_TOKEN_TIMEOUT_S", inter.key)
	// The pair is set together; Validate checks its values.
	switch {
	case ttft.set() && !inter.set():
		return sc, errf(pre+"INTER_TOKEN_TIMEOUT_S", fmt.Sprintf(
			"missing: the stream watchdog is set as a pair and TTFT_TIMEOUT_S is %s (from %s); set this key or LLM_INTER_TOKEN_TIMEOUT",
			secs(ttft.d), ttft.key))
	case inter.set() && !ttft.set():
		return sc, errf(pre+"TTFT_TIMEOUT_S", fmt.Sprintf(
			"missing: the stream watchdog is set as a pair and INTER_TOKEN_TIMEOUT_S is %s (from %s); set this key or LLM_TTFT_TIMEOUT",
			secs(inter.d), inter.key))
	case ttft.set():
		// Both 0 is no watchdog (models that think silently for long).
		sc.TTFTTimeout, sc.InterTokenTimeout = ttft.d, inter.d
	default:
		// Neither set: a watchdog by default, so that a silent upstream is
		// failed over long before the attempt's timeout. Thinking deltas
		// count as tokens, so reasoning models that stream their thinking
		// are not cut; see the key reference for models that think silently.
		sc.TTFTTimeout = min(sc.Timeout/2, defaultMaxTTFT)
		sc.InterTokenTimeout = sc.TTFTTimeout / 2
		if sc.InterTokenTimeout == 0 {
			// A timeout of a few nanoseconds leaves no room for a pair.
			sc.TTFTTimeout = 0
		}
	}

	// CONTEXT_WINDOW
	if sc.ContextWindow, err = l.intOr(pre+"CONTEXT_WINDOW", 0, 0); err != nil {
		return sc, err
	}

	// CONTINUE
	if e = l.get(pre + "CONTINUE"); e.present() {
		v, err := parseEnum(e, sourceP+"CONTINUE")
		if err != nil {
			return sc, err
		}
		sc.Continue = core.ContinueMode(v)
	}

	// ENABLE_THINKING
	if e = l.get(pre + "ENABLE_THINKING"); e.present() {
		b, err := parseBool(e)
		if err != nil {
			return sc, err
		}
		sc.EnableThinking = &b
	}

	// MISSING_DONE
	if sc.MissingDone, err = enumOr(l, pre+"MISSING_DONE", sourceP+"MISSING_DONE", core.MissingDoneRetry); err != nil {
		return sc, err
	}

	// TRUST_ENV
	if e = l.get(pre + "TRUST_ENV"); e.present() {
		if sc.TrustEnv, err = parseBool(e); err != nil {
			return sc, err
		}
	}

	// PRIORITY
	if sc.Priority, err = l.intOr(pre+"PRIORITY", minInt, 0); err != nil {
		return sc, err
	}

	// WEIGHT
	if e = l.get(pre + "WEIGHT"); e.present() {
		if sc.Weight, err = parseRange(e, 0, true, posInf, false); err != nil {
			return sc, err
		}
	}

	// REGION
	sc.Region = l.get(pre + "REGION").val

	// EXTRA_BODY: never echoed (it may carry tokens).
	if e = l.get(pre + "EXTRA_BODY"); e.present() {
		if sc.ExtraBody, err = parseJSONObject(e); err != nil {
			return sc, err
		}
	}

	// BREAKER__FAIL_THRESHOLD, BREAKER__COOLDOWN_S, BREAKER__MAX_COOLDOWN_S:
	// the source's own breaker values (Validate checks the cap against the
	// source's effective cooldown).
	b := &sc.Breaker
	if b.FailThreshold, err = l.intOr(pre+"BREAKER__FAIL_THRESHOLD", 1, 0); err != nil {
		return sc, err
	}
	cooldown, err := l.optSeconds(pre+"BREAKER__COOLDOWN_S", true)
	if err != nil {
		return sc, err
	}
	b.Cooldown = cooldown.d
	maxCool, err := l.optSeconds(pre+"BREAKER__MAX_COOLDOWN_S", true)
	if err != nil {
		return sc, err
	}
	b.MaxCooldown = maxCool.d
	return sc, nil
}

const baseURLForm = "an absolute http:// or https:// URL such as https://host/v1"

// checkBaseURL validates an absolute http(s) URL and trims trailing slashes.
// The value is never echoed: it may carry credentials.
func checkBaseURL(e entry) (string, *Error) {
	const form = baseURLForm
	u, err := url.Parse(e.val)
	if err != nil {
		return "", errf(e.key, "invalid URL ("+urlProblem(err)+"; value not shown); expected "+form)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		scheme := "none"
		if u.Scheme != "" {
			scheme = strconv.Quote(u.Scheme)
		}
		return "", errf(e.key, "invalid URL: scheme "+scheme+" (value not shown); expected "+form)
	case u.Host == "" || u.Opaque != "":
		return "", errf(e.key, "invalid URL: no host (value not shown); expected "+form)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(e.val, "#"):
		return "", errf(e.key, "invalid URL: must not contain a query or fragment, since request paths are appended to it (value not shown); expected "+form)
	}
	return strings.TrimRight(e.val, "/"), nil
}

// checkRedisURL validates REDIS_URL without echoing it (it may carry a password).
func checkRedisURL(e entry) *Error {
	const form = "a redis://, rediss:// or unix:// URL"
	u, err := url.Parse(e.val)
	if err != nil {
		return errf(e.key, "invalid URL ("+urlProblem(err)+"; value not shown); expected "+form)
	}
	switch u.Scheme {
	case "redis", "rediss":
		if u.Host == "" {
			return errf(e.key, "invalid URL: no host (value not shown); expected "+form)
		}
	case "unix":
		if u.Path == "" {
			return errf(e.key, "invalid URL: no socket path (value not shown); expected "+form+", e.g. unix:///run/redis.sock")
		}
	default:
		scheme := "none"
		if u.Scheme != "" {
			scheme = strconv.Quote(u.Scheme)
		}
		return errf(e.key, "invalid URL: scheme "+scheme+" (value not shown); expected "+form)
	}
	return nil
}

// urlProblem returns the reason of a url.Parse failure without the URL itself.
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	// url.EscapeError and url.InvalidHostError quote fragments of the input;
	// keep only their kind.
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		msg = "invalid percent-escape"
	case errors.As(err, &host):
		msg = "invalid character in host"
	}
	return msg
}

// parseJSONObject decodes a JSON object, keeping numbers exact (json.Number).
func parseJSONObject(e entry) (map[string]any, *Error) {
	const form = `a JSON object such as {"top_k": 20}`
	if e.val == "" {
		return nil, emptyErr(e, form)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(e.val)))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errf(e.key, "invalid JSON ("+jsonProblem(err)+"; value not shown); expected "+form)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errf(e.key, "invalid JSON: trailing data after the object (value not shown); expected "+form)
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, errf(e.key, fmt.Sprintf("invalid value: a JSON %s, not an object (value not shown); expected %s", jsonKind(v), form))
	}
	return obj, nil
}

func jsonProblem(err error) string {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return "unexpected end of input"
	}
	return "not valid JSON"
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	}
	return "value"
}
