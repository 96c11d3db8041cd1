package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Defaults of Config's zero fields.
const (
	DefaultMaxBodyBytes        = 32 << 20
	DefaultMaxErrorBodyBytes   = 64 << 10
	DefaultMaxStreamBytes      = 256 << 20
	DefaultMaxIdleConnsPerHost = 128
	DefaultIdleConnTimeout     = 90 * time.Second
	DefaultUserAgent           = "polygateway-go"
)

// Config configures a Client. The zero value is valid; every zero field
// takes the default named in its comment.
type Config struct {
	// HTTPClient, when set, sends every request; its transport then decides
	// about proxies and SourceConfig.TrustEnv has no effect. Nil (default):
	// the Client builds two pooled transports, one honouring
	// HTTP_PROXY/HTTPS_PROXY/NO_PROXY (TrustEnv=true) and one ignoring them
	// (TrustEnv=false). Its Timeout should be 0: attempts are bounded by
	// SourceConfig.Timeout through the context. The Client sends through a
	// shallow copy whose CheckRedirect follows no redirect (the caller's
	// client is not modified): see Client.Send.
	HTTPClient *http.Client
	// Profiles are the provider dialects keyed by provider name (keys are
	// matched case-insensitively). Nil: DefaultProfiles(). Providers
	// without an entry use the "openai" entry, else the built-in OpenAI
	// profile.
	Profiles map[string]core.ProviderProfile
	// Logger receives debug records of failed attempts. Nil: discard.
	Logger *slog.Logger
	// MaxBodyBytes bounds a non-streaming response body. Default 32 MiB.
	MaxBodyBytes int64
	// MaxErrorBodyBytes bounds the part of an error response body read for
	// classification. Default 64 KiB.
	MaxErrorBodyBytes int64
	// MaxEventBytes bounds one SSE event (and one line). Default 8 MiB.
	MaxEventBytes int
	// MaxStreamBytes bounds the bytes read from one streaming response.
	// Default 256 MiB.
	MaxStreamBytes int64
	// MaxRetryAfter caps every server retry hint. Default 10 minutes.
	MaxRetryAfter time.Duration
	// MaxIdleConnsPerHost of the built transports: enough idle connections
	// to serve 64 concurrent calls to one host without redialling.
	// Default 128.
	MaxIdleConnsPerHost int
	// IdleConnTimeout of the built transports. Default 90s.
	IdleConnTimeout time.Duration
	// UserAgent is sent with every request. Default "polygateway-go".
	UserAgent string
	// Inject, when set, writes the trace context of a request's context
	// into its headers (a Tracer's Inject) before it is sent.
	Inject func(ctx context.Context, h http.Header)
}

// Client sends chat completions to OpenAI-compatible endpoints, one
// attempt per Do, and classifies every failure into the error classes of
// package core. It is safe for concurrent use.
type Client struct {
	cfg      Config
	profiles map[string]core.ProviderProfile
	log      *slog.Logger

	// own holds the built transports: [0] honours proxy settings from the
	// environment, [1] does not. Empty with Config.HTTPClient.
	own []*http.Transport
	// hc is the copy of Config.HTTPClient that follows no redirect; nil
	// without one.
	hc *http.Client

	// Shared, never modified header values.
	hdrJSON, hdrSSE, hdrUA []string

	states    sync.Pool // *attemptState
	bodies    sync.Pool // *reqBody
	watchdogs sync.Pool // *watchdog

	mu        sync.RWMutex
	endpoints map[endpointKey]*endpoint
}

var _ core.Upstream = (*Client)(nil)

type endpointKey struct{ base, key, model string }

// endpoint caches the request URL, the Authorization header and the
// opening of a request body of a source.
type endpoint struct {
	// head is the body's opening for the source's model (modelHead).
	head []byte
	// u is the chat completions URL parsed once, or nil with err saying why
	// it is unusable; an attempt sends a copy of it.
	u      *url.URL
	err    error
	auth   []string // nil: no Authorization header
	apiKey []string // the key alone, for Azure's api-key header
}

// endpointURL appends /chat/completions to the path of base, keeping a
// query string (Azure's ?api-version=…) at the end.
func endpointURL(base string) string {
	base = strings.TrimSpace(base)
	query := ""
	if i := strings.IndexByte(base, '?'); i >= 0 {
		base, query = base[:i], base[i:]
	}
	return strings.TrimRight(base, "/") + "/chat/completions" + query
}

// smallBodyBytes is the largest request body sent from a private copy.
const smallBodyBytes = 64 << 10

// maxEndpoints bounds the endpoint cache.
const maxEndpoints = 1024

