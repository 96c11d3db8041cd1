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
	"time"
	"unicode"

	"github.com/polygateway/polygateway/core"
)

// apiKeyForm is the expected form of API_KEY.
const apiKeyForm = `the key, or "none" for servers without authentication`

// checkAPIKey refuses a key no header can carry; it is never echoed.
func checkAPIKey(v *validator, key string, _ KeyDoc, sc *core.SourceConfig) {
	if strings.IndexFunc(sc.APIKey, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		v.fail(errf(key, "invalid value: contains whitespace or control characters (value not shown)"))
	}
}

// parseAPIKey keeps an API_KEY as it is, "none" in lower case.
func parseAPIKey(e entry, _ KeyDoc) (any, *Error) {
	if strings.EqualFold(e.val, "none") {
		return "none", nil
	}
	return e.val, nil
}

// watchdog reads TTFT_TIMEOUT_S and INTER_TOKEN_TIMEOUT_S (or their flat
// shortcuts): set together, or neither for the default pair; Validate
// checks their values.
func (l *loader) watchdog(pre string, sc *core.SourceConfig) {
	t, i := doc(sourceP+"TTFT_TIMEOUT_S"), doc(sourceP+"INTER_TOKEN_TIMEOUT_S")
	ttft, ttftFrom := l.half(t.key(pre), t)
	inter, interFrom := l.half(i.key(pre), i)
	const halves = "missing: the stream watchdog is set as a pair and %s is %s (from %s); set this key or %s"
	switch {
	case ttftFrom != "" && interFrom == "":
		l.fail(errf(i.key(pre), fmt.Sprintf(halves, "TTFT_TIMEOUT_S", secs(ttft), ttftFrom, i.flat)))
	case interFrom != "" && ttftFrom == "":
		l.fail(errf(t.key(pre), fmt.Sprintf(halves, "INTER_TOKEN_TIMEOUT_S", secs(inter), interFrom, t.flat)))
	case ttftFrom != "":
		// Both 0 is no watchdog (models that think silently for long).
		sc.TTFTTimeout, sc.InterTokenTimeout = ttft, inter
	case sc.Timeout/2 > 1:
		// Neither set: a watchdog by default, so that a silent upstream is
		// failed over long before the attempt's timeout. Thinking deltas
		// count as tokens, so reasoning models that stream their thinking
		// are not cut; see the key reference for models that think silently.
		// (A timeout of a few nanoseconds leaves no room for a pair.)
		sc.TTFTTimeout = min(sc.Timeout/2, defaultMaxTTFT)
		sc.InterTokenTimeout = sc.TTFTTimeout / 2
	}
}

// half reads one key of the watchdog pair, else its flat shortcut: the
// value and the key it came from ("" when neither gave one).
func (l *loader) half(key string, d KeyDoc) (time.Duration, string) {
	if e := l.get(key); e.present() {
		v, err := parseValue(e, d)
		l.fail(err)
		if err == nil {
			l.from(key, key)
			return v.(time.Duration), key
		}
	}
	v, ok := l.flats[d.flat].(time.Duration)
	if !ok {
		l.from(key, "")
		return 0, ""
	}
	l.from(key, d.flat)
	return v, d.flat
}

