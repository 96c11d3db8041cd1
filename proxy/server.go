package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// ErrServerClosed is returned by Swap after Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// Server is the OpenAI-compatible HTTP face of one or more governed
// clients. It is an http.Handler; serve it with HTTPServer or any
// http.Server. All its methods are safe for concurrent use.
type Server struct {
	cfg     Config
	log     *slog.Logger
	mux     *http.ServeMux
	gen     atomic.Pointer[generation]
	limiter *clientLimiter // without client keys
	keyed   *keyLimiter    // with client keys
	bodies  bodyBudget

	keyHashes [][sha256.Size]byte
	keyIDs    []string // by key index: keyID of each key
	// defaultTimeout is RequestTimeout in seconds, as the answer's
	// X-PolyGateway-Timeout header says it.
	defaultTimeout string
	keyBudgets     []core.Budget // by key index; nil without client budgets
	// keyPriorities is each key's default priority, by key index; nil
	// without ClientPriorities.
	keyPriorities []core.Priority
	adminHash     [sha256.Size]byte
	adminOn       bool
	metricsHash   [sha256.Size]byte
	metricsOn     bool

	// hard is cancelled when a Shutdown runs out of time: the calls still
	// running are cancelled.
	hard       context.Context
	hardCancel context.CancelFunc

	calls atomic.Int64 // governed calls being served (MaxInFlight)
	// governing, when set (by tests, before the server serves), sees every
	// chat call as it is handed to its scope's client.
	governing func(*core.Call)

	mu       sync.Mutex // serialises Swap and Shutdown
	shut     bool
	draining atomic.Bool
	retiring sync.WaitGroup // generations waiting to drain and close
	closeMu  sync.Mutex
	closeErr []error
}

// New builds a server from cfg. The server owns the clients in
// cfg.Backends (see Backends).
func New(cfg Config) (*Server, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := cfg.Backends.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger}
	s.defaultTimeout = strconv.FormatFloat(cfg.RequestTimeout.Seconds(), 'f', -1, 64)
	s.hard, s.hardCancel = context.WithCancel(context.Background())
	for _, k := range cfg.ClientKeys {
		h := sha256.Sum256([]byte(k))
		s.keyHashes, s.keyIDs = append(s.keyHashes, h), append(s.keyIDs, keyID(h))
	}
	if s.keyBudgets, err = cfg.keyBudgets(s.keyHashes); err != nil {
		return nil, err
	}
	if s.keyPriorities, err = cfg.keyPriorities(s.keyHashes); err != nil {
		return nil, err
	}
	if err := s.checkBudgets(&cfg.Backends); err != nil {
		return nil, err
	}
	if cfg.AdminToken != "" {
		s.adminHash, s.adminOn = sha256.Sum256([]byte(cfg.AdminToken)), true
	}
	if cfg.MetricsToken != "" {
		s.metricsHash, s.metricsOn = sha256.Sum256([]byte(cfg.MetricsToken)), true
	}
	s.bodies.max = cfg.MaxBufferedBodyBytes
	switch {
	case cfg.ClientRate > 0 && len(cfg.ClientKeys) > 0:
		s.keyed = newKeyLimiter(len(cfg.ClientKeys), tokenRate{cfg.ClientRate, cfg.ClientBurst},
			tokenRate{cfg.ClientIDRate, cfg.ClientIDBurst}, max(1, cfg.MaxClients/len(cfg.ClientKeys)), cfg.Now)
	case cfg.ClientRate > 0:
		s.limiter = newClientLimiter(cfg.ClientRate, cfg.ClientBurst, cfg.MaxClients, cfg.Now)
	}
	s.gen.Store(newGeneration(cfg.Backends))
	s.cfg.Backends = Backends{} // the generation holds them now
	s.routes()
	return s, nil
}

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

// HTTPServer returns an http.Server serving s on addr with the configured
// header, read and idle timeouts and header size limit. Its WriteTimeout is
// zero on purpose: the server bounds every write itself (Config.WriteTimeout)
// so that long streams are not cut.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s,
		ReadHeaderTimeout: s.cfg.ReadHeaderTimeout,
		ReadTimeout:       s.cfg.ReadTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    s.cfg.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
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
	// queueWait is how long the answering call waited in an admission
	// queue, when its result tells it (0: unknown).
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
		attrs = append(attrs, slog.String("model", ri.model), slog.String("scope", ri.scope), slog.Bool("stream", ri.stream))
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
				ri.code = "invalid_api_key"
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
			ri.code = "rate_limit_exceeded"
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

// leaveUnread is called before answering a request refused before its
// body was read. net/http would otherwise read — and discard — up to
// 256 KiB of the body after the handler, to keep the connection alive:
// instead the connection closes after the answer, and its read deadline is
// set in the past so that nothing more is read from it.
func leaveUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
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

