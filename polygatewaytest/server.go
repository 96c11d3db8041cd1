package polygatewaytest

import (
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// DefaultBodyHistory is how many raw request bodies a Server keeps unless
// WithBodyHistory says otherwise.
const DefaultBodyHistory = 64

// DefaultAttemptLog is how many requests the attempt log keeps unless
// WithAttemptLog says otherwise.
const DefaultAttemptLog = 256

// MaxLoggedBody is how many bytes of a request body one Attempt keeps;
// longer bodies are truncated (Attempt.Truncated).
const MaxLoggedBody = 64 << 10

// RequestInfo describes one request answered by a Behavior (a chat
// completion or an embeddings request); WithFunc receives it.
type RequestInfo struct {
	// Index is the 0-based arrival order of the request since the server
	// started (ResetStats does not reset it).
	Index int
	// Path is the request's URL path: "/v1/chat/completions" or
	// "/v1/embeddings".
	Path string
	// Arrival is when the server received the request.
	Arrival time.Time
	// Model is the request's "model".
	Model string
	// Stream is the request's "stream".
	Stream bool
	// IncludeUsage is the request's "stream_options.include_usage".
	IncludeUsage bool
	// Messages is the number of entries in the request's "messages".
	Messages int
	// Inputs is the number of texts of an embeddings request's "input".
	Inputs int
	// Body is the raw request body. It is shared: do not modify it.
	Body []byte
	// Header is the request's header. Do not modify it.
	Header http.Header
}

// Option configures a Server.
type Option func(*config)

type config struct {
	script   []Behavior
	fn       func(RequestInfo) Behavior
	models   map[string]*modelScript
	names    []string // models listed by GET /v1/models, in order given
	embedDim int
	attempts int
	flap     bool
	flapDown time.Duration
	flapUp   time.Duration
	flapB    Behavior
	limit    int
	over     Behavior
	history  int
	handlers map[string]http.Handler
	listener net.Listener
}

// modelScript is the script of one model given by WithModel.
type modelScript struct {
	script []Behavior
	pos    atomic.Int64
}

// next returns the model's next behavior.
func (m *modelScript) next() Behavior {
	n := len(m.script)
	if n == 0 {
		return Behavior{}
	}
	i := m.pos.Add(1) - 1
	return m.script[min(i, int64(n-1))]
}

// addName lists model for GET /v1/models once.
func (c *config) addName(model string) {
	for _, n := range c.names {
		if n == model {
			return
		}
	}
	c.names = append(c.names, model)
}

// WithModel gives the requests whose "model" is model their own script:
// the i-th such request gets behaviors[i], every later one the last
// behavior, and with no behaviors every one gets OK(). Those requests do not
// consult or advance WithScript or WithFunc, so one server can play several
// upstream models with different faults:
//
//	polygatewaytest.NewServer(t,
//		polygatewaytest.WithModel("gpt-a", polygatewaytest.ServerError(503)),
//		polygatewaytest.WithModel("gpt-b"))
//
// It applies to chat and embeddings requests alike, after
// WithConcurrencyLimit and WithFlap. A later WithModel for the same model
// replaces the earlier one. The model is also listed by GET /v1/models.
// Every server the option is given to starts the script from its first
// behavior.
func WithModel(model string, behaviors ...Behavior) Option {
	script := append([]Behavior(nil), behaviors...)
	return func(c *config) {
		if c.models == nil {
			c.models = make(map[string]*modelScript)
		}
		c.models[model] = &modelScript{script: script}
		c.addName(model)
	}
}

// WithModels lists names, in order, in the answer to GET /v1/models (after
// any model named by WithModel before it). Without WithModels and WithModel
// the list holds DefaultModel only.
func WithModels(names ...string) Option {
	names = append([]string(nil), names...)
	return func(c *config) {
		for _, n := range names {
			c.addName(n)
		}
	}
}

// WithEmbeddingDim sets the length of the vectors the embeddings endpoint
// returns when the request has no "dimensions" (default
// DefaultEmbeddingDim). Values outside 1..MaxEmbeddingDim are clamped.
func WithEmbeddingDim(n int) Option {
	return func(c *config) { c.embedDim = min(max(n, 1), MaxEmbeddingDim) }
}

// WithAttemptLog keeps the last n requests in the attempt log (default
// DefaultAttemptLog; 0 keeps none). See Server.Attempts.
func WithAttemptLog(n int) Option {
	return func(c *config) { c.attempts = max(n, 0) }
}

// WithScript answers the i-th request reaching the script with
// behaviors[i], and every later one with the last behavior. It replaces any
// earlier WithScript or WithFunc. With no behaviors every request gets OK().
func WithScript(behaviors ...Behavior) Option {
	s := append([]Behavior(nil), behaviors...)
	return func(c *config) { c.script, c.fn = s, nil }
}

// WithBehavior answers every request with b; it is WithScript(b).
func WithBehavior(b Behavior) Option { return WithScript(b) }

// WithFunc lets f choose the behavior of every request, given what the
// server knows about it. f may be called concurrently. It replaces any
// earlier WithScript or WithFunc.
func WithFunc(f func(r RequestInfo) Behavior) Option {
	return func(c *config) { c.fn, c.script = f, nil }
}

// WithFlap makes the server flap, starting at its creation: for down it
// answers every request with downB, then for up it answers normally, and so
// on. A request's phase is decided by its arrival time. It takes precedence
// over WithScript and WithFunc, not over WithConcurrencyLimit. Non-positive
// durations disable flapping.
func WithFlap(down, up time.Duration, downB Behavior) Option {
	return func(c *config) {
		c.flap = down > 0 && up > 0
		c.flapDown, c.flapUp, c.flapB = down, up, downB
	}
}

// WithConcurrencyLimit admits at most n requests in flight; a request
// arriving while n admitted ones are still being answered gets over
// (typically RateLimited("1")) and is not admitted. It is checked before
// every other option. n <= 0 means no limit.
func WithConcurrencyLimit(n int, over Behavior) Option {
	return func(c *config) { c.limit, c.over = n, over }
}

// WithBodyHistory keeps the last k raw request bodies for Bodies (default
// DefaultBodyHistory; 0 keeps none).
func WithBodyHistory(k int) Option {
	return func(c *config) { c.history = max(k, 0) }
}

// WithHandler serves h at URL()+path, for example "/rerank", next to the
// built-in endpoints; a handler mounted at "/embeddings" or "/models"
// replaces the built-in one. Such requests are not counted by Requests and
// the other statistics and do not consult the behavior options; the
// attempt log records them with KindNone.
func WithHandler(path string, h http.Handler) Option {
	return func(c *config) {
		if c.handlers == nil {
			c.handlers = make(map[string]http.Handler)
		}
		c.handlers["/v1"+path] = h
	}
}

// WithListener serves on ln instead of a fresh loopback port, for a
// standalone server on a chosen address (see cmd/polygateway-fake); the
// server closes ln when it is closed.
func WithListener(ln net.Listener) Option {
	return func(c *config) { c.listener = ln }
}

// Server is a running fake OpenAI-compatible upstream. All its methods are
// safe for concurrent use.
type Server struct {
	ts        *httptest.Server
	cfg       config
	start     time.Time
	done      chan struct{}
	closeOnce sync.Once
	cache     renderCache

	seq       atomic.Int64 // requests ever received; gives RequestInfo.Index
	scriptPos atomic.Int64
	inFlight  atomic.Int64
	maxFlight atomic.Int64
	admitted  atomic.Int64
	requests  atomic.Int64

	mu       sync.Mutex
	arrivals []time.Duration // offsets from start, non-decreasing
	bodies   [][]byte        // ring of the last cfg.history bodies
	bodyNext int             // next ring slot
	bodyLen  int             // bodies held
	log      []Attempt       // ring of the last cfg.attempts attempts
	logNext  int             // next ring slot
	logLen   int             // attempts held
	logSeq   int             // attempts ever logged
}

// New starts a fake upstream configured by opts, for use outside tests
// (a demo, a local development server). Close it when done; in tests use
// NewServer, which closes it at the end of the test.
func New(opts ...Option) *Server {
	s := &Server{done: make(chan struct{})}
	s.cfg.history = DefaultBodyHistory
	s.cfg.attempts = DefaultAttemptLog
	s.cfg.embedDim = DefaultEmbeddingDim
	for _, o := range opts {
		o(&s.cfg)
	}
	if len(s.cfg.names) == 0 {
		s.cfg.names = []string{DefaultModel}
	}
	if s.cfg.history > 0 {
		s.bodies = make([][]byte, s.cfg.history)
	}
	if s.cfg.attempts > 0 {
		s.log = make([]Attempt, s.cfg.attempts)
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	if s.cfg.listener != nil {
		_ = s.ts.Listener.Close()
		s.ts.Listener = s.cfg.listener
	}
	s.ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.start = time.Now()
	s.cache = renderCache{m: make(map[renderKey]*rendered), created: s.start.Unix()}
	s.ts.Start()
	return s
}

// NewServer is New for tests: it starts a server configured by opts and
// registers its Close with t.Cleanup.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	return s
}

// URL returns the OpenAI-style base URL of the API, ending in "/v1": the
// value of a source's BASE_URL. Clients POST to URL()+"/chat/completions"
// and URL()+"/embeddings" and GET URL()+"/models".
func (s *Server) URL() string { return s.ts.URL + "/v1" }

// Client returns an *http.Client configured for the server; its idle
// connections are closed by Close.
func (s *Server) Client() *http.Client { return s.ts.Client() }

// Started returns when the server started; flapping phases count from it.
func (s *Server) Started() time.Time { return s.start }

// Close unblocks every request still being held (Hang, delays, stalls),
// drops all client connections and shuts the server down. It returns once
// every handler has finished and is safe to call more than once. Do not
// call it from a WithFunc function or a WithHandler handler: it waits for
// them.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
}

