// Package kernel assembles the governed machine of one scope — backends,
// transport, engine and the onion (user middleware → cache → telemetry →
// degradation → engine) — and runs calls through it. The root package's
// GatewayClient is its public face; the sibling clients of this module
// (embed, ocr, proxy) use it directly to run typed calls (Do) under the
// same governance, without any of it being public API.
package kernel

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/engine"
	"github.com/polygateway/polygateway/internal/middleware"
	"github.com/polygateway/polygateway/internal/registry"
	"github.com/polygateway/polygateway/internal/transport"
)

// Options are the assembly options: the root package's Option is a
// func(*Options), and its With… options set these fields. The zero value
// assembles everything from the settings.
type Options struct {
	// Env, when EnvSet, is the only source of the keys FromEnv reads (no
	// process environment, no .env file).
	Env    map[string]string
	EnvSet bool
	// DotEnv, when DotEnvSet, names the .env file FromEnv reads (a file
	// that does not exist is then an error); default ".env", if present.
	DotEnv    string
	DotEnvSet bool
	// Limiter, Breaker, Admitter, Cache and Telemetry replace the configured
	// backends; the caller keeps ownership of them.
	Limiter   core.Limiter
	Breaker   core.Breaker
	Admitter  core.Admitter
	Cache     core.Cache
	Telemetry core.TelemetrySink
	// NoCache turns the response cache off whatever the settings say.
	NoCache bool
	// Profiles are added to (or replace) the default provider profiles.
	Profiles map[string]core.ProviderProfile
	// Pricing replaces PGW_PRICING_PATH.
	Pricing core.PricingTable
	// HTTPClient, when set, sends every request.
	HTTPClient *http.Client
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// Middleware are the user's layers, outermost first.
	Middleware []core.Middleware
	// Clock defaults to the wall clock.
	Clock core.Clock
	// Observer receives the engine's events.
	Observer core.Observer
	// Fallback is the scope's last-resort answer.
	Fallback core.FallbackFunc
	// Selector replaces the configured selector.
	Selector core.Selector
	// Tracer puts calls and attempts in spans and injects trace context
	// into upstream requests.
	Tracer core.Tracer
}

// Collect applies opts in order to zero Options.
func Collect[O ~func(*Options)](opts []O) Options {
	var o Options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	return o
}

// Environment returns the keys FromEnv reads: Env's map, or the .env file
// and the process environment (the environment wins).
func (o *Options) Environment() (map[string]string, error) {
	if o.EnvSet {
		return o.Env, nil
	}
	path, explicit := ".env", false
	if o.DotEnvSet {
		path, explicit = o.DotEnv, true
	}
	return config.ReadEnv(path, explicit)
}