// New returns a Client for cfg. The config is copied; the caller's maps
// are never modified.
func New(cfg Config) *Client {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.MaxErrorBodyBytes <= 0 {
		cfg.MaxErrorBodyBytes = DefaultMaxErrorBodyBytes
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = DefaultMaxEventBytes
	}
	if cfg.MaxStreamBytes <= 0 {
		cfg.MaxStreamBytes = DefaultMaxStreamBytes
	}
	if cfg.MaxRetryAfter <= 0 {
		cfg.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if cfg.MaxIdleConnsPerHost <= 0 {
		cfg.MaxIdleConnsPerHost = DefaultMaxIdleConnsPerHost
	}
	if cfg.IdleConnTimeout <= 0 {
		cfg.IdleConnTimeout = DefaultIdleConnTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = DefaultUserAgent
	}
	c := &Client{
		hdrJSON:   []string{"application/json"},
		hdrSSE:    []string{"text/event-stream"},
		hdrUA:     []string{cfg.UserAgent},
		endpoints: make(map[endpointKey]*endpoint),
	}
	if cfg.Profiles == nil {
		c.profiles = DefaultProfiles()
	} else {
		c.profiles = make(map[string]core.ProviderProfile, len(cfg.Profiles))
		for k, p := range cfg.Profiles {
			c.profiles[strings.ToLower(k)] = cloneProfile(p)
		}
	}
	cfg.Profiles = nil
	c.log = cfg.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if cfg.HTTPClient == nil {
		c.own = []*http.Transport{newHTTPTransport(&cfg, true), newHTTPTransport(&cfg, false)}
	} else {
		hc := *cfg.HTTPClient
		hc.CheckRedirect = stopAtRedirect
		c.hc = &hc
	}
	c.cfg = cfg
	c.states.New = func() any { return new(attemptState) }
	c.bodies.New = func() any { return &reqBody{b: make([]byte, 0, 4096)} }
	c.watchdogs.New = func() any { return newWatchdog() }
	return c
}

func newHTTPTransport(cfg *Config, trustEnv bool) *http.Transport {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          max(256, 2*cfg.MaxIdleConnsPerHost),
		MaxIdleConnsPerHost:   cfg.MaxIdleConnsPerHost,
		IdleConnTimeout:       cfg.IdleConnTimeout,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	if trustEnv {
		t.Proxy = http.ProxyFromEnvironment
	}
	return t
}

// Close closes idle connections. It is idempotent; the Client stays usable
// (new connections are dialled on demand).
func (c *Client) Close() error {
	for _, t := range c.own {
		t.CloseIdleConnections()
	}
	if c.cfg.HTTPClient != nil {
		c.cfg.HTTPClient.CloseIdleConnections()
	}
	return nil
}

// Profile returns the profile the Client uses for provider name.
func (c *Client) Profile(name string) core.ProviderProfile {
	return ProfileFor(c.profiles, name)
}

// send performs the exchange. The Client's own transports are called
// directly (chat completions never follow redirects nor use cookies, and
// http.Client's per-request bookkeeping is measurable on the hot path); a
// caller-supplied http.Client is used as a client, honouring its settings
// except redirects. Whichever sends, a redirect is never followed: a 3xx
// answer is closed and returned as a *redirectError (see Send).
func (c *Client) send(src *core.SourceConfig, req *http.Request) (*http.Response, error) {
	var (
		resp *http.Response
		err  error
	)
	if c.cfg.Inject != nil {
		c.cfg.Inject(req.Context(), req.Header)
	}
	if c.hc != nil {
		resp, err = c.hc.Do(req)
	} else {
		resp, err = c.transportFor(src).RoundTrip(req)
	}
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return nil, refuseRedirect(req, resp)
	}
	return resp, nil
}

// transportFor picks the built transport honouring src.TrustEnv.
func (c *Client) transportFor(src *core.SourceConfig) *http.Transport {
	if src.TrustEnv {
		return c.own[0]
	}
	return c.own[1]
}