// bodyBudget is the server-wide count of bytes held in memory for the
// calls being served (MaxBufferedBodyBytes): request bodies and upstream
// answers together. It is the core.MemoryBudget every call's context
// carries (see withBudget), from which the transport reserves what it
// buffers of an answer.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

var _ core.MemoryBudget = (*bodyBudget)(nil)

// Reserve takes n bytes, or reports false when they do not fit.
func (b *bodyBudget) Reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Release gives back n bytes taken before.
func (b *bodyBudget) Release(n int64) { b.used.Add(-n) }

// withBudget returns ctx carrying the server's budget: the transport
// reserves from it what it buffers of the call's answers.
func (s *Server) withBudget(ctx context.Context) context.Context {
	return core.WithMemoryBudget(ctx, &s.bodies)
}

// bodyBusy is the answer when a body or an answer does not fit
// MaxBufferedBodyBytes.
var bodyBusy = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_overloaded",
	msg: "the gateway holds its maximum of buffered bytes; retry", retryAfter: time.Second}

// chunkedStep is the first buffer of a body without Content-Length; the
// buffer doubles from there, each step reserved before it is read into.
const chunkedStep = 16 << 10

// readBody reads a request body of at most MaxBodyBytes into memory
// reserved from the server's budget, and lifts the connection's read
// deadline afterwards, so that ReadTimeout bounds the upload but not the
// answer. A declared Content-Length is reserved (and allocated) whole
// before the first byte is read; a chunked body reserves each doubling of
// its buffer before reading into it. The bytes are decoded by encoding/json
// from this one buffer, which nothing refers to once decoded; the share
// stays reserved for the decoded request until the caller calls release,
// once the request's answer is complete. On error nothing stays reserved.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), _ *apiError) {
	limit := s.cfg.MaxBodyBytes
	tooLarge := invalidRequest(http.StatusRequestEntityTooLarge, "", "request_too_large",
		"request body larger than "+formatBytes(limit))
	if r.ContentLength > limit {
		return nil, nil, tooLarge
	}
	var held int64
	release = func() { s.bodies.Release(held) }
	reserve := func(n int64) bool {
		if !s.bodies.Reserve(n) {
			return false
		}
		held += n
		return true
	}
	fail := func(e *apiError) ([]byte, func(), *apiError) {
		release()
		if e == bodyBusy {
			leaveUnread(w, r)
		}
		return nil, nil, e
	}
	var err error
	if n := r.ContentLength; n >= 0 {
		if !reserve(n) {
			return fail(bodyBusy)
		}
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		mr := http.MaxBytesReader(w, r.Body, limit)
		for {
			if len(body) == cap(body) {
				c := min(max(2*int64(cap(body)), chunkedStep), limit+1) // +1: room to read the EOF of a body of exactly limit bytes
				if !reserve(c - int64(cap(body))) {
					return fail(bodyBusy)
				}
				grown := make([]byte, len(body), c)
				copy(grown, body)
				body = grown
			}
			var n int
			n, err = mr.Read(body[len(body):cap(body)])
			body = body[:len(body)+n]
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				break
			}
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fail(tooLarge)
		}
		return fail(invalidRequest(http.StatusBadRequest, "", "invalid_body", bodyReadFailure(err)))
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, release, nil
}

// acquire returns the current generation with a reference held, or nil
// when the server is shutting down.
func (s *Server) acquire() *generation {
	for {
		g := s.gen.Load()
		if g.acquire() {
			return g
		}
		if s.draining.Load() {
			return nil
		}
		// Retired by a concurrent Swap: the next Load sees its successor.
	}
}

// admit counts a request in, or refuses it when MaxInFlight requests are
// already being served; leave counts it out.
func (s *Server) admit() bool {
	n := s.calls.Add(1)
	if s.cfg.MaxInFlight > 0 && n > int64(s.cfg.MaxInFlight) {
		s.calls.Add(-1)
		return false
	}
	return true
}

func (s *Server) leave() { s.calls.Add(-1) }

// enter pins the current generation of clients and admits the request
// under MaxInFlight, before its body is read. On refusal it has answered
// the client and returns a nil generation; otherwise the caller defers
// leave.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, ri *reqInfo) (*generation, func()) {
	timeout, ae := s.requestTimeout(r)
	if ae != nil {
		leaveUnread(w, r)
		s.fail(w, ri, ae)
		return nil, nil
	}
	if ri.place, ae = s.place(r, ri); ae != nil {
		leaveUnread(w, r)
		s.fail(w, ri, ae)
		return nil, nil
	}
	ri.placed = true
	g := s.acquire()
	if g == nil {
		leaveUnread(w, r)
		s.fail(w, ri, mapError(errShuttingDown, false))
		return nil, nil
	}
	if !s.admit() {
		g.release()
		leaveUnread(w, r)
		ri.refused = RefusedInFlight
		s.fail(w, ri, overloaded)
		return nil, nil
	}
	ri.deadline = time.Now().Add(timeout)
	w.Header().Set(timeoutHeader, s.secondsText(timeout))
	return g, func() {
		s.leave()
		g.release()
	}
}