// Client is one assembled scope. It is safe for concurrent use.
type Client struct {
	settings  core.GatewaySettings
	handler   core.Handler
	engine    *engine.Engine
	transport *transport.Client
	sink      core.TelemetrySink
	ownSink   bool
	closers   []io.Closer
	log       *slog.Logger
	tracer    core.Tracer
	// budgetErr says why a call's own budget could not be kept (nil: it
	// can): see CanBudget.
	budgetErr error

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// ErrClosed is returned by calls on a closed client.
var ErrClosed = fmt.Errorf("%w: client closed", core.ErrGateway)

// Assemble builds the client of s. The settings are validated as
// LoadSettings does (config.Validate) and copied.
func Assemble(s core.GatewaySettings, o Options) (_ *Client, err error) {
	if err := config.Validate(s); err != nil {
		return nil, err
	}
	s.Sources = append([]core.SourceConfig(nil), s.Sources...)
	s.Extra = maps.Clone(s.Extra)
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clock := o.Clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	asm := registry.NewAssembly(s, logger)
	c := &Client{settings: s, log: logger, closed: make(chan struct{})}
	defer func() {
		if err != nil {
			if c.ownSink && c.sink != nil {
				_ = c.sink.Close(context.Background())
			}
			if c.transport != nil {
				c.transport.Close()
			}
			for _, cl := range asm.Closers() {
				_ = cl.Close()
			}
		}
	}()

	b, err := c.buildBackends(asm, s, o, clock)
	if err != nil {
		return nil, err
	}
	c.buildTransport(&s, o)
	c.engine, err = engine.New(engine.Config{
		Settings: s, Upstream: chatUpstream{t: c.transport, quality: s.Quality}, Limiter: b.limiter, Breaker: b.breaker,
		Admitter: b.admitter, InProcess: inProcess(b), Selector: o.Selector, Pricing: b.pricing, Clock: clock, Logger: logger, Observer: o.Observer,
		Tracer: o.Tracer,
	})
	if err != nil {
		return nil, err
	}
	c.closers = asm.Closers()
	c.handler = core.Chain(c.engine.Handle, onion(s, o, b.cache, c.sink, clock, logger)...)
	return c, nil
}

// backends are the governance backends of one scope.
type backends struct {
	limiter  core.Limiter
	breaker  core.Breaker
	admitter core.Admitter // nil: composed from limiter and breaker
	cache    core.Cache    // nil: no response cache
	pricing  core.PricingTable
}

// inProcess reports whether b's attempts pass through backends that live
// in this process and never wait on I/O: the memory Limiter and Breaker,
// composed (no admitter of another store). The engine then needs no
// deadline of its own for the work after an attempt
// (engine.Config.InProcess). It names the memory package's own types: a
// backend of another package, or a wrapper of a memory backend, gets the
// bounded path, which is always safe.
func inProcess(b backends) bool {
	if b.admitter != nil {
		return false
	}
	_, ml := b.limiter.(*memory.Limiter)
	_, mb := b.breaker.(*memory.Breaker)
	return ml && mb
}

// buildBackends builds the backends of s, the ones o gives first; the
// telemetry sink goes to c (and is c's to close when it built it).
func (c *Client) buildBackends(asm *registry.Assembly, s core.GatewaySettings, o Options, clock core.Clock) (b backends, err error) {
	if b.limiter, b.breaker, b.admitter, err = buildAdmission(asm, s, o, clock); err != nil {
		return b, err
	}
	b.cache = o.Cache
	if o.NoCache {
		b.cache = nil
	} else if b.cache == nil && s.CacheBackend != "" && s.CacheBackend != "none" {
		if b.cache, err = build[core.Cache](asm, registry.KindCache, "PGW_CACHE_BACKEND", s.CacheBackend, func() core.Cache {
			return memory.NewCache(memory.WithClock(clock))
		}); err != nil {
			return b, err
		}
	}
	if b.cache != nil && (s.CacheNamespace == "" || s.CacheTTL <= 0) {
		return b, &config.Error{Key: "PGW_CACHE_NAMESPACE", Problem: "a cache needs PGW_CACHE_NAMESPACE and PGW_CACHE_TTL_S > 0"}
	}
	sink := o.Telemetry
	if sink == nil && s.TelemetryBackend != "" && s.TelemetryBackend != "none" {
		if sink, err = build[core.TelemetrySink](asm, registry.KindTelemetry, "PGW_TELEMETRY_BACKEND", s.TelemetryBackend, nil); err != nil {
			return b, err
		}
		c.ownSink = true
	}
	c.sink = sink
	b.pricing = o.Pricing
	if err := config.CheckPricing(b.pricing, "WithPricing", ""); err != nil {
		return b, err
	}
	if b.pricing == nil && s.PricingPath != "" {
		if b.pricing, err = config.LoadPricing(s.PricingPath); err != nil {
			return b, err
		}
	}
	if err := checkBudget(s, b.pricing); err != nil {
		return b, err
	}
	probe := s
	probe.Budget = core.Budget{Key: "probe", Limit: 1, Window: time.Second}
	c.budgetErr = checkBudget(probe, b.pricing)
	return b, nil
}

// buildAdmission builds the limiter and the breaker of s, the ones o gives
// first, and the admitter of the store that holds both when it has one.
func buildAdmission(asm *registry.Assembly, s core.GatewaySettings, o Options, clock core.Clock) (limiter core.Limiter, breaker core.Breaker, admitter core.Admitter, err error) {
	limiter = o.Limiter
	if limiter == nil {
		if limiter, err = build[core.Limiter](asm, registry.KindLimiter, "PGW_LIMITER_BACKEND", s.LimiterBackend, func() core.Limiter {
			return memory.NewLimiter(memory.WithClock(clock), memory.WithQueue(memory.QueueConfig{
				Share: s.Backpressure.QueueShare, ClaimTTL: s.Backpressure.QueueClaimTTL,
			}))
		}); err != nil {
			return nil, nil, nil, err
		}
	}
	breaker = o.Breaker
	if breaker == nil {
		if breaker, err = build[core.Breaker](asm, registry.KindBreaker, "PGW_BREAKER_BACKEND", s.BreakerBackend, func() core.Breaker {
			return memory.NewBreaker(memory.WithClock(clock))
		}); err != nil {
			return nil, nil, nil, err
		}
	}
	admitter = o.Admitter
	if admitter == nil && o.Limiter == nil && o.Breaker == nil && s.LimiterBackend == s.BreakerBackend {
		// Both live in one store: pass attempts through it in one round trip.
		if f, ok := registry.Lookup(registry.KindAdmitter, s.LimiterBackend); ok {
			v, ferr := f(asm)
			if ferr != nil {
				return nil, nil, nil, fmt.Errorf("polygateway: admitter backend %q: %w", s.LimiterBackend, ferr)
			}
			if a, ok := v.(core.Admitter); ok && a != nil {
				admitter = a
			}
		}
	}
	return limiter, breaker, admitter, nil
}

// buildTransport builds c's transport and settles each source's CONTINUE
// left unset: its provider profile decides.
func (c *Client) buildTransport(s *core.GatewaySettings, o Options) {
	profiles := transport.DefaultProfiles()
	for _, k := range slices.Sorted(maps.Keys(o.Profiles)) {
		// Profiles are named in lower case: a caller's "Qwen" replaces
		// the default "qwen" (of two names in one case, the lower-case
		// one, sorted last, wins).
		profiles[strings.ToLower(k)] = o.Profiles[k]
	}
	tc := transport.Config{HTTPClient: o.HTTPClient, Profiles: profiles, Logger: c.log}
	if o.Tracer != nil {
		tc.Inject = o.Tracer.Inject
	}
	c.transport = transport.New(tc)
	c.tracer = o.Tracer
	for i := range s.Sources {
		if src := &s.Sources[i]; src.Continue == core.ContinueDefault {
			src.Continue = core.ContinueNone
			if c.transport.Profile(src.ProfileName()).Continues {
				src.Continue = core.ContinuePrefill
			}
		}
	}
}

// onion returns the layers around the engine, outermost first: the user's
// middleware, the cache (when there is one), telemetry and degradation.
func onion(s core.GatewaySettings, o Options, cache core.Cache, sink core.TelemetrySink, clock core.Clock, logger *slog.Logger) []core.Middleware {
	layers := append([]core.Middleware(nil), o.Middleware...)
	if cache != nil {
		models := make([]string, len(s.Sources))
		for i, src := range s.Sources {
			models[i] = src.Model
		}
		layers = append(layers, middleware.Cache(middleware.CacheConfig{
			Cache: cache, Namespace: s.CacheNamespace, TTL: s.CacheTTL, Scope: s.Scope, Models: models,
			Clock: clock, Logger: logger, Stale: s.Fallback.Stale,
		}))
	}
	return append(layers,
		middleware.Telemetry(middleware.TelemetryConfig{Sink: sink, Scope: s.Scope, Clock: clock, Logger: logger,
			Content: s.TelemetryContent, Secrets: settingsSecrets(s)}),
		middleware.Degrade(middleware.DegradeConfig{Fallback: o.Fallback, Logger: logger}),
	)
}

// settingsSecrets are the secrets of s: its sources' API keys and the
// backends' URLs and DSN.
func settingsSecrets(s core.GatewaySettings) []string {
	out := []string{s.RedisURL, s.TelemetryPGDSN}
	for i := range s.Sources {
		out = append(out, s.Sources[i].APIKey)
	}
	return out
}

// build returns the backend named by the config key: the built-in memory
// one, or an opt-in one from the registry. An opt-in backend whose package
// is not linked is an error naming the import to add.
func build[T any](asm *registry.Assembly, kind registry.Kind, key, name string, mem func() T) (T, error) {
	var zero T
	if name == "memory" && mem != nil {
		return mem(), nil
	}
	f, ok := registry.Lookup(kind, name)
	if !ok {
		if path := registry.ImportPath(kind, name); path != "" {
			return zero, &config.Error{Key: key, Problem: fmt.Sprintf("%s backend %q is not linked into this program: add `import _ %q`", kind, name, path)}
		}
		return zero, &config.Error{Key: key, Problem: fmt.Sprintf("unknown %s backend %q (registered: %s)", kind, name, registry.Names(kind))}
	}
	v, err := f(asm)
	if err != nil {
		return zero, fmt.Errorf("polygateway: %s backend %q: %w", kind, name, err)
	}
	t, ok := v.(T)
	if !ok {
		return zero, fmt.Errorf("polygateway: %s backend %q has the wrong type %T", kind, name, v)
	}
	return t, nil
}

// Handle runs call through the whole onion. An empty ID gets a fresh call
// id, an empty scope the client's; the answer carries the call id.
func (c *Client) Handle(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
	if err := CheckContext(ctx); err != nil {
		return nil, err
	}
	select {
	case <-c.closed:
		return nil, ErrClosed
	default:
	}
	if call.Attempt == nil {
		if err := core.CheckRoles(call.Messages); err != nil {
			return nil, err
		}
	}
	if call.ID == "" {
		call.ID = NewCallID()
	}
	if call.Scope == "" {
		call.Scope = c.settings.Scope
	}
	if call.Attempt == nil && call.Tokens == 0 && (c.engine.Windows() || c.engine.Budgeted(call)) {
		call.Tokens, call.MaxOutputTokens = chatTokens(call)
	}
	var end func(*core.LLMResponse, error)
	if c.tracer != nil {
		op := call.Operation
		if op == "" {
			op = "chat"
		}
		ctx, end = c.tracer.StartCall(ctx, core.CallInfo{CallID: call.ID, Scope: call.Scope, Operation: op,
			Stream: call.Stream, SessionID: call.SessionID, ParentCallID: call.ParentCallID})
	}
	resp, err := c.handler(ctx, call)
	if resp != nil {
		resp.CallID = call.ID
	}
	if end != nil {
		end(resp, err)
	}
	return resp, err
}

// CheckContext returns the error of a call given a nil context, which the
// library refuses rather than panicking on: a RequestRejectedError (code
// nil_context). It returns nil for any other context.
func CheckContext(ctx context.Context) error {
	if ctx == nil {
		return &core.RequestRejectedError{Code: "nil_context", Message: "no context: pass context.Background() or the caller's context"}
	}
	return nil
}

// Do runs call with a typed attempt: do performs one attempt on a source
// and returns its value beside the response that accounts for it (usage,
// model, latency). The value of the attempt that answered is returned with
// the call's response; on failure the value is the zero R.
func Do[R any](ctx context.Context, c *Client, call *core.Call, do func(ctx context.Context, src *core.SourceConfig) (R, *core.LLMResponse, error)) (R, *core.LLMResponse, error) {
	var got R
	call.Attempt = func(ctx context.Context, src *core.SourceConfig) (*core.LLMResponse, error) {
		v, resp, err := do(ctx, src)
		got = v
		return resp, err
	}
	resp, err := c.Handle(ctx, call)
	if err != nil && resp == nil {
		var zero R
		return zero, nil, err
	}
	return got, resp, err
}

// Settings returns the client's settings (not a copy: do not modify).
func (c *Client) Settings() *core.GatewaySettings { return &c.settings }

// Transport returns the client's HTTP machinery (pools, proxies, profiles,
// classification), for sibling protocols.
func (c *Client) Transport() *transport.Client { return c.transport }

// Sources reports every source's state.
func (c *Client) Sources(ctx context.Context) []core.SourceStatus { return c.engine.Sources(ctx) }

// Reset closes the breaker of source and clears its local history.
func (c *Client) Reset(ctx context.Context, source string) error { return c.engine.Reset(ctx, source) }

// SetEnabled switches a source off or on again (see engine.SetEnabled).
func (c *Client) SetEnabled(ctx context.Context, source string, enabled bool) error {
	return c.engine.SetEnabled(ctx, source, enabled)
}

// Budgets reports the scope's budget and extra ones (see engine.Budgets).
func (c *Client) Budgets(ctx context.Context, extra ...core.Budget) ([]core.BudgetUsage, error) {
	return c.engine.Budgets(ctx, extra...)
}

// CanBudget returns nil when calls of the client can keep a budget of
// their own (WithBudget, a gateway's client budget): the limiter enforces
// budgets and every source is priced; else the config error saying why.
func (c *Client) CanBudget() error { return c.budgetErr }

// Close releases connections and the backends the client created; it is
// idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		var errs []error
		if c.ownSink && c.sink != nil {
			errs = append(errs, c.sink.Close(context.Background()))
		}
		for _, cl := range c.closers {
			errs = append(errs, cl.Close())
		}
		c.transport.Close()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// Closed reports whether Close was called.
func (c *Client) Closed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// NewCallID returns a random 128-bit id in 32 hex digits. The bits come
// from math/rand/v2's generator (ChaCha8, seeded from the system per
// process): ids are unique and unguessable in practice, and cheaper to
// make than reading crypto/rand; they name calls and are never a secret.
func NewCallID() string {
	var raw [16]byte
	binary.BigEndian.PutUint64(raw[:8], rand.Uint64())
	binary.BigEndian.PutUint64(raw[8:], rand.Uint64())
	var b [32]byte
	hex.Encode(b[:], raw[:])
	return string(b[:])
}

// CallOptions are the call options: the root package's CallOption is a
// func(*CallOptions), and its With… call options set the fields of Call
// (the call they shape, before it gets its id, scope and messages) and
// the few that are not the call's.
type CallOptions struct {
	// Call is the call as the options shape it (its fields are promoted:
	// co.Place is co.Call.Place); Stream defaults to true.
	core.Call
	// JSON is set by WithJSON and WithJSONSchema (which sets
	// Call.JSONSchema): the answer must be valid JSON.
	JSON bool
	// OwnParams says Call.Params is this call's own copy (options may
	// write to it).
	OwnParams bool
}

// ResolveCall applies opts in order over the defaults.
func ResolveCall[O ~func(*CallOptions)](opts []O) CallOptions {
	co := CallOptions{Call: core.Call{Stream: true}}
	for _, opt := range opts {
		if opt != nil {
			opt(&co)
		}
	}
	return co
}

// Ref refers to an assembled Client from a client type of the public
// packages that embeds it (under an unexported name): it has no exported
// method to promote, only the one Unwrap finds.
type Ref struct{ c *Client }

// Ref returns the reference to c that a public client embeds.
func (c *Client) Ref() Ref { return Ref{c: c} }

// kernel is the method a type that embeds a Ref has.
func (r Ref) kernel() *Client { return r.c }

// Of returns the client r refers to; nil for the zero Ref.
func Of(r Ref) *Client { return r.c }

// Holder is a public client type that embeds a Ref.
type Holder interface{ kernel() *Client }

// Unwrap returns the client behind h (a *polygateway.GatewayClient, an
// embedding or OCR client).
func Unwrap(h Holder) (*Client, error) {
	if v := reflect.ValueOf(h); h == nil || v.Kind() == reflect.Pointer && v.IsNil() {
		return nil, fmt.Errorf("%w: no client", core.ErrGateway)
	}
	if c := h.kernel(); c != nil {
		return c, nil
	}
	return nil, fmt.Errorf("%w: no client", core.ErrGateway)
}
