package core

import "time"

// MissingDonePolicy says what a stream that ends without [DONE] and without
// a finish_reason is (MISSING_DONE).
type MissingDonePolicy string

// MISSING_DONE policies.
const (
	MissingDoneRetry   MissingDonePolicy = "retry"
	MissingDoneSalvage MissingDonePolicy = "salvage"
)

// TelemetryContent says what a telemetry row keeps of a call's prompts
// and answers (PGW_TELEMETRY_CONTENT). Tokens, cost, sources, timings and
// the error are always kept.
type TelemetryContent string

// Telemetry content settings.
const (
	// TelemetryContentFull keeps the messages, the answer and its
	// thinking as they were (the default; "" means it too).
	TelemetryContentFull TelemetryContent = "full"
	// TelemetryContentRedacted keeps them with every configured secret
	// (the sources' API keys, the backends' URLs) removed by the library's
	// one redaction rule.
	TelemetryContentRedacted TelemetryContent = "redacted"
	// TelemetryContentNone keeps none of them: the row's messages,
	// response and thinking are empty.
	TelemetryContentNone TelemetryContent = "none"
)

// ContinueMode says whether a source continues an assistant prefill
// (CONTINUE).
type ContinueMode string

// CONTINUE modes.
const (
	ContinueDefault ContinueMode = ""
	ContinueNone    ContinueMode = "none"
	ContinuePrefill ContinueMode = "prefill"
)

// QuotaFullPolicy says what a call does when every gate is full (QUOTA_FULL).
type QuotaFullPolicy string

// QUOTA_FULL policies.
const (
	QuotaFullWait     QuotaFullPolicy = "wait"
	QuotaFullFailFast QuotaFullPolicy = "fail_fast"
)

// Limits are the three gates of one level (a source or the whole scope).
// Zero disables a gate.
type Limits struct {
	MaxConcurrency int
	RPM            int
	TPM            int
}

// SourceConfig is the complete configuration of one upstream source, from
// the keys {SCOPE}__{PROVIDER}__{N}__{FIELD}.
type SourceConfig struct {
	// Name is "{provider}_{n}" in lower case; it names the source everywhere.
	Name string
	// Provider is the lower-case provider name; it selects the
	// ProviderProfile unless Profile does.
	Provider string
	// Profile names the ProviderProfile (dialect) of the source; "" is
	// Provider (see ProfileName).
	Profile string
	// Index is N.
	Index int
	// BaseURL is the OpenAI-style base including its version path.
	BaseURL string
	// APIKey is the bearer key; "none" sends no Authorization header.
	APIKey string
	// Model is the upstream model name.
	Model string
	// Timeout is the wall-clock cap of one attempt.
	Timeout time.Duration
	// Limits are the per-source gates.
	Limits Limits
	// EstTokens is pre-deducted from TPM per call.
	EstTokens int
	// TTFTTimeout and InterTokenTimeout arm the stream watchdog (both zero = off).
	TTFTTimeout, InterTokenTimeout time.Duration
	// ContextWindow is the model's context window in tokens (0 = unknown):
	// a call that cannot fit skips the source.
	ContextWindow int
	// Continue says whether the source can continue an answer given as an
	// assistant prefill ("" = the provider profile's choice).
	Continue ContinueMode
	// EnableThinking is nil when the thinking switch is not injected.
	EnableThinking *bool
	// MissingDone is MissingDoneRetry (default) or MissingDoneSalvage.
	MissingDone MissingDonePolicy
	// TrustEnv false makes the source ignore HTTP(S)_PROXY. Default true.
	TrustEnv bool
	// Priority is the tier: lower is tried first. Default 0.
	Priority int
	// Weight is the share within a tier. Default 1.
	Weight float64
	// Region is an optional region label for region preference.
	Region string
	// ExtraBody is merged into every request body sent to this source.
	ExtraBody map[string]any
	// Breaker holds this source's own breaker values
	// ({SCOPE}__{PROVIDER}__{N}__BREAKER__…), in place of the scope's; a
	// zero field is the scope's value.
	Breaker BreakerOverride
}

// BreakerOverride is a source's own breaker values. A zero field leaves the
// scope's value (GatewaySettings.Breaker) in force; the other breaker
// values are the scope's.
type BreakerOverride struct {
	// FailThreshold replaces the scope's consecutive-failure threshold. The
	// effective threshold is still max(FailThreshold, 2×the source's
	// MAX_CONCURRENCY).
	FailThreshold int
	// Cooldown replaces the scope's first open period.
	Cooldown time.Duration
	// MaxCooldown replaces the scope's cap of the doubling cooldown; it must
	// be at least the source's effective cooldown. Zero with a Cooldown of
	// its own: the scope's cap, or this Cooldown when it is longer.
	MaxCooldown time.Duration
}

// RetrySettings bound the per-call retry budget.
type RetrySettings struct {
	// MaxAttempts includes the first attempt. Default 3.
	MaxAttempts int
	// BackoffBase is the first backoff. Default 1s.
	BackoffBase time.Duration
	// BackoffMax caps every backoff. Default 30s.
	BackoffMax time.Duration
	// TierPatience is how long a call stays in the best tier after a
	// healthy source there blips (RETRY__TIER_PATIENCE_S). 0 = fail over at
	// once. Default 3s.
	TierPatience time.Duration
}

