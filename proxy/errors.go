package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// StatusClientClosedRequest is the status logged (never sent) for a request
// whose client went away before the answer: nginx's 499.
const StatusClientClosedRequest = 499

// apiError is an error as the client sees it: an HTTP status and an
// OpenAI-shaped body {"error": {"message", "type", "param", "code"}}.
type apiError struct {
	status     int
	typ        string
	code       string
	param      string
	msg        string
	retryAfter time.Duration
}

// errorBody is the OpenAI error envelope.
type errorBody struct {
	Error errorObject `json:"error"`
}

type errorObject struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// envelope is the body of e. Its message, param and code pass
// scrubAddresses once more, the net under every path that writes an error
// to a client (JSON bodies and stream error events alike): an upstream's
// rejection carries its own param and code.
func (e *apiError) envelope() *errorBody {
	code := scrubAddresses(e.code)
	obj := errorObject{Message: scrubAddresses(e.msg), Type: e.typ}
	if e.param != "" {
		param := scrubAddresses(e.param)
		obj.Param = &param
	}
	if code != "" {
		obj.Code = &code
	}
	return &errorBody{Error: obj}
}

func (e *apiError) body() []byte {
	b, _ := json.Marshal(e.envelope())
	return b
}

// retryAfterSeconds renders d for a Retry-After header: whole seconds,
// rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64(math.Ceil(d.Seconds()))
	return strconv.FormatInt(max(s, 1), 10)
}

// writeAPIError sends e as a JSON error response.
func writeAPIError(w http.ResponseWriter, e *apiError) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	if e.retryAfter > 0 || e.status == http.StatusServiceUnavailable || e.status == http.StatusTooManyRequests {
		h.Set("Retry-After", retryAfterSeconds(e.retryAfter))
	}
	w.WriteHeader(e.status)
	_, _ = w.Write(e.body())
}

func invalidRequest(status int, param, code, msg string) *apiError {
	return &apiError{status: status, typ: "invalid_request_error", code: code, param: param, msg: msg}
}

// errShuttingDown is the cause of calls cut by a forced shutdown.
var errShuttingDown = errors.New("server shutting down")

// mapError turns a governed call's error into what the client sees. gone
// reports that the client itself went away (its request context ended):
// then nothing is sent and the status is only logged.
//
// A client learns the class of the failure, the sources involved and their
// reasons, the upstream status and code, and (for a rejected request or an
// invalid result) the message that explains it; never an upstream URL, an
// IP address or a dial error: those stay in the error's full text, which
// callFailure writes to the server log.
func mapError(err error, gone bool) *apiError {
	var (
		reqErr      *requestError
		rejected    *polygateway.RequestRejectedError
		unavailable *polygateway.GatewayUnavailableError
		invalid     *polygateway.ResultInvalidError
		backend     *polygateway.GovernanceBackendError
		transient   *polygateway.TransientError
		dead        *polygateway.SourceDeadError
	)
	switch {
	case gone:
		return &apiError{status: StatusClientClosedRequest, typ: "client_closed_request", code: "client_closed_request", msg: "client closed the request"}
	case errors.As(err, &reqErr):
		return invalidRequest(http.StatusBadRequest, reqErr.param, reqErr.code, reqErr.msg)
	case errors.Is(err, errShuttingDown), errors.Is(err, polygateway.ErrClientClosed):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_shutting_down", msg: "the gateway is shutting down; retry", retryAfter: time.Second}
	case errors.Is(err, core.ErrMemoryBudget):
		// An answer that does not fit MaxBufferedBodyBytes: the server is
		// full, as for a body that does not fit.
		return bodyBusy
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{status: http.StatusGatewayTimeout, typ: "server_error", code: "timeout", msg: "the governed call was cancelled: " + publicText(err)}
	case errors.As(err, &backend):
		return &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "governance_backend_unavailable", msg: publicText(backend), retryAfter: time.Second}
	case errors.As(err, &unavailable) && (unavailable.Reason == core.ReasonBudgetExhausted || unavailable.Reason == core.ReasonRateLimited):
		// A spend budget is full until its window ends, or the scope is
		// throttled (its upstreams answered 429, or its gates are full
		// past what the call may wait): the client is over a quota, as
		// with a 429, and Retry-After says when to come back (the
		// official SDKs retry it on their own).
		return &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: string(unavailable.Reason), msg: publicText(unavailable), retryAfter: max(unavailable.RetryAfter, time.Second)}
	case errors.As(err, &unavailable):
		return &apiError{status: http.StatusServiceUnavailable, typ: "service_unavailable_error", code: string(unavailable.Reason), msg: publicText(unavailable), retryAfter: unavailable.RetryAfter}
	case errors.As(err, &rejected):
		code := rejected.Code
		if code == "" {
			code = "request_rejected"
		}
		// The provider's error.param names the request field at fault;
		// it reaches the client as OpenAI would send it.
		return invalidRequest(http.StatusBadRequest, rejected.Param, code, publicText(rejected))
	case errors.As(err, &invalid):
		return &apiError{status: http.StatusUnprocessableEntity, typ: "invalid_response_error", code: "result_invalid", msg: publicText(invalid)}
	case errors.As(err, &transient):
		code := transient.Code
		if code == "" {
			code = string(transient.Reason)
		}
		return &apiError{status: http.StatusBadGateway, typ: "upstream_error", code: code, msg: publicText(transient), retryAfter: transient.RetryAfter}
	case errors.As(err, &dead):
		return &apiError{status: http.StatusBadGateway, typ: "upstream_error", code: "source_dead", msg: publicText(dead)}
	}
	var unknown *polygateway.UnknownSourceError
	if errors.As(err, &unknown) {
		return invalidRequest(http.StatusNotFound, "source", "source_not_found", publicText(err))
	}
	return &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error", msg: publicText(err)}
}

