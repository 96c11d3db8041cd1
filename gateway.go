package polygateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"sync"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/core"
	"github.com/polygateway/polygateway/internal/registry"
	"github.com/polygateway/polygateway/middleware"
	"github.com/polygateway/polygateway/transport"
)

// GatewayClient makes governed chat calls for one scope. It is safe for
// concurrent use; make one per scope and process, and Close it at shutdown.
type GatewayClient struct {
	settings  GatewaySettings
	handler   core.Handler
	governor  *middleware.Governor
	transport *transport.Client
	sink      TelemetrySink
	ownSink   bool
	closers   []io.Closer
	log       *slog.Logger

	schemas schemaCache

	closeOnce sync.Once
	closeErr  error
	closed    chan struct{}
}

// FromEnv assembles the client of scope from the .env file and the process
// environment (the environment wins), or from WithEnv's map only.
func FromEnv(scope string, opts ...Option) (*GatewayClient, error) {
	o := collect(opts)
	env := o.env
	if !o.envSet {
		path, explicit := ".env", false
		if o.dotenvSet {
			path, explicit = o.dotenv, true
		}
		var err error
		if env, err = config.ReadEnv(path, explicit); err != nil {
			return nil, err
		}
	}
	s, err := LoadSettings(scope, env)
	if err != nil {
		return nil, err
	}
	return assemble(s, o)
}

// FromSettings assembles a client from already parsed settings. The
// settings are copied.
func FromSettings(s GatewaySettings, opts ...Option) (*GatewayClient, error) {
	if len(s.Sources) == 0 {
		return nil, &ConfigError{Key: s.Scope + "__{PROVIDER}__{N}__BASE_URL", Problem: "no sources configured"}
	}
	return assemble(s, collect(opts))
}

func collect(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}

func assemble(s GatewaySettings, o *options) (_ *GatewayClient, err error) {
	s.Sources = append([]SourceConfig(nil), s.Sources...)
	s.Extra = maps.Clone(s.Extra)
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clock := o.clock
	if clock == nil {
		clock = core.SystemClock{}
	}
	asm := registry.NewAssembly(s, logger)
	c := &GatewayClient{settings: s, log: logger, closed: make(chan struct{})}
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

	limiter := o.limiter
	if limiter == nil {
		if limiter, err = buildBackend[Limiter](asm, registry.KindLimiter, "PGW_LIMITER_BACKEND", s.LimiterBackend, func() Limiter {
			return memory.NewLimiter(memory.WithClock(clock))
		}); err != nil {
			return nil, err
		}
	}
	breaker := o.breaker
	if breaker == nil {
		if breaker, err = buildBackend[Breaker](asm, registry.KindBreaker, "PGW_BREAKER_BACKEND", s.BreakerBackend, func() Breaker {
			return memory.NewBreaker(memory.WithClock(clock))
		}); err != nil {
			return nil, err
		}
	}
	admitter := o.admitter
	if admitter == nil && o.limiter == nil && o.breaker == nil && s.LimiterBackend == s.BreakerBackend {
		// Both live in one store: pass attempts through it in one round trip.
		if f, ok := registry.Lookup(registry.KindAdmitter, s.LimiterBackend); ok {
			v, ferr := f(asm)
			if ferr != nil {
				return nil, fmt.Errorf("polygateway: admitter backend %q: %w", s.LimiterBackend, ferr)
			}
			if a, ok := v.(core.Admitter); ok && a != nil {
				admitter = a
			}
		}
	}
	cache := o.cache
	if o.noCache {
		cache = nil
	} else if cache == nil && s.CacheBackend != "" && s.CacheBackend != "none" {
		if cache, err = buildBackend[Cache](asm, registry.KindCache, "PGW_CACHE_BACKEND", s.CacheBackend, func() Cache {
			return memory.NewCache(memory.WithClock(clock))
		}); err != nil {
			return nil, err
		}
	}
	if cache != nil && (s.CacheNamespace == "" || s.CacheTTL <= 0) {
		return nil, &ConfigError{Key: "PGW_CACHE_NAMESPACE", Problem: "a cache needs PGW_CACHE_NAMESPACE and PGW_CACHE_TTL_S > 0"}
	}
	sink := o.telemetry
	if sink == nil && s.TelemetryBackend != "" && s.TelemetryBackend != "none" {
		if sink, err = buildBackend[TelemetrySink](asm, registry.KindTelemetry, "PGW_TELEMETRY_BACKEND", s.TelemetryBackend, nil); err != nil {
			return nil, err
		}
		c.ownSink = true
	}
	c.sink = sink
	pricing := o.pricing
	if pricing == nil && s.PricingPath != "" {
		if pricing, err = LoadPricing(s.PricingPath); err != nil {
			return nil, err
		}
	}
	profiles := transport.DefaultProfiles()
	maps.Copy(profiles, o.profiles)
	c.transport = transport.New(transport.Config{HTTPClient: o.httpClient, Profiles: profiles, Logger: logger})

	var up core.Upstream = c.transport
	switch {
	case o.upstream != nil:
		up = o.upstream
	case o.upstreamFn != nil:
		up = o.upstreamFn(c.transport)
	}
	c.governor, err = middleware.NewGovernor(middleware.GovernorConfig{
		Settings: s, Upstream: up, Limiter: limiter, Breaker: breaker, Admitter: admitter,
		Pricing: pricing, Clock: clock, Logger: logger, Observer: o.observer,
	})
	if err != nil {
		return nil, err
	}
	c.closers = asm.Closers()
	var sinkArg core.TelemetrySink
	if sink != nil {
		sinkArg = sink
	}
	recorder := middleware.NewRecorder(middleware.TelemetryConfig{Sink: sinkArg, Scope: s.Scope, Clock: clock, Logger: logger})
	layers := append([]Middleware(nil), o.middleware...)
	layers = append(layers, middleware.Fallback(o.fallback))
	if cache != nil {
		models := make([]string, len(s.Sources))
		for i, src := range s.Sources {
			models[i] = src.Model
		}
		layers = append(layers, middleware.Cache(middleware.CacheConfig{
			Cache: cache, Namespace: s.CacheNamespace, TTL: s.CacheTTL, Scope: s.Scope, Models: models,
			Clock: clock, Logger: logger, Recorder: recorder, Stale: s.Fallback.Stale,
		}))
	}
	layers = append(layers, recorder.Middleware())
	c.handler = core.Chain(c.governor.Handle, layers...)
	return c, nil
}