// watchdog checks a source's stream watchdog pair: INTER < TTFT < TIMEOUT,
// or both 0.
func (v *validator) watchdog(pre string, sc *core.SourceConfig) {
	ttftKey, interKey, timeoutKey := pre+"TTFT_TIMEOUT_S", pre+"INTER_TOKEN_TIMEOUT_S", pre+"TIMEOUT_S"
	ttft, inter := sc.TTFTTimeout, sc.InterTokenTimeout
	switch {
	case ttft < 0 || inter < 0 || ttft == 0 && inter == 0:
		// Negative: refused as such. Both 0: no watchdog (models that think
		// silently for long).
	case ttft == 0:
		v.fail(errf(v.blame(ttftKey), fmt.Sprintf("0 (source %s) switches the watchdog off only together with INTER_TOKEN_TIMEOUT_S=0 (it is %s from %s)",
			sc.Name, secs(inter), v.origin(interKey, true))))
	case inter >= ttft:
		v.fail(errf(v.blame(interKey), fmt.Sprintf("%s (source %s) must be < TTFT_TIMEOUT_S (%s from %s)",
			secs(inter), sc.Name, secs(ttft), v.origin(ttftKey, true))))
	case ttft >= sc.Timeout && sc.Timeout > 0:
		v.fail(errf(v.blame(ttftKey), fmt.Sprintf("%s (source %s) must be < TIMEOUT_S (%s from %s)",
			secs(ttft), sc.Name, secs(sc.Timeout), v.origin(timeoutKey, true))))
	case inter == 0:
		v.fail(errf(v.blame(interKey), fmt.Sprintf("0 (source %s) switches the watchdog off only together with TTFT_TIMEOUT_S=0 (it is %s from %s)",
			sc.Name, secs(ttft), v.origin(ttftKey, true))))
	}
}

// timeout checks a source's TIMEOUT_S, within the permit lease.
func (v *validator) timeout(key string, d KeyDoc, sc *core.SourceConfig) {
	key, lease := v.blame(key), v.s.LeaseTTL
	switch {
	case sc.Timeout == 0:
		v.fail(unlessFlat(key, d))
	case sc.Timeout < 0:
		v.fail(errf(key, fmt.Sprintf("invalid value %s: must be greater than 0; expected %s", secs(sc.Timeout), formSecPos)))
	case lease > 0 && sc.Timeout > lease:
		// Made by hand, a zero LeaseTTL leases each permit for its attempt.
		shown := secs(lease)
		if _, ok := v.given("PGW_LEASE_TTL_S", true); !ok {
			shown += ", the default"
		}
		v.fail(errf(key, fmt.Sprintf("%s (source %s) exceeds the permit lease PGW_LEASE_TTL_S (%s); lower the timeout or raise PGW_LEASE_TTL_S",
			secs(sc.Timeout), sc.Name, shown)))
	}
}

// The expected forms of BASE_URL and REDIS_URL.
const (
	baseURLForm  = "an absolute http:// or https:// URL such as https://host/v1"
	redisURLForm = "a redis://, rediss:// or unix:// URL"
)

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
		return "", badScheme(e.key, u, form)
	case u.Host == "" || u.Opaque != "":
		return "", errf(e.key, "invalid URL: no host (value not shown); expected "+form)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.Contains(e.val, "#"):
		return "", errf(e.key, "invalid URL: must not contain a query or fragment, since request paths are appended to it (value not shown); expected "+form)
	}
	return strings.TrimRight(e.val, "/"), nil
}

// checkRedisURL validates REDIS_URL without echoing it (it may carry a password).
func checkRedisURL(e entry) *Error {
	const form = redisURLForm
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
		return badScheme(e.key, u, form)
	}
	return nil
}

// badScheme is the error of a URL whose scheme is not one of form's.
func badScheme(key string, u *url.URL, form string) *Error {
	scheme := "none"
	if u.Scheme != "" {
		scheme = strconv.Quote(u.Scheme)
	}
	return errf(key, "invalid URL: scheme "+scheme+" (value not shown); expected "+form)
}

// urlProblem returns the reason of a url.Parse failure without the URL itself.
func urlProblem(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	msg := err.Error()
	// url.EscapeError, url.InvalidHostError and the port and IP-literal
	// errors quote fragments of the input (a password holding an unescaped
	// '#', '/' or '?' ends the host early and is read as its port); keep
	// only their kind.
	var esc url.EscapeError
	var host url.InvalidHostError
	switch {
	case errors.As(err, &esc):
		msg = "invalid percent-escape"
	case errors.As(err, &host):
		msg = "invalid character in host"
	case strings.HasPrefix(msg, "invalid port "):
		msg = "invalid port after host"
	case strings.HasPrefix(msg, "invalid host: "):
		msg = "invalid host"
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
