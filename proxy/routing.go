package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// routes builds the request multiplexer.
func (s *Server) routes() {
	m := http.NewServeMux()
	m.Handle("POST /v1/chat/completions", s.api(s.handleChat))
	m.Handle("POST /v1/responses", s.api(s.handleResponses))
	m.Handle("POST /v1/embeddings", s.api(s.handleEmbeddings))
	m.Handle("GET /v1/models", s.api(s.handleModels))
	m.Handle("GET /v1/models/{id...}", s.api(s.handleModel))
	m.Handle("GET /v1/providers", s.apiOrAdmin(s.handleProviders))
	m.HandleFunc("GET /healthz", s.handleHealth)
	m.HandleFunc("GET /readyz", s.handleReady)
	m.HandleFunc("POST /admin/breakers/{source}/reset", s.admin(s.handleResetBreaker))
	m.HandleFunc("POST /admin/breakers/reset", s.admin(s.handleResetAll))
	m.HandleFunc("POST /admin/sources/{source}/disable", s.admin(s.handleSwitch(false)))
	m.HandleFunc("POST /admin/sources/{source}/enable", s.admin(s.handleSwitch(true)))
	m.HandleFunc("GET /admin/budgets", s.admin(s.handleBudgets))
	if s.cfg.Metrics != nil {
		m.Handle("GET /metrics", s.metrics(s.cfg.Metrics))
	}
	s.mux = m
}

// reqInfo is what one request's log line reports; handlers fill it.
type reqInfo struct {
	id, client, model, scope, source string
	attempts                         []string
	cache, stream                    bool
	// key is the client key's index + 1 (0 = no key).
	key int
	// route is the route (model name) of the scope tried last, the one
	// that answered on success; routes lists every route tried when the
	// request named fallbacks.
	route  string
	routes []string
	// status is logged when nothing was sent (a client that went away: 499).
	status int
	// code is the error code; outcome how the request ended when the wire
	// status does not tell it (a stream cut after its 200); both "" = ok.
	code, outcome string
	// refused is why the request was refused before governance when its
	// code does not tell it (see refusal).
	refused string
	// deadline is when the request's governed call ends at the latest, set
	// at its admission (enter).
	deadline time.Time
	// place is the governed call's priority and tenant, set at its
	// admission (enter, placed true).
	place  core.Place
	placed bool
	// queueWait is how long the request's chat calls (every route tried)
	// waited in admission queues for full gates; an embeddings request's
	// is not known (0).
	queueWait time.Duration
}

type ctxKey struct{}

func info(r *http.Request) *reqInfo {
	if ri, ok := r.Context().Value(ctxKey{}).(*reqInfo); ok {
		return ri
	}
	return &reqInfo{}
}

// ServeHTTP serves one request: it assigns the request id, routes the
// request and logs one line when it is done.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ri := &reqInfo{id: cleanID(r.Header.Get("X-Request-ID"))}
	if ri.id == "" {
		ri.id = polygateway.NewCallID()
	}
	w.Header().Set("X-Request-ID", ri.id)
	sw := &statusWriter{ResponseWriter: w}
	r = r.WithContext(context.WithValue(r.Context(), ctxKey{}, ri))
	_, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route: an unknown path (404) or a known one with another
		// method (405 with Allow), in OpenAI's error shape.
		s.mux.ServeHTTP(&routeErrorWriter{statusWriter: sw, r: r}, r)
	} else {
		s.mux.ServeHTTP(sw, r)
	}
	// The log records the status the client received; a response never
	// begun (the client went away) logs ri.status (499).
	status := sw.status
	if status == 0 {
		status = ri.status
	}
	if status == 0 {
		status = http.StatusOK
	}
	s.observe(ri, routeOf(pattern), status)
	outcome := ri.outcome
	if outcome == "" {
		outcome = cmpOr(ri.code, "ok")
	}
	level := slog.LevelInfo
	switch {
	case status >= 500, status < 300 && outcome != "ok":
		level = slog.LevelWarn
	case r.URL.Path == "/healthz" || r.URL.Path == "/readyz" || r.URL.Path == "/metrics":
		level = slog.LevelDebug // probes and scrapes would drown the log
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", ri.id),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", status),
		slog.Int64("bytes", sw.bytes),
		slog.Float64("latency_ms", float64(time.Since(start).Microseconds())/1000),
	}
	if ri.client != "" {
		attrs = append(attrs, slog.String("client", ri.client))
	}
	if ri.model != "" {
		attrs = append(attrs, slog.String("model", shown(ri.model)), slog.String("scope", ri.scope), slog.Bool("stream", ri.stream))
	}
	if len(ri.routes) > 0 {
		attrs = append(attrs, slog.String("routes", joinComma(ri.routes)))
	}
	if ri.source != "" {
		attrs = append(attrs, slog.String("source", ri.source), slog.String("attempts", joinComma(ri.attempts)), slog.Bool("cache_hit", ri.cache))
	}
	attrs = ri.placeAttrs(attrs)
	attrs = append(attrs, slog.String("outcome", outcome))
	if ri.code != "" {
		attrs = append(attrs, slog.String("error_code", ri.code))
	}
	s.log.LogAttrs(context.WithoutCancel(r.Context()), level, "request", attrs...)
}

// statusWriter records the status and size of a response. Unwrap lets
// http.ResponseController reach the connection (flush, deadlines).
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// routeErrorWriter turns the multiplexer's plain-text 404 and 405 (whose
// Allow header it keeps) into OpenAI-shaped errors.
type routeErrorWriter struct {
	*statusWriter
	r       *http.Request
	written bool
}

func (w *routeErrorWriter) WriteHeader(code int) {
	if w.written {
		return
	}
	w.written = true
	ri := info(w.r)
	h := w.Header()
	h.Del("Content-Type")
	h.Del("X-Content-Type-Options")
	var e *apiError
	switch code {
	case http.StatusMethodNotAllowed:
		ri.code = "method_not_allowed"
		e = invalidRequest(code, "", "method_not_allowed", w.r.Method+" is not allowed on "+w.r.URL.Path+" (allowed: "+h.Get("Allow")+")")
	case http.StatusNotFound:
		ri.code = "not_found"
		e = invalidRequest(code, "", "not_found", "no route for "+w.r.Method+" "+w.r.URL.Path)
	default: // a redirect to the cleaned path
		w.statusWriter.WriteHeader(code)
		return
	}
	writeAPIError(w.statusWriter, e)
}

func (w *routeErrorWriter) Write(p []byte) (int, error) {
	if !w.written {
		w.WriteHeader(http.StatusOK)
	}
	if ri := info(w.r); ri.code == "method_not_allowed" || ri.code == "not_found" {
		return len(p), nil // the multiplexer's own text: replaced
	}
	return w.statusWriter.Write(p)
}

// cmpOr returns a, or b when a is empty.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
