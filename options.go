package polygateway

import (
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Option configures assembly (FromEnv, FromSettings, and the embed and
// ocr clients'): it sets the assembly options of the client being built.
type Option func(*kernel.Options)

// WithEnv makes FromEnv read keys from env only: no process environment and
// no .env file. The map is copied.
func WithEnv(env map[string]string) Option {
	return func(o *kernel.Options) { o.Env, o.EnvSet = maps.Clone(env), true }
}

// WithDotEnv names the .env file FromEnv reads (default ".env" in the working
// directory, if present). A named file that does not exist is an error.
func WithDotEnv(path string) Option {
	return func(o *kernel.Options) { o.DotEnv, o.DotEnvSet = path, true }
}

// WithLimiter uses l instead of the configured limiter backend. Give two
// clients the same instance to share limits. The caller keeps ownership:
// Close does not close it.
func WithLimiter(l core.Limiter) Option { return func(o *kernel.Options) { o.Limiter = l } }

// WithBreaker uses b instead of the configured breaker backend (shared state
// across clients when given the same instance). Close does not close it.
func WithBreaker(b core.Breaker) Option { return func(o *kernel.Options) { o.Breaker = b } }

// WithAdmitter passes every attempt through a instead of composing the
// limiter and the breaker (two backend calls each way): give a backend's
// native admission port, such as redisstore.NewAdmitter, to keep one round
// trip before and one after each attempt. Use it with WithLimiter and
// WithBreaker over the same store, so that Sources reads the same state.
// Close does not close it.
func WithAdmitter(a core.Admitter) Option { return func(o *kernel.Options) { o.Admitter = a } }

// WithCache uses c as the cache backend; the cache layer is on even when
// PGW_CACHE_BACKEND is none (PGW_CACHE_NAMESPACE and PGW_CACHE_TTL_S are then
// still required). Close does not close it.
func WithCache(c core.Cache) Option { return func(o *kernel.Options) { o.Cache = c } }

// WithTelemetry uses s as the telemetry sink instead of the configured one.
// Close does not close it.
func WithTelemetry(s core.TelemetrySink) Option { return func(o *kernel.Options) { o.Telemetry = s } }

// WithProfiles adds or replaces provider profiles by name (lower case) on
// top of DefaultProfiles.
func WithProfiles(p map[string]ProviderProfile) Option {
	return func(o *kernel.Options) { o.Profiles = maps.Clone(p) }
}

// WithPricing sets the pricing table used for Cost (instead of PGW_PRICING_PATH).
func WithPricing(p PricingTable) Option { return func(o *kernel.Options) { o.Pricing = maps.Clone(p) } }

// WithHTTPClient makes the transport use c for every source (TRUST_ENV is
// then the client's business).
func WithHTTPClient(c *http.Client) Option { return func(o *kernel.Options) { o.HTTPClient = c } }

// WithLogger sets the logger; the library logs only through it (default:
// discard).
func WithLogger(l *slog.Logger) Option { return func(o *kernel.Options) { o.Logger = l } }

// WithMiddleware adds layers outside the built-in onion (cache → telemetry →
// degradation → engine); the first listed is the outermost.
func WithMiddleware(mw ...Middleware) Option {
	return func(o *kernel.Options) { o.Middleware = append(o.Middleware, slices.Clone(mw)...) }
}

// WithClock sets the clock used by the memory backends and the engine's
// bookkeeping (default: the wall clock). Intended for tests.
func WithClock(c core.Clock) Option { return func(o *kernel.Options) { o.Clock = c } }

// WithObserver sends the engine's events (attempts, refusals, waits,
// breaker transitions) to obs, e.g. the metrics package's collector.
func WithObserver(obs core.Observer) Option { return func(o *kernel.Options) { o.Observer = obs } }

// WithFallback sets the scope's last-resort answer: fn is called when a call
// fails with GatewayUnavailableError or GovernanceBackendError (and no stale
// cache entry could stand in); its answer is returned marked Degraded.
// A structured call (WithJSON, WithJSONSchema, ChatInto) takes it only
// when it passes the call's checks, and otherwise fails with its error.
func WithFallback(fn FallbackFunc) Option { return func(o *kernel.Options) { o.Fallback = fn } }

// WithTracer puts every governed call and every upstream attempt in a span
// and injects the trace context into upstream requests; package tracing
// provides an OpenTelemetry Tracer.
func WithTracer(t core.Tracer) Option { return func(o *kernel.Options) { o.Tracer = t } }

// WithSelector makes sel choose among the eligible sources of every
// attempt, instead of the built-in named by {SCOPE}__SELECTOR. Breakers,
// gates, cooldowns and tiers stay the engine's business: sel only chooses
// among candidates of the best group. Sharing one sel between clients
// shares its state (a round robin's rotation).
func WithSelector(sel core.Selector) Option { return func(o *kernel.Options) { o.Selector = sel } }

// CallOption configures one call: it sets the call's options, most of
// them fields of the call itself.
type CallOption func(*kernel.CallOptions)

// WithBudget makes the call reserve on a spend budget of its own beside
// its scope's: a tenant's, a team's, a batch job's. Every attempt reserves
// its estimated cost on b (Key names the spend: calls naming the same key
// share it, in every scope and, on a shared backend, every process) in the
// same atomic step as the rate-limit gates, and settles it to the actual
// cost; a call that does not fit fails with ErrBudgetExhausted before any
// request. b.Limit is micro-USD per b.Window (at least a second; fixed
// windows aligned to the Unix epoch). The scope's sources need prices
// (PGW_PRICING_PATH) for the reservation to be more than nothing; options
// with an invalid budget (empty key, Limit <= 0, Window < 1s) are ignored.
// Several WithBudget options add several budgets.
func WithBudget(b Budget) CallOption {
	return func(o *kernel.CallOptions) {
		if b.Key == "" || b.Limit <= 0 || b.Window < time.Second {
			return
		}
		o.Budgets = append(o.Budgets[:len(o.Budgets):len(o.Budgets)], b)
	}
}

// WithoutPushbackWait makes the call end at once when every source that
// could take it is held back by its upstream's 429 (a Retry-After, or the
// library's own pushback after a 429), with a GatewayUnavailableError of
// reason rate_limited whose RetryAfter says when the first of them may be
// asked again — instead of waiting the pushback out within the stall
// window and the call's deadline (the default). For callers that retry on
// their own: the gateway sets it, so that its clients' SDKs get a 429 with
// Retry-After rather than a held connection.
func WithoutPushbackWait() CallOption {
	return func(o *kernel.CallOptions) { o.NoPushbackWait = true }
}

// WithPriority sets the call's priority class: when the gates it needs are
// full, a waiting call of a higher class is admitted before any waiting
// call of a lower one, in this process and, with a shared backend, in
// every process sharing the scope (a share of admissions keeps lower
// classes from starving; see docs/explanation-queue.md). The default is
// PriorityNormal; an invalid value counts as normal.
func WithPriority(p Priority) CallOption {
	return func(o *kernel.CallOptions) { o.Place.Priority = p }
}

// WithTenant names whose work the call is (a customer, a team, a job).
// Within one priority class, waiting tenants are served in turn; within a
// tenant, first come first served. The default is one anonymous tenant; a
// name longer than core.MaxTenant bytes makes the call fail before any request
// with a RequestRejectedError matching core.ErrTenantTooLong.
func WithTenant(id string) CallOption {
	return func(o *kernel.CallOptions) { o.Place.Tenant = id }
}

// WithSessionID links the call's telemetry row to a session.
func WithSessionID(id string) CallOption {
	return func(o *kernel.CallOptions) { o.SessionID = id }
}

// WithParentCallID links the call's telemetry row to a parent call.
func WithParentCallID(id string) CallOption {
	return func(o *kernel.CallOptions) { o.ParentCallID = id }
}

// WithCacheSalt adds a salt to the cache key: a new salt forces a fresh answer.
func WithCacheSalt(salt string) CallOption {
	return func(o *kernel.CallOptions) { o.CacheSalt = salt }
}

// WithCacheNamespace overrides the cache namespace for this call (per tenant).
func WithCacheNamespace(ns string) CallOption {
	return func(o *kernel.CallOptions) { o.CacheNamespace = ns }
}

// WithStream chooses whether the upstream streams (default true, which
// enables the stream watchdog).
func WithStream(stream bool) CallOption {
	return func(o *kernel.CallOptions) { o.Stream = stream }
}

// WithParams passes extra request fields through (any field the typed
// options — WithTemperature, WithMaxTokens, WithTools… — do not cover).
// They are part of the cache key. The keys are added to those set before
// (a later option wins a key); the map is copied (shallowly).
func WithParams(p map[string]any) CallOption {
	return func(o *kernel.CallOptions) { maps.Copy(ownParams(o, len(p)), p) }
}

// WithCallFallback sets the fallback of one call, overriding the scope's
// (see WithFallback).
func WithCallFallback(fn FallbackFunc) CallOption {
	return func(o *kernel.CallOptions) { o.Fallback = fn }
}

// ownParams returns the call's own Params, copying the ones shared with
// an earlier call on first write (size is a capacity hint).
func ownParams(o *kernel.CallOptions, size int) map[string]any {
	if o.Params == nil || !o.OwnParams {
		params := maps.Clone(o.Params)
		if params == nil {
			params = make(map[string]any, size)
		}
		o.Params, o.OwnParams = params, true
	}
	return o.Params
}
