package transport

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

// Canonical codes set on RequestRejectedError when the provider's own code
// is generic (e.g. DeepSeek's "invalid_request_error") but its message
// shows the kind of rejection.
const (
	CodeContextLength = "context_length_exceeded"
	CodeContentFilter = "content_filter"
)

// Codes and phrases every provider shares; profiles add their own.
var (
	commonDeadCodes          = []string{"insufficient_quota", "billing_hard_limit_reached", "account_deactivated", "insufficient_balance", "billing_error", "access_terminated"}
	commonContentFilterCodes = []string{"content_filter", "content_policy_violation", "data_inspection_failed", "ResponsibleAIPolicyViolation"}
	commonContextCodes       = []string{"context_length_exceeded", "string_above_max_length"}
	deadPhrases              = []string{"exceeded your current quota", "insufficient balance", "insufficient_quota", "insufficient account balance", "account is in arrears", "overdue"}
	contextPhrases           = []string{"context length", "context_length", "maximum context", "context window", "prompt is too long", "input is too long", "too many tokens", "range of input length", "model token limit", "max_model_len", "maximum input length"}
	filterPhrases            = []string{"content filter", "content_filter", "content management policy", "content policy", "inappropriate content", "sensitive content"}
)

// ClassifyResponse turns a failed HTTP exchange with src into one of the
// error classes, from the status, the headers (retry hints) and the body
// (the provider's error code, type and message, in any known envelope).
// status < 400 means "an error reported inside a 2xx body": the body's own
// code decides. The rules, in order:
//
//   - a code in the profile's TransientCodes → *core.TransientError
//     (rate_limited when the status is 429);
//   - 429 → *core.TransientError{Reason: rate_limited, RetryAfter}, except
//     "Request too large" → *core.RequestRejectedError (request_too_large),
//     and insufficient_quota-style codes, the profile's DeadCodes and
//     x-should-retry: false → *core.SourceDeadError;
//   - 401, 402, 403 → *core.SourceDeadError (403 for content filtering is
//     rejected instead);
//   - 408 → *core.TransientError{Reason: timeout};
//   - 5xx → *core.TransientError{Reason: server_error, RetryAfter}
//     (x-should-retry: false makes it a rejection);
//   - other 4xx → *core.RequestRejectedError with the provider's code and
//     message; a dead code makes it *core.SourceDeadError and
//     x-should-retry: true a transient error. Context overflow and content
//     filtering keep a specific provider code; a generic one is replaced by
//     CodeContextLength or CodeContentFilter.
//
// Every error carries Source = src.Name and StatusCode = status, and src's
// API key is redacted from its text. Waits are capped at
// DefaultMaxRetryAfter.
func ClassifyResponse(src *core.SourceConfig, prof core.ProviderProfile, status int, h http.Header, body []byte) error {
	return classifyResponse(src, &prof, status, h, parseEnvelope(body), DefaultMaxRetryAfter, time.Now())
}

// classifyResponse classifies the error answer env, and puts the
// provider's error.param on a rejection (withParam).
func classifyResponse(src *core.SourceConfig, prof *core.ProviderProfile, status int, h http.Header, env envelope, maxWait time.Duration, now time.Time) error {
	return withParam(classifyEnvelope(src, prof, status, h, env, maxWait, now), src, env.param)
}

// withParam puts the provider's error.param on a rejection, redacted and
// bounded like its code, so that a gateway can pass it to its client.
func withParam(err error, src *core.SourceConfig, param string) error {
	var rej *core.RequestRejectedError
	if param != "" && errors.As(err, &rej) {
		rej.Param = redact.CutRunes(strings.TrimSpace(RedactKey(param, src.APIKey)), 128)
	}
	return err
}

func classifyEnvelope(src *core.SourceConfig, prof *core.ProviderProfile, status int, h http.Header, env envelope, maxWait time.Duration, now time.Time) error {
	eff := status
	if status < 400 {
		eff = impliedStatus(prof, env)
	}
	ids := [3]string{env.code, env.typ, env.inner}
	has := func(lists ...[]string) bool {
		for _, list := range lists {
			for _, c := range list {
				for _, id := range ids {
					if id != "" && strings.EqualFold(id, c) {
						return true
					}
				}
			}
		}
		return false
	}
	code := env.code
	if code == "" {
		code = env.typ
	}
	lowerMsg := strings.ToLower(env.message)
	shouldRetry := strings.ToLower(strings.TrimSpace(h.Get("X-Should-Retry")))
	retry := func() time.Duration { return RetryAfter(h, now, maxWait) }
	dead := func() bool { return has(commonDeadCodes, prof.DeadCodes) || containsAny(lowerMsg, deadPhrases) }
	ctxLen := func() bool {
		return has(commonContextCodes, prof.ContextLengthCodes) || containsAny(lowerMsg, contextPhrases)
	}
	filter := func() bool {
		return has(commonContentFilterCodes, prof.ContentFilterCodes) || containsAny(lowerMsg, filterPhrases)
	}
	mk := errMaker{src: src, status: status, code: code, msg: env.message}

	switch {
	case has(prof.TransientCodes):
		if eff == 429 || rateLimitSignal(env) {
			return mk.transient(core.ReasonRateLimited, retry())
		}
		return mk.transient(core.ReasonNetworkError, retry())
	case eff == 429:
		if strings.Contains(lowerMsg, "request too large") {
			// This request exceeds the account's per-request limit: the
			// request is the problem, not the source (smaller ones pass).
			return mk.rejected(specificCode(code, false, "request_too_large"))
		}
		if dead() || shouldRetry == "false" {
			return mk.dead()
		}
		return mk.transient(core.ReasonRateLimited, retry())
	case eff == 401 || eff == 402 || eff == 403:
		if eff == 403 && filter() {
			return mk.rejectedFor(core.ReasonContentFilter, specificCode(code, has(commonContentFilterCodes, prof.ContentFilterCodes), CodeContentFilter))
		}
		return mk.dead()
	case eff == 408:
		return mk.transient(core.ReasonTimeout, retry())
	case eff >= 500:
		if shouldRetry == "false" {
			return mk.rejected(code)
		}
		return mk.transient(core.ReasonServerError, retry())
	case eff >= 400:
		if dead() {
			return mk.dead()
		}
		if shouldRetry == "true" {
			return mk.transient(core.ReasonNetworkError, retry())
		}
		if ctxLen() {
			return mk.rejectedFor(core.ReasonContextLength, specificCode(code, has(commonContextCodes, prof.ContextLengthCodes), CodeContextLength))
		}
		if filter() {
			return mk.rejectedFor(core.ReasonContentFilter, specificCode(code, has(commonContentFilterCodes, prof.ContentFilterCodes), CodeContentFilter))
		}
		return mk.rejected(code)
	}
	if env.message == "" {
		mk.msg = "unexpected http status " + strconv.Itoa(status)
	}
	return mk.transient(core.ReasonNetworkError, retry())
}