// overloaded is the answer beyond MaxInFlight.
var overloaded = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_overloaded",
	msg: "the gateway is serving its maximum number of requests; retry", retryAfter: time.Second}

// requestTimeout is the deadline of a request: the X-PolyGateway-Timeout
// header's seconds, at most RequestTimeout, or RequestTimeout without the
// header. A header that is not a number of seconds > 0 is a 400 naming it.
func (s *Server) requestTimeout(r *http.Request) (time.Duration, *apiError) {
	limit := s.cfg.RequestTimeout
	v := strings.TrimSpace(r.Header.Get(timeoutHeader))
	if v == "" {
		return limit, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || !(secs > 0) || math.IsInf(secs, 0) {
		return 0, invalidRequest(http.StatusBadRequest, timeoutHeader, "invalid_value",
			timeoutHeader+" "+strconv.Quote(v)+" is not a number of seconds > 0")
	}
	if secs >= limit.Seconds() {
		return limit, nil
	}
	return max(time.Duration(secs*float64(time.Second)), time.Millisecond), nil
}

// secondsText is d in seconds as X-PolyGateway-Timeout says it.
func (s *Server) secondsText(d time.Duration) string {
	if d == s.cfg.RequestTimeout {
		return s.defaultTimeout
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// callContext derives the context of a governed call: it ends when the
// client goes away, when the request's deadline (requestTimeout) passes or
// when a Shutdown runs out of time.
func (s *Server) callContext(r *http.Request) (context.Context, func()) {
	deadline := info(r).deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(s.cfg.RequestTimeout)
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	stop := context.AfterFunc(s.hard, cancel)
	return ctx, func() { stop(); cancel() }
}

// callError maps the error of a governed call, telling a client that went
// away and a forced shutdown apart from the call's own failure.
func (s *Server) callError(r *http.Request, err error) *apiError {
	if r.Context().Err() != nil {
		return s.callFailure(r, err, true)
	}
	if s.hard.Err() != nil && errors.Is(err, context.Canceled) {
		err = errShuttingDown
	}
	return s.callFailure(r, err, false)
}

// Swap replaces the routes and clients atomically (a SIGHUP reload). New
// requests use b at once; requests already running finish on the clients
// they started with, which are closed once the last of them is done
// (clients that b also holds stay open). An invalid b is an error and
// changes nothing.
func (s *Server) Swap(b Backends) error {
	if err := b.validate(); err != nil {
		return err
	}
	if err := s.checkBudgets(&b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return ErrServerClosed
	}
	ng := newGeneration(b)
	old := s.gen.Swap(ng)
	s.retire(old, ng)
	return nil
}

// retire retires g and closes its clients (except those keep holds) in the
// background once it has drained. Called with s.mu held.
func (s *Server) retire(g, keep *generation) {
	g.retire()
	closers := g.closers(keep)
	s.retiring.Add(1)
	go func() {
		defer s.retiring.Done()
		<-g.drained
		for _, c := range closers {
			if err := c.Close(); err != nil {
				s.log.Warn("closing a replaced client failed", slog.String("error", err.Error()))
				s.closeMu.Lock()
				s.closeErr = append(s.closeErr, err)
				s.closeMu.Unlock()
			}
		}
	}()
}

// Shutdown stops admitting calls — from its first instant /readyz answers
// 503 and new chat and embeddings requests get 503 server_shutting_down
// with Retry-After — waits for the calls in flight, streams included, to
// finish, and closes every client. If ctx ends first, the remaining calls
// are cancelled (a committed stream ends with an error event, never with
// [DONE]) and Shutdown returns ctx's error once they have unwound. Keep the
// http.Server listening while it runs, so that a request arriving during
// the drain gets its 503 rather than a refused connection, and stop it
// (http.Server.Shutdown) once Shutdown has returned. Calling Shutdown again
// waits for the first one.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shut {
		s.shut = true
		s.draining.Store(true)
		s.retire(s.gen.Load(), nil)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.retiring.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.hardCancel()
		<-done
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return errors.Join(append([]error{err}, s.closeErr...)...)
}

// InFlight returns the number of API requests being served.
func (s *Server) InFlight() int { return s.gen.Load().inflight() }

// formatBytes renders a byte count for messages.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