// endpointFor returns the cached URL, Authorization header and body
// opening of src.
func (c *Client) endpointFor(src *core.SourceConfig) *endpoint {
	k := endpointKey{base: src.BaseURL, key: src.APIKey, model: src.Model}
	c.mu.RLock()
	e := c.endpoints[k]
	c.mu.RUnlock()
	if e != nil {
		return e
	}
	e = &endpoint{head: modelHead(src.Model)}
	e.u, e.err = url.Parse(endpointURL(src.BaseURL))
	if e.err == nil && (e.u.Host == "" || e.u.Scheme != "http" && e.u.Scheme != "https") {
		e.u, e.err = nil, errors.New("base url needs an http(s) scheme and a host")
	}
	if e.u != nil {
		// As http.NewRequest does: "host:" is "host".
		e.u.Host = strings.TrimSuffix(e.u.Host, ":")
	}
	if key := strings.TrimSpace(src.APIKey); key != "" && !strings.EqualFold(key, "none") {
		e.auth = []string{"Bearer " + key}
		e.apiKey = []string{key}
	}
	c.mu.Lock()
	if len(c.endpoints) >= maxEndpoints {
		clear(c.endpoints)
	}
	c.endpoints[k] = e
	c.mu.Unlock()
	return e
}

// Do performs one attempt of call against src: it sends the chat
// completions request (streaming when call.Stream), assembles the answer
// and classifies any failure:
//
//   - *core.TransientError, *core.SourceDeadError, *core.RequestRejectedError
//     as ClassifyResponse and the stream rules describe;
//   - when ctx ends, a *core.CanceledError wrapping ctx.Err() (so
//     errors.Is(err, ctx.Err()) holds); the attempt's own limits
//     (src.Timeout, the stream watchdog) are TransientErrors instead.
//
// See the package documentation for the stream rules.
func (c *Client) Do(ctx context.Context, src *core.SourceConfig, call *core.Call) (*core.LLMResponse, error) {
	if src == nil || call == nil {
		return nil, &core.RequestRejectedError{Message: "nil source or call"}
	}
	if err := ctx.Err(); err != nil {
		return nil, &core.CanceledError{Err: err}
	}
	prof := ProfileFor(c.profiles, src.ProfileName())
	start := time.Now()

	st := c.states.Get().(*attemptState)
	resp, err := c.attempt(ctx, src, call, &prof, st, start)
	st.clear()
	if !st.oversized() {
		c.states.Put(st)
	}
	if err != nil && c.log.Enabled(ctx, slog.LevelDebug) {
		c.log.DebugContext(ctx, "polygateway: upstream attempt failed",
			slog.String("source", src.Name), slog.String("class", core.ErrorClass(err)), slog.String("error", err.Error()))
	}
	return resp, err
}

func (c *Client) attempt(ctx context.Context, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile, st *attemptState, start time.Time) (*core.LLMResponse, error) {
	actx := ctx
	var wd *watchdog
	watch := call.Stream && (src.TTFTTimeout > 0 || src.InterTokenTimeout > 0)
	if watch || src.Timeout > 0 {
		var cancel context.CancelCauseFunc
		actx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		var ttft, inter time.Duration
		if watch {
			ttft, inter = src.TTFTTimeout, src.InterTokenTimeout
		}
		wd = c.watchdogs.Get().(*watchdog)
		wd.arm(start, src.Timeout, ttft, inter, cancel)
		defer func() {
			wd.disarm()
			c.watchdogs.Put(wd)
		}()
	}
	st.clock.reset(start, wd)
	st.asm.mem.init(ctx)

	rb := c.bodies.Get().(*reqBody)
	rb.off = 0
	rb.closed.Store(false)
	ep := c.endpointFor(src)
	var err error
	rb.b, err = encodeRequestAfter(rb.b[:0], ep.head, src, call, prof)
	if err != nil {
		c.putBody(rb)
		return nil, errMaker{src: src, msg: err.Error(), err: err}.rejected("invalid_request")
	}
	if ep.err != nil {
		c.putBody(rb)
		return nil, errMaker{src: src, msg: "invalid base url: " + ep.err.Error(), err: ep.err}.dead()
	}
	// The endpoint's URL was parsed (and checked) once: the request gets
	// a copy of it instead of parsing the same string on every attempt,
	// and is built as http.NewRequestWithContext builds one.
	u := new(url.URL)
	*u = *ep.u
	req := (&http.Request{Method: http.MethodPost, URL: u, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: make(http.Header, 6), Host: u.Host}).WithContext(actx)
	req.ContentLength = int64(len(rb.b))
	if len(rb.b) <= smallBodyBytes {
		// A private copy in a *bytes.Reader: net/http recognises it as an
		// in-memory body and sends headers and body in one write, and the
		// pooled buffer is free again at once.
		req.Body = io.NopCloser(bytes.NewReader(bytes.Clone(rb.b)))
		c.putBody(rb)
	} else {
		// Large bodies (images) are sent from the pooled buffer, which is
		// reused only after the transport has closed it.
		req.Body = rb
		defer c.releaseBody(rb)
	}
	req.Header["Content-Type"] = c.hdrJSON
	if call.Stream {
		req.Header["Accept"] = c.hdrSSE
	}
	req.Header["User-Agent"] = c.hdrUA
	if ep.auth != nil {
		req.Header["Authorization"] = ep.auth
		if prof.Name == "azure" || strings.EqualFold(src.Provider, "azure") {
			// Azure deployments authenticate API keys by api-key; its v1
			// API also accepts the bearer form.
			req.Header["Api-Key"] = ep.apiKey
		}
	}

	resp, err := c.send(src, req)
	if err != nil {
		return nil, c.ioFailure(ctx, actx, src, 0, err)
	}
	defer resp.Body.Close()

	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		st.body, err = readBody(resp.Body, st.body, c.cfg.MaxErrorBodyBytes, -1, nil)
		if err != nil && !errors.Is(err, errBodyTooLarge) && actx.Err() != nil {
			return nil, c.ioFailure(ctx, actx, src, resp.StatusCode, err)
		}
		env := parseEnvelope(st.body)
		return nil, classifyResponse(src, prof, resp.StatusCode, resp.Header, env, c.cfg.MaxRetryAfter, time.Now())
	}
	if isEventStream(resp.Header.Get("Content-Type"), call.Stream) {
		return c.readStream(ctx, actx, src, call, prof, resp, st, start)
	}
	return c.readJSON(ctx, actx, src, call, prof, resp, st, start)
}