// publicText is what a client may read of err: the text of the library's
// error types without the parts that can carry topology. A transient or
// dead source is named with its reason, status and code (its message and
// cause, where dial errors and upstream pages go, are left out); a
// rejection and an invalid result keep their message with addresses
// scrubbed; an unavailable scope names its sources' reasons and sums up
// its last attempt the same way (a queue deadline by its counts and
// durations); anything else is named by its class.
func publicText(err error) string {
	var (
		unavailable *polygateway.GatewayUnavailableError
		backend     *polygateway.GovernanceBackendError
		canceled    *polygateway.CanceledError
		transient   *polygateway.TransientError
		dead        *polygateway.SourceDeadError
		rejected    *polygateway.RequestRejectedError
		invalid     *polygateway.ResultInvalidError
		late        *core.QueueDeadlineError
	)
	switch {
	case err == nil:
		return ""
	case errors.As(err, &unavailable):
		cp := *unavailable
		cp.Err = nil
		text := cp.Error()
		if last := publicText(unavailable.Err); last != "" {
			text += "; last attempt: " + last
		}
		return text
	case errors.As(err, &backend):
		cp := *backend
		cp.Err = nil
		return cp.Error()
	case errors.As(err, &canceled), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		if errors.Is(err, context.DeadlineExceeded) {
			return "polygateway: call cancelled: " + context.DeadlineExceeded.Error()
		}
		return "polygateway: call cancelled: " + context.Canceled.Error()
	case errors.As(err, &transient):
		cp := *transient
		cp.Message, cp.Err = "", nil
		return cp.Error()
	case errors.As(err, &dead):
		cp := *dead
		cp.Message, cp.Err = "", nil
		return cp.Error()
	case errors.As(err, &rejected):
		cp := *rejected
		cp.Message, cp.Err = scrubAddresses(cp.Message), nil
		return cp.Error()
	case errors.As(err, &invalid):
		cp := *invalid
		cp.Message, cp.Raw, cp.Err = scrubAddresses(cp.Message), "", nil
		return cp.Error()
	case errors.As(err, &late):
		// Counts and durations only: how many calls were ahead, when the
		// call would have been admitted, what was left of its deadline.
		return late.Error()
	}
	return "internal error"
}