// Requests returns how many requests answered by a Behavior (chat
// completions and embeddings) arrived since the server started or since the
// last ResetStats.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// InFlight returns how many chat completion and embeddings requests are
// being answered now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// MaxInFlight returns the largest number of chat completion and embeddings
// requests in flight at once (including those turned away by WithConcurrencyLimit)
// since the server started or since the last ResetStats.
func (s *Server) MaxInFlight() int { return int(s.maxFlight.Load()) }

// Arrivals returns the arrival times of the requests counted by Requests,
// in order.
func (s *Server) Arrivals() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Time, len(s.arrivals))
	for i, d := range s.arrivals {
		out[i] = s.start.Add(d)
	}
	return out
}

// MostArrivalsWithin returns the largest number of the requests counted by
// Requests that arrived within any window of length w: the figure a
// provider's rate limiter sees ("at most 4 requests in any 3 s").
func (s *Server) MostArrivalsWithin(w time.Duration) int {
	return MostWithin(s.Arrivals(), w)
}

// MostWithin returns the largest number of times (sorted, oldest first)
// that fall within any window of length w: for request times recorded
// elsewhere (a custom http.RoundTripper), the figure MostArrivalsWithin
// gives for a Server.
func MostWithin(times []time.Time, w time.Duration) int {
	best := 0
	for i := range times {
		j := i
		for j < len(times) && times[j].Sub(times[i]) < w {
			j++
		}
		best = max(best, j-i)
	}
	return best
}

