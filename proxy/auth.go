package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// api wraps a /v1/ handler with client authentication and the per-client
// rate limit, both decided from the headers alone: a refused request's
// body is never read.
func (s *Server) api(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ri := info(r)
		key := -1
		if len(s.keyHashes) > 0 {
			var ok bool
			if key, ok = s.clientKeyIndex(r); !ok {
				ri.client = peerName(r)
				ri.code, ri.refused = "invalid_api_key", RefusedAuth
				leaveUnread(w, r)
				w.Header().Set("WWW-Authenticate", `Bearer realm="polygateway"`)
				writeAPIError(w, invalidRequest(http.StatusUnauthorized, "", "invalid_api_key", "missing or invalid API key: send Authorization: Bearer <key>"))
				return
			}
		}
		id := cleanID(r.Header.Get("X-Client-Id"))
		ri.client, ri.key = clientName(key, id, r), key+1
		ok, wait := true, time.Duration(0)
		switch {
		case s.keyed != nil:
			ok, wait = s.keyed.allow(key, id)
		case s.limiter != nil:
			ok, wait = s.limiter.allow(ri.client)
		}
		if !ok {
			ri.code, ri.refused = "rate_limit_exceeded", RefusedClientRate
			leaveUnread(w, r)
			writeAPIError(w, &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded",
				msg: "too many requests from this client; retry after the Retry-After delay", retryAfter: wait})
			return
		}
		h(w, r)
	})
}

// apiOrAdmin is api for a route an operator also reads with the admin
// token (which is no client key): a request carrying it is served as is,
// any other goes through api.
func (s *Server) apiOrAdmin(h http.HandlerFunc) http.Handler {
	client := s.api(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.adminAuthorized(r) {
			info(r).client = "admin"
			h(w, r)
			return
		}
		client.ServeHTTP(w, r)
	})
}

// clientName names the client for the rate limit and the log line: with
// client keys "key:<n>" (the key's 1-based place in ClientKeys, never the
// key) plus "/id:<X-Client-Id>" when one was sent; without, "id:<id>" or
// the peer IP ("ip:<addr>").
func clientName(key int, id string, r *http.Request) string {
	switch {
	case key >= 0 && id != "":
		return "key:" + strconv.Itoa(key+1) + "/id:" + id
	case key >= 0:
		return "key:" + strconv.Itoa(key+1)
	case id != "":
		return "id:" + id
	}
	return peerName(r)
}

// peerName is "ip:" and the peer's address.
func peerName(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return "ip:" + host
}

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	const p = "bearer "
	if len(h) <= len(p) || !strings.EqualFold(h[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(h[len(p):]), true
}

// clientKeyIndex compares the request's key with every configured key as
// SHA-256 digests in constant time (no early exit) and returns the index
// of the one it matches.
func (s *Server) clientKeyIndex(r *http.Request) (int, bool) {
	tok, ok := bearer(r)
	if !ok {
		return -1, false
	}
	sum := sha256.Sum256([]byte(tok))
	idx := -1
	for i := range s.keyHashes {
		idx = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(sum[:], s.keyHashes[i][:]), i, idx)
	}
	return idx, idx >= 0
}

// tokenIs checks the request's bearer token against a digest in constant
// time.
func tokenIs(r *http.Request, digest *[sha256.Size]byte) bool {
	tok, ok := bearer(r)
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], digest[:]) == 1
}

// adminAuthorized checks the admin bearer token.
func (s *Server) adminAuthorized(r *http.Request) bool {
	return s.adminOn && tokenIs(r, &s.adminHash)
}

// opsAuthorized reports whether the request carries the metrics or the
// admin token (each only when configured).
func (s *Server) opsAuthorized(r *http.Request) bool {
	m := s.metricsOn && tokenIs(r, &s.metricsHash)
	a := s.adminAuthorized(r)
	return m || a
}

// metrics guards the metrics handler with MetricsToken, when one is set.
func (s *Server) metrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.metricsOn && !s.opsAuthorized(r) {
			ri := info(r)
			w.Header().Set("WWW-Authenticate", `Bearer realm="polygateway-metrics"`)
			s.fail(w, ri, invalidRequest(http.StatusUnauthorized, "", "invalid_metrics_token", "missing or invalid metrics token"))
			return
		}
		h.ServeHTTP(w, r)
	})
}
