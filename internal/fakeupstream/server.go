package fakeupstream

import (
	"io"
	"log"
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

// RequestInfo describes one chat completion request; WithFunc receives it.
type RequestInfo struct {
	// Index is the 0-based arrival order of the request since the server
	// started (ResetStats does not reset it).
	Index int
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
	flap     bool
	flapDown time.Duration
	flapUp   time.Duration
	flapB    Behavior
	limit    int
	over     Behavior
	history  int
	handlers map[string]http.Handler
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

// WithHandler serves h at URL()+path, for example "/embeddings", next to
// the chat completions endpoint. Such requests are not counted by the
// observability methods and do not consult the behavior options.
func WithHandler(path string, h http.Handler) Option {
	return func(c *config) {
		if c.handlers == nil {
			c.handlers = make(map[string]http.Handler)
		}
		c.handlers["/v1"+path] = h
	}
}

// Server is a running fake upstream. All its methods are safe for
// concurrent use.
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
}

// New starts a fake upstream configured by opts. Close it when done (or use
// Start in tests).
func New(opts ...Option) *Server {
	s := &Server{done: make(chan struct{})}
	s.cfg.history = DefaultBodyHistory
	for _, o := range opts {
		o(&s.cfg)
	}
	if s.cfg.history > 0 {
		s.bodies = make([][]byte, s.cfg.history)
	}
	s.ts = httptest.NewUnstartedServer(http.HandlerFunc(s.serveHTTP))
	s.ts.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.start = time.Now()
	s.cache = renderCache{m: make(map[renderKey]*rendered), created: s.start.Unix()}
	s.ts.Start()
	return s
}

// Start is New for tests: it registers Close with t.Cleanup.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := New(opts...)
	t.Cleanup(s.Close)
	return s
}

// URL returns the base URL of the API, ending in "/v1": clients POST to
// URL()+"/chat/completions".
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

// Requests returns how many chat completion requests arrived since the
// server started or since the last ResetStats.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// InFlight returns how many chat completion requests are being answered now.
func (s *Server) InFlight() int { return int(s.inFlight.Load()) }

// MaxInFlight returns the largest number of chat completion requests in
// flight at once (including those turned away by WithConcurrencyLimit)
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

// ResetStats clears Requests, Arrivals, Hits and Bodies, and sets
// MaxInFlight to the current InFlight. It does not rewind the script,
// RequestInfo.Index or the flapping phase.
func (s *Server) ResetStats() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests.Store(0)
	s.arrivals = nil
	clear(s.bodies)
	s.bodyNext, s.bodyLen = 0, 0
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

// next returns the behavior of WithFunc or WithScript, or OK().
func (s *Server) next(info *RequestInfo) Behavior {
	if s.cfg.fn != nil {
		return s.cfg.fn(*info)
	}
	if n := len(s.cfg.script); n > 0 {
		i := s.scriptPos.Add(1) - 1
		return s.cfg.script[min(i, int64(n-1))]
	}
	return Behavior{}
}