// isEventStream decides how to read a 2xx body: text/event-stream is SSE,
// a JSON type is JSON, anything else (none, text/plain from a sloppy
// server) is read the way it was asked for.
func isEventStream(ct string, asked bool) bool {
	ct = strings.TrimSpace(ct)
	switch {
	case len(ct) >= 17 && strings.EqualFold(ct[:17], "text/event-stream"):
		return true
	case strings.Contains(strings.ToLower(ct), "json"):
		return false
	}
	return asked
}

func (c *Client) putBody(rb *reqBody) {
	if cap(rb.b) <= maxPooledBytes {
		c.bodies.Put(rb)
	}
}

// releaseBody returns rb to its pool once the HTTP transport has closed it;
// a body still referenced by the transport is left to the garbage collector.
func (c *Client) releaseBody(rb *reqBody) {
	if rb.closed.Load() {
		c.putBody(rb)
	}
}

// ioFailure translates an I/O error of the attempt: the attempt's own
// limits become TransientErrors, the caller's cancellation a CanceledError,
// anything else is classified as a network failure.
func (c *Client) ioFailure(ctx, actx context.Context, src *core.SourceConfig, status int, err error) error {
	if actx.Err() != nil {
		m := errMaker{src: src, status: status, err: err}
		switch cause := context.Cause(actx); {
		case errors.Is(cause, errTTFTTimeout):
			m.msg = "no first token within " + src.TTFTTimeout.String()
			return m.transient(core.ReasonTimeout, 0)
		case errors.Is(cause, errStalled):
			m.msg = "stream stalled: no token for " + src.InterTokenTimeout.String()
			return m.transient(core.ReasonStalled, 0)
		case errors.Is(cause, errAttemptTimeout):
			m.msg = "attempt exceeded its timeout of " + src.Timeout.String()
			return m.transient(core.ReasonTimeout, 0)
		}
	}
	if cerr := ctx.Err(); cerr != nil {
		return &core.CanceledError{Err: cerr}
	}
	return classifyNetError(src, status, err)
}

// result builds the response of a successful attempt from the assembler.
func (c *Client) result(src *core.SourceConfig, call *core.Call, st *attemptState, start time.Time, streamed bool) *core.LLMResponse {
	r := &core.LLMResponse{
		Provider:   src.Provider,
		SourceName: src.Name,
		Model:      st.asm.model,
	}
	if r.Model == "" {
		r.Model = src.Model
	}
	st.asm.fill(r, streamed && st.out.sink != nil)
	if st.asm.usageOK {
		r.PromptTokens, r.CompletionTokens = st.asm.usage.tokens()
		r.CachedPromptTokens = int(min(max(st.asm.usage.cached, 0), int64(r.PromptTokens)))
		r.UsageSource = core.UsageMeasured
	} else {
		r.PromptTokens = EstimatePromptTokens(call.Messages)
		r.CompletionTokens = estimateCompletion(r)
		r.UsageSource = core.UsageEstimated
	}
	if streamed {
		r.TTFT = st.clock.firstAt
		r.MaxInterToken = st.clock.maxGap
		r.SkippedEvents = st.skipped
	}
	r.Latency = time.Since(start)
	return r
}