// buildBackend returns the backend named by the config key: the built-in
// memory one, or an opt-in one from the registry. An opt-in backend whose
// package is not linked is an error naming the import to add.
func buildBackend[T any](asm *registry.Assembly, kind registry.Kind, key, name string, mem func() T) (T, error) {
	var zero T
	if name == "memory" && mem != nil {
		return mem(), nil
	}
	f, ok := registry.Lookup(kind, name)
	if !ok {
		if path := registry.ImportPath(kind, name); path != "" {
			return zero, &ConfigError{Key: key, Problem: fmt.Sprintf("%s backend %q is not linked into this program: add `import _ %q`", kind, name, path)}
		}
		return zero, &ConfigError{Key: key, Problem: fmt.Sprintf("unknown %s backend %q", kind, name)}
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

// Chat makes one governed chat call.
func (c *GatewayClient) Chat(ctx context.Context, msgs []Message, opts ...CallOption) (*LLMResponse, error) {
	select {
	case <-c.closed:
		return nil, ErrClientClosed
	default:
	}
	if len(msgs) == 0 {
		return nil, &RequestRejectedError{Code: "empty_messages", Message: "no messages to send"}
	}
	co := c.callOptions(opts)
	if co.jsonMode {
		return c.chatStructured(ctx, msgs, co, nil, "")
	}
	return c.Invoke(ctx, c.newCall(msgs, co))
}

// callOptions applies opts over the defaults.
func (c *GatewayClient) callOptions(opts []CallOption) callOptions {
	co := callOptions{stream: true}
	for _, opt := range opts {
		if opt != nil {
			opt(&co)
		}
	}
	return co
}

// newCall builds the kernel call of a chat.
func (c *GatewayClient) newCall(msgs []Message, co callOptions) *core.Call {
	return &core.Call{
		ID:             newCallID(),
		Scope:          c.settings.Scope,
		Messages:       msgs,
		Params:         co.params,
		Stream:         co.stream,
		SessionID:      co.sessionID,
		ParentCallID:   co.parentCallID,
		CacheSalt:      co.cacheSalt,
		CacheNamespace: co.cacheNamespace,
		Fallback:       co.fallback,
	}
}

// Invoke runs a prepared call through the client's onion (cache, telemetry,
// governor and the upstream). Chat builds its calls itself; sibling clients
// (embed, ocr) build theirs with their own Op and Payload. An empty ID gets a
// fresh call id.
func (c *GatewayClient) Invoke(ctx context.Context, call *Call) (*LLMResponse, error) {
	select {
	case <-c.closed:
		return nil, ErrClientClosed
	default:
	}
	if call.ID == "" {
		call.ID = newCallID()
	}
	if call.Scope == "" {
		call.Scope = c.settings.Scope
	}
	resp, err := c.handler(ctx, call)
	if resp != nil {
		resp.CallID = call.ID
	}
	return resp, err
}

// FallbackFunc is the last step of the degradation chain: called when no
// source produced an answer (GatewayUnavailableError, GovernanceBackendError,
// or a TransientError/SourceDeadError with a budget of one attempt) and no
// stale cache entry could stand in — never for a rejected request, an
// invalid result or a cancellation. Its answer is returned marked Degraded;
// an error from it is ignored and the original error returned.
type FallbackFunc = middleware.FallbackFunc

// NewCallID returns a fresh random call id (128-bit hex), as used for
// telemetry rows.
func NewCallID() string { return newCallID() }

// Sources reports every source's breaker state, in-flight count, health and
// limits. It never includes API keys.
func (c *GatewayClient) Sources(ctx context.Context) []SourceStatus {
	return c.governor.Sources(ctx)
}

// ResetSource closes the breaker of the named source at once and clears its
// local health history: the operators' emergency key after fixing a source.
func (c *GatewayClient) ResetSource(ctx context.Context, source string) error {
	return c.governor.Reset(ctx, source)
}

// Settings returns a copy of the client's settings with API keys redacted.
func (c *GatewayClient) Settings() GatewaySettings {
	s := c.settings
	s.Sources = append([]SourceConfig(nil), s.Sources...)
	for i := range s.Sources {
		if s.Sources[i].APIKey != "" {
			s.Sources[i].APIKey = "***"
		}
	}
	return s
}

// Close releases connections and the backends the client created (not
// those given through options); queued telemetry is flushed. It is
// idempotent; calls after Close fail with ErrClientClosed.
func (c *GatewayClient) Close() error {
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
func (c *GatewayClient) Closed() bool {
	select {
	case <-c.closed:
		return true
	default:
		return false
	}
}

// ErrClientClosed is returned by calls on a closed client.
var ErrClientClosed = fmt.Errorf("%w: client closed", core.ErrGateway)

// DefaultProfiles returns a fresh copy of the built-in provider profiles.
func DefaultProfiles() map[string]ProviderProfile { return transport.DefaultProfiles() }

// newCallID returns a random 128-bit hex id.
func newCallID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