// callFailure maps the error of a governed call for the client, and logs
// its full text (the library redacts API keys from every error it makes)
// with the request id: the server log is where addresses and dial errors
// go.
func (s *Server) callFailure(r *http.Request, err error, gone bool) *apiError {
	e := mapError(err, gone)
	level := slog.LevelInfo
	switch {
	case e.status == StatusClientClosedRequest:
		level = slog.LevelDebug
	case e.status >= 500:
		level = slog.LevelWarn
	}
	if ctx := context.WithoutCancel(r.Context()); s.log.Enabled(ctx, level) {
		s.log.LogAttrs(ctx, level, "governed call failed",
			slog.String("request_id", info(r).id), slog.Int("status", e.status), slog.String("error_code", e.code),
			slog.String("class", polygateway.Classify(err).Class.String()), slog.String("error", err.Error()))
	}
	return e
}

// bodyReadFailure describes a failed read of a request body without the
// connection's addresses that the net error names.
func bodyReadFailure(err error) string {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return "could not read the request body: it did not arrive in time"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "could not read the request body: it ended early"
	}
	return "could not read the request body: the connection failed"
}

var (
	// urlPattern matches an absolute URL.
	urlPattern = regexp.MustCompile(`(?i)\b[a-z][a-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)
	// hostPortPattern matches localhost or a dotted host name with a port.
	hostPortPattern = regexp.MustCompile(`(?i)\b(?:localhost|[a-z0-9-]+(?:\.[a-z0-9-]+)+):[0-9]{1,5}\b`)
)

// scrubAddresses replaces URLs, IP addresses (with or without a port) and
// host:port pairs in s by placeholders.
func scrubAddresses(s string) string {
	// A replacement can expose another match ("host.name:1::" leaves "::"
	// behind): repeat until nothing changes.
	for range 4 {
		out := hostPortPattern.ReplaceAllString(scrubIPs(urlPattern.ReplaceAllString(s, "[url]")), "[address]")
		if out == s {
			break
		}
		s = out
	}
	return s
}

// scrubIPs replaces every IPv4 or IPv6 address in s, bracketed or not,
// with a port or not, by "[address]".
func scrubIPs(s string) string {
	isIPByte := func(c byte) bool {
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' || c == ':' || c == '.' || c == '[' || c == ']' || c == '%'
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		if !isIPByte(s[i]) || i > 0 && isWordByte(s[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(s) && isIPByte(s[j]) {
			if s[j] == '%' {
				// An IPv6 zone: "fe80::1%eth0".
				for j++; j < len(s) && (isWordByte(s[j]) || s[j] >= '0' && s[j] <= '9' || s[j] >= 'a' && s[j] <= 'f' || s[j] >= 'A' && s[j] <= 'F'); j++ {
				}
				continue
			}
			j++
		}
		if j < len(s) && isWordByte(s[j]) {
			i = j
			continue
		}
		if n := ipPrefix(s[i:j]); n > 0 {
			b.WriteString(s[last:i])
			b.WriteString("[address]")
			last = i + n
			i += n
			continue
		}
		i = j
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// isWordByte reports a letter (beyond a-f), digit or underscore: an address
// glued to one is part of a word, not an address.
func isWordByte(c byte) bool {
	return c >= 'g' && c <= 'z' || c >= 'G' && c <= 'Z' || c == '_'
}

// ipPrefix returns the length of the longest prefix of run that is an IP
// address, optionally bracketed and with a port, or 0.
func ipPrefix(run string) int {
	// The longest form, "[" + a full IPv6 address with a zone + "]:65535",
	// fits in 64 bytes: longer prefixes are never tried.
	for n := min(len(run), 64); n >= 2; n-- {
		c := run[:n]
		if c[n-1] == '.' || c[n-1] == '[' {
			continue
		}
		if host, _, err := net.SplitHostPort(c); err == nil && validIP(host) {
			return n
		}
		if validIP(strings.TrimSuffix(strings.TrimPrefix(c, "["), "]")) && strings.HasPrefix(c, "[") == strings.HasSuffix(c, "]") {
			return n
		}
	}
	return 0
}

// validIP reports an IPv4 address in dotted form or an IPv6 address.
func validIP(s string) bool {
	a, err := netip.ParseAddr(s)
	return err == nil && (a.Is6() || strings.Count(s, ".") == 3)
}