// BreakerConfig is the circuit breaker configuration of a scope, and once
// a source's overrides (SourceConfig.Breaker) and its effective threshold
// are applied, of one source's circuit. The values of the source are
// passed to every Breaker call about it, so that a shared backend needs no
// configuration of its own.
type BreakerConfig struct {
	// FailThreshold is the configured consecutive-failure threshold. Default 5.
	// The effective threshold of a source is max(FailThreshold, 2×its MAX_CONCURRENCY);
	// callers pass the effective value.
	FailThreshold int
	// Cooldown is the first open period. Default 5s.
	Cooldown time.Duration
	// MaxCooldown caps the doubling cooldown. Default 8s.
	MaxCooldown time.Duration
	// ProbeTTL is the lease of the half-open probe. Default: the largest source timeout.
	ProbeTTL time.Duration
	// MinCalls is the number of window samples before the rate channel acts. Default 20.
	MinCalls int
	// FailRate opens the breaker when the window's failure rate reaches it. Default 0.5.
	FailRate float64
	// Window is the failure-rate window length. Default 60s.
	Window time.Duration
	// HalfOpenSuccesses is the number of probe successes needed to close. Default 1.
	HalfOpenSuccesses int
	// TimeoutWeight is the fraction of a failure a timeout counts as. Default 1.
	TimeoutWeight float64
	// Pool is the scope's global pool ({SCOPE}__GLOBAL__POOL), "" when it
	// has none. A backend that keeps a scope's state beside its pool's (one
	// Redis Cluster slot for every key one admission touches) reads it.
	Pool string
}

// BackpressureSettings tune waiting for quota and 429 pushback.
type BackpressureSettings struct {
	// StallWindow: a call that has waited this long with no progress anywhere
	// in the scope gives up with Reason stalled. Default max(60s, largest TTFT timeout).
	StallWindow time.Duration
	// PollInterval is how often a waiting call re-tries the limiter. Default 0.25s.
	PollInterval time.Duration
	// QueueShare is how many consecutive admissions of a higher priority
	// class a class with waiters lets pass before it is served, in the
	// admission queue of a limiter that queues. Default (0): 9.
	QueueShare int
	// QueueClaimTTL is how long a slot handed to a waiter stays reserved
	// for it before it lapses to the next waiter. Default (0): 2s.
	QueueClaimTTL time.Duration
	// QueueLease is how long a waiter's place lasts in a shared (Redis)
	// queue when its process does not renew it. Default (0): 5 minutes.
	QueueLease time.Duration
}

// GatewaySettings is the parsed and validated configuration of one scope.
// LoadSettings produces it; FromSettings assembles a client from it after
// checking the same invariants (internal/config.Validate), so settings made
// by hand may leave optional values at their zero value (see Validate for
// what each zero means).
type GatewaySettings struct {
	// Scope is the upper-case scope name.
	Scope string
	// Sources in the order of (provider, N) as configured.
	Sources []SourceConfig
	// Global are the scope-wide gates.
	Global Limits
	// GlobalPool, when set, names the pool whose global gates the scope
	// shares with every scope naming the same pool ({SCOPE}__GLOBAL__POOL).
	GlobalPool string
	// Budget is the scope's spend budget ({SCOPE}__BUDGET__USD per
	// {SCOPE}__BUDGET__WINDOW_S); Limit 0 = none. An empty Key is
	// "scope:" + Scope. Every source of a budgeted scope needs a price.
	Budget Budget
	// Selector is one of the built-in selectors. Default health_aware.
	Selector SelectorName
	// PreferredRegion puts same-region sources first when set.
	PreferredRegion string
	// Retry is the per-call retry budget.
	Retry RetrySettings
	// Breaker is the circuit breaker configuration.
	Breaker BreakerConfig
	// Backpressure tunes waiting.
	Backpressure BackpressureSettings
	// QuotaFull is QuotaFullWait (default) or QuotaFullFailFast.
	QuotaFull QuotaFullPolicy
	// LimiterBackend and BreakerBackend are "memory" or "redis".
	LimiterBackend, BreakerBackend string
	// CacheBackend is "none", "memory" or "redis".
	CacheBackend string
	// CacheNamespace and CacheTTL are required when the cache is on.
	CacheNamespace string
	CacheTTL       time.Duration
	// TelemetryBackend is "none", "sqlite" or "postgres".
	TelemetryBackend    string
	TelemetrySQLitePath string
	TelemetryPGDSN      string
	// TelemetryContent is what a telemetry row keeps of the prompts and
	// answers: TelemetryContentFull (default, ""), Redacted or None.
	TelemetryContent TelemetryContent
	// PricingPath is the optional pricing JSON file.
	PricingPath string
	// StructuredMaxRetries bounds structured-output re-asks. Default 2.
	StructuredMaxRetries int
	// LeaseTTL is the lease of a concurrency permit. Default 1500s.
	LeaseTTL time.Duration
	// RedisURL is shared by the redis backends.
	RedisURL string
	// Fallback configures the degradation chain.
	Fallback FallbackSettings
	// Quality configures the quality guard.
	Quality QualitySettings
	// Extra holds the scope's other keys verbatim (e.g. EMBED__BATCH_SIZE),
	// keyed by the part after "{SCOPE}__", for sibling clients to read.
	Extra map[string]string
}

// FallbackSettings configure what a scope serves when it is unavailable.
type FallbackSettings struct {
	// Stale is how long past its TTL a cached answer may still be served,
	// marked degraded, when the scope is unavailable. 0 = off.
	Stale time.Duration
}

// QualitySettings configure the quality guard.
type QualitySettings struct {
	// Guard turns the guard on: empty answers, repetition loops, refusals and
	// finish_reason "length" are invalid results, retried on another source
	// without charging the breaker. Default false.
	Guard bool
	// MinChars: with the guard on, shorter answers (tool calls excepted) are
	// invalid. Default 1.
	MinChars int
}

// ProfileName returns the name of the source's ProviderProfile: Profile,
// else Provider.
func (s SourceConfig) ProfileName() string {
	if s.Profile != "" {
		return s.Profile
	}
	return s.Provider
}
