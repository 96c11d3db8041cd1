package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
)

// RequestObserver is told what the server did with each request, for
// metrics; the metrics package's Gateway implements it. Its methods are
// called on the serving goroutines, concurrently, once per request after
// its answer: they must be safe for concurrent use and must not block.
type RequestObserver interface {
	// ObserveRequest reports one answered request. route is the path
	// pattern that served it ("/v1/chat/completions",
	// "/v1/models/{id...}"; RouteUnmatched for a path without a route);
	// status is the HTTP status sent (499 when the client went away before
	// any); client is the client key's digest id ("key-…", never the key),
	// or "" without client keys and for a request whose key was refused.
	ObserveRequest(route string, status int, client string)
	// ObserveRefusal reports a request refused before its governed call
	// could run, with why: one of the Refused* reasons.
	ObserveRefusal(reason string)
}

// RouteUnmatched is the route of a request no route serves (404, 405).
const RouteUnmatched = "unmatched"

// Reasons a request is refused before governance (ObserveRefusal).
const (
	// RefusedAuth: a missing or unknown client key (401).
	RefusedAuth = "auth"
	// RefusedBodyLimit: a body over MaxBodyBytes (413).
	RefusedBodyLimit = "body_limit"
	// RefusedClientRate: the client's rate limit (429 rate_limit_exceeded).
	RefusedClientRate = "client_rate"
	// RefusedInFlight: MaxInFlight requests were being served (503).
	RefusedInFlight = "in_flight"
	// RefusedBudget: a spend budget, the client key's or the scope's, is
	// used up for its window (429 budget_exhausted).
	RefusedBudget = "budget"
	// RefusedMemoryBudget: the request body bytes held in memory are at
	// their maximum, MaxBufferedBodyBytes (503 server_overloaded).
	RefusedMemoryBudget = "memory_budget"
	// RefusedDraining: the server is shutting down (503
	// server_shutting_down).
	RefusedDraining = "draining"
)

// refusalByCode maps the error codes of refusals to their reasons, with
// the status the gateway refuses with. A refusal whose code an upstream's
// rejection may also carry (its request_too_large, rate_limit_exceeded,
// invalid_api_key) is marked where it refuses (api, readBody), as are the
// in-flight cap (enter) and the memory budget's refusal of a request body
// (readBody), whose code server_overloaded an answer too large for the
// budget also gets after its call ran: a governed call that ran is no
// refusal. An upstream may send any of these
// codes too, but its rejection reaches the client as a 400 (a 502 for an
// upstream error), never with the status of the gateway's own refusal.
var refusalByCode = map[string]struct {
	status int
	reason string
}{
	"budget_exhausted":     {http.StatusTooManyRequests, RefusedBudget},
	"server_shutting_down": {http.StatusServiceUnavailable, RefusedDraining},
}

// refusal returns why the request, answered with status, was refused
// before governance, or "".
func (ri *reqInfo) refusal(status int) string {
	if ri.refused != "" {
		return ri.refused
	}
	if r, ok := refusalByCode[ri.code]; ok && r.status == status {
		return r.reason
	}
	return ""
}

// observe reports a finished request to the observer, if any.
func (s *Server) observe(ri *reqInfo, route string, status int) {
	o := s.cfg.Observer
	if o == nil {
		return
	}
	client := ""
	if ri.key > 0 && ri.key <= len(s.keyIDs) {
		client = s.keyIDs[ri.key-1]
	}
	o.ObserveRequest(route, status, client)
	if why := ri.refusal(status); why != "" {
		o.ObserveRefusal(why)
	}
}

// routeOf is the path of a multiplexer pattern ("POST /v1/embeddings" →
// "/v1/embeddings"), or RouteUnmatched.
func routeOf(pattern string) string {
	if pattern == "" {
		return RouteUnmatched
	}
	if _, path, ok := strings.Cut(pattern, " "); ok {
		return path
	}
	return pattern
}

// keyID is the public name of a client key: "key-" and the first twelve
// hex digits of its SHA-256 digest. It names the key in metrics, cache
// namespaces and budget keys; the key itself cannot be recovered from it.
func keyID(h [sha256.Size]byte) string { return "key-" + hex.EncodeToString(h[:6]) }

// IsKeyID reports whether s has the form of a client key's digest id
// ("key-" and 12 lower-case hex digits), the only form of a key that
// configuration errors may quote: any other text where an id belongs may
// be a key itself.
func IsKeyID(s string) bool {
	rest, ok := strings.CutPrefix(s, "key-")
	return ok && len(rest) == 12 && strings.Trim(rest, "0123456789abcdef") == ""
}

// shownKeyID is id quoted for an error when it is a digest id, or a
// placeholder that keeps whatever else it is out of logs.
func shownKeyID(id string) string {
	if IsKeyID(id) {
		return strconv.Quote(id)
	}
	return "an entry that is no digest id (not shown: it may be a key)"
}

// cacheNamespace is the cache namespace of a call of the request on a
// scope whose configured namespace is ns: with client keys (and without
// SharedCache), ns and the key's digest id, so that each key's cached
// answers are its own; otherwise "" (the scope's namespace).
func (s *Server) cacheNamespace(ri *reqInfo, ns string) string {
	if s.cfg.SharedCache || ns == "" || ri.key <= 0 || ri.key > len(s.keyIDs) {
		return ""
	}
	return ns + ":" + s.keyIDs[ri.key-1]
}

// timeoutHeader is the request header a client sets to shorten the
// request's deadline (seconds; clamped to Config.RequestTimeout).
const timeoutHeader = "X-PolyGateway-Timeout"