// Hits returns how many of the requests counted by Requests arrived at or
// after since.
func (s *Server) Hits(since time.Time) int {
	d := since.Sub(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.arrivals), func(i int) bool { return s.arrivals[i] >= d })
	return len(s.arrivals) - i
}

// Bodies returns copies of the last raw request bodies kept (see
// WithBodyHistory), oldest first.
func (s *Server) Bodies() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, 0, s.bodyLen)
	k := len(s.bodies)
	for i := range s.bodyLen {
		b := s.bodies[(s.bodyNext-s.bodyLen+i+k)%k]
		out = append(out, append([]byte(nil), b...))
	}
	return out
}

// LastBody returns a copy of the most recent raw request body kept, or nil.
func (s *Server) LastBody() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bodyLen == 0 {
		return nil
	}
	k := len(s.bodies)
	return append([]byte(nil), s.bodies[(s.bodyNext-1+k)%k]...)
}

// ResetStats clears Requests, Arrivals, Hits, Bodies and the attempt log,
// and sets MaxInFlight to the current InFlight. It does not rewind the
// scripts, RequestInfo.Index, Attempt.Seq or the flapping phase.
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests.Store(0)
	s.arrivals = nil
	clear(s.bodies)
	s.bodyNext, s.bodyLen = 0, 0
	clear(s.log)
	s.logNext, s.logLen = 0, 0
	s.maxFlight.Store(s.inFlight.Load())
}

// record notes an arrival and its body and returns its index and time.
func (s *Server) record(body []byte) (int, time.Time) {
	s.mu.Lock()
	now := time.Now()
	s.arrivals = append(s.arrivals, now.Sub(s.start))
	if k := len(s.bodies); k > 0 {
		s.bodies[s.bodyNext] = body
		s.bodyNext = (s.bodyNext + 1) % k
		s.bodyLen = min(s.bodyLen+1, k)
	}
	s.requests.Add(1)
	idx := s.seq.Add(1) - 1
	s.mu.Unlock()
	return int(idx), now
}

// enter counts a request in flight and updates the maximum.
func (s *Server) enter() {
	n := s.inFlight.Add(1)
	for {
		m := s.maxFlight.Load()
		if n <= m || s.maxFlight.CompareAndSwap(m, n) {
			return
		}
	}
}

// down reports whether arrival falls in a down window of WithFlap.
func (s *Server) down(arrival time.Time) bool {
	if !s.cfg.flap {
		return false
	}
	phase := arrival.Sub(s.start) % (s.cfg.flapDown + s.cfg.flapUp)
	return phase < s.cfg.flapDown
}

// next returns the behavior of WithModel, WithFunc or WithScript, or OK().
func (s *Server) next(info *RequestInfo) Behavior {
	if m, ok := s.cfg.models[info.Model]; ok {
		return m.next()
	}
	if s.cfg.fn != nil {
		return s.cfg.fn(*info)
	}
	if n := len(s.cfg.script); n > 0 {
		i := s.scriptPos.Add(1) - 1
		return s.cfg.script[min(i, int64(n-1))]
	}
	return Behavior{}
}