// specificCode keeps the provider's code when it names the condition
// itself, and uses canonical otherwise.
func specificCode(code string, specific bool, canonical string) string {
	if specific && code != "" {
		return code
	}
	return canonical
}

// impliedStatus derives an HTTP-like status for an error that arrived in a
// 2xx body or inside a stream.
func impliedStatus(prof *core.ProviderProfile, env envelope) int {
	if env.status >= 400 {
		return env.status
	}
	if env.minimax {
		switch env.code {
		case "1002", "1039", "1041":
			return 429
		case "1004", "2049":
			return 401
		case "1008":
			return 402
		case "1001":
			return 408
		case "1026", "1027", "2013":
			return 400
		}
	}
	switch strings.ToLower(env.typ) {
	case "rate_limit_error":
		return 429
	case "overloaded_error", "api_error":
		return 503
	case "authentication_error":
		return 401
	case "permission_error":
		return 403
	case "billing_error":
		return 402
	case "not_found_error":
		return 404
	case "request_too_large":
		return 413
	case "invalid_request_error":
		return 400
	case "timeout_error":
		return 408
	}
	if rateLimitSignal(env) {
		return 429
	}
	in := func(list []string) bool {
		for _, c := range list {
			if strings.EqualFold(c, env.code) || strings.EqualFold(c, env.typ) {
				return true
			}
		}
		return false
	}
	switch {
	case in(prof.TransientCodes):
		// A profile's transient codes are its throttles, though they may
		// read as dead elsewhere (DashScope's insufficient_quota).
		return 429
	case in(prof.DeadCodes) || in(commonDeadCodes):
		return 402
	case in(prof.ContentFilterCodes) || in(commonContentFilterCodes) ||
		in(prof.ContextLengthCodes) || in(commonContextCodes):
		return 400
	}
	return 500
}

func rateLimitSignal(env envelope) bool {
	for _, s := range [...]string{env.code, env.typ} {
		s = strings.ToLower(s)
		if strings.Contains(s, "rate_limit") || strings.Contains(s, "ratelimit") || strings.HasPrefix(s, "throttl") {
			return true
		}
	}
	return false
}

func containsAny(s string, phrases []string) bool {
	for _, p := range phrases {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// errMaker builds the class errors of one failure with redacted, bounded
// text.
type errMaker struct {
	src       *core.SourceConfig
	status    int
	code, msg string
	err       error
}

// clean returns the source name and the redacted, then bounded, code,
// message and cause.
func (m errMaker) clean() (name, code, msg string, err error) {
	var r *redact.Redactor
	if m.src != nil {
		name = m.src.Name
		r = redact.New(m.src.APIKey)
	}
	code = redact.CutRunes(strings.TrimSpace(r.String(m.code)), 128)
	return name, code, boundMessage(r.String(m.msg)), r.Error(m.err)
}

func (m errMaker) transient(reason core.Reason, retry time.Duration) error {
	name, code, msg, err := m.clean()
	return &core.TransientError{Source: name, Reason: reason, StatusCode: m.status, Code: code, Message: msg, RetryAfter: retry, Err: err}
}

func (m errMaker) dead() error {
	name, code, msg, err := m.clean()
	return &core.SourceDeadError{Source: name, StatusCode: m.status, Code: code, Message: msg, Err: err}
}

func (m errMaker) rejected(code string) error { return m.rejectedFor("", code) }

// rejectedFor is rejected with the rejection's kind (context length,
// content filter).
func (m errMaker) rejectedFor(reason core.Reason, code string) error {
	m.code = code
	name, code, msg, err := m.clean()
	return &core.RequestRejectedError{Source: name, StatusCode: m.status, Code: code, Reason: reason, Message: msg, Err: err}
}

// classifyNetError classifies a failure to talk to src (dial, TLS, reset,
// EOF before headers, body read errors): timeouts → ReasonTimeout,
// everything else → ReasonNetworkError. status is the HTTP status when
// headers had already arrived.
func classifyNetError(src *core.SourceConfig, status int, err error) error {
	var re *redirectError
	if errors.As(err, &re) {
		status = re.status
	}
	m := errMaker{src: src, status: status, msg: err.Error(), err: err}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, context.DeadlineExceeded) {
		return m.transient(core.ReasonTimeout, 0)
	}
	return m.transient(core.ReasonNetworkError, 0)
}
