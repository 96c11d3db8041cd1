package config

import (
	"slices"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/registry"
)

// KeyDoc documents one configuration key, or one family of keys when the
// pattern holds placeholders. Keys returns the table the parser itself is
// driven by: a FIELD is known to the parser exactly when the table lists it,
// and enumerated keys accept exactly the listed Values.
type KeyDoc struct {
	// Pattern is the key name. {SCOPE}, {PROVIDER}, {N} and {NAME} are
	// placeholders; a pattern without placeholders is a flat key shared by
	// every scope.
	Pattern string
	// Required is "yes" when the key must be present, "" when it is optional,
	// and otherwise the condition under which it is required.
	Required string
	// Default is the value used when the key is absent ("" when there is none
	// or the key is required).
	Default string
	// Form is the accepted value form, e.g. "seconds > 0".
	Form string
	// Values lists the accepted values of an enumerated key; nil otherwise.
	Values []string
	// Meaning says what the key does.
	Meaning string
	// Example is a valid sample value, suitable for a generated .env.example.
	Example string
	// Reader is who reads the key: ReaderSettings (the settings parser,
	// LoadSettings), ReaderEmbed, ReaderGateway, ReaderTooling, or
	// ReaderNobody for the documented escapes.
	Reader string
	// Kind is the type of the value; a config file writes it in that type
	// (see the configfile package).
	Kind Kind

	// at is where Load puts the value and Validate finds it; zero for the
	// keys outside the settings.
	at fieldAt
	// flat is the flat shortcut that stands behind the key (LLM_TIMEOUT for
	// TIMEOUT_S): its value when the key is absent, then the default after
	// its ", else " in Default; with neither, a key Required "yes, …" is
	// missing.
	flat string
	// expect words the value a "missing" error expects, when it is not the
	// kind's form or one of Values.
	expect string
	// registry is the kind of backend a KindBackend key names.
	registry registry.Kind
	// parse and check replace the kind's: how Load parses the value, how
	// Validate checks a source's value.
	parse func(e entry, d KeyDoc) (any, *Error)
	check func(v *validator, key string, d KeyDoc, sc *core.SourceConfig)
	// read reads the key by hand, after the others of its family, with
	// the keys it goes with (whose read is readWithPair).
	read func(l *loader, pre string, sc *core.SourceConfig)
	// derive is the default made of other values, set when the key is
	// absent, once every source is read.
	derive func(s *core.GatewaySettings) any
	// need requires an assembly key by another's value (a companion is
	// parsed whenever present, its feature on or off); Validate applies it
	// before the checks of the kinds.
	need func(v *validator, key string, d KeyDoc)
}

// fieldAt is a key's field: in the scope's settings or in a source's.
type fieldAt struct {
	scope  func(*core.GatewaySettings) any
	source func(*core.SourceConfig) any
}

func inScope(f func(*core.GatewaySettings) any) fieldAt { return fieldAt{scope: f} }
func inSource(f func(*core.SourceConfig) any) fieldAt   { return fieldAt{source: f} }

// ptr points at the field in s, or in sc for a source's key.
func (f fieldAt) ptr(s *core.GatewaySettings, sc *core.SourceConfig) any {
	if f.source != nil {
		return f.source(sc)
	}
	return f.scope(s)
}

// key is the row's key under pre, the prefix {SCOPE}__ of a scope key or
// {SCOPE}__{PROVIDER}__{N}__ of a source's.
func (d KeyDoc) key(pre string) string {
	if rest, ok := strings.CutPrefix(d.Pattern, sourceP); ok {
		return pre + rest
	}
	if rest, ok := strings.CutPrefix(d.Pattern, scopeP); ok {
		return pre + rest
	}
	return d.Pattern
}

// readWithPair is the read of a key that the row before it reads by hand.
func readWithPair(*loader, string, *core.SourceConfig) {}

// largest is the largest value of among the sources of s, and the name of
// the first source with it.
func largest(s *core.GatewaySettings, of func(core.SourceConfig) time.Duration) (m time.Duration, name string) {
	for _, sc := range s.Sources {
		if of(sc) > m {
			m, name = of(sc), sc.Name
		}
	}
	return m, name
}

func timeoutOf(sc core.SourceConfig) time.Duration { return sc.Timeout }
func ttftOf(sc core.SourceConfig) time.Duration    { return sc.TTFTTimeout }

// Readers of a key (KeyDoc.Reader). A key is known when any reader knows it:
// the settings parser accepts the keys of the other readers without
// reading them, so one environment can configure every client and the
// gateway at once.
const (
	// ReaderSettings is the settings parser (Load, polygateway.LoadSettings).
	ReaderSettings = ""
	// ReaderEmbed is the embeddings client (package embed), which reads its
	// keys from GatewaySettings.Extra.
	ReaderEmbed = "embed"
	// ReaderGateway is the gateway command (cmd/polygateway).
	ReaderGateway = "gateway"
	// ReaderTooling is the tests, load tests and examples of this
	// repository; their keys are accepted and ignored by the clients.
	ReaderTooling = "tooling"
	// ReaderNobody marks the escape patterns: keys left for other software.
	ReaderNobody = "nobody"
)

// Kind is the type of a key's value.
type Kind string

// Kinds of values. The settings parser's exact rules are in the package
// documentation; the names say the accepted range.
const (
	KindString        Kind = "string"        // free string
	KindName          Kind = "name"          // letters, digits, _ and -
	KindURL           Kind = "url"           // a URL (never echoed)
	KindSecret        Kind = "secret"        // a key, token or DSN (never echoed)
	KindPath          Kind = "path"          // a file path
	KindSecondsPos    Kind = "seconds>0"     // decimal seconds > 0
	KindSecondsNonNeg Kind = "seconds>=0"    // decimal seconds >= 0
	KindInt           Kind = "integer"       // any base-10 integer
	KindIntNonNeg     Kind = "integer>=0"    // base-10 integer >= 0
	KindIntPos        Kind = "integer>=1"    // base-10 integer >= 1
	KindDecimalPos    Kind = "decimal>0"     // decimal > 0
	KindDecimalNonNeg Kind = "decimal>=0"    // decimal >= 0
	KindFraction      Kind = "0<decimal<=1"  // decimal in (0, 1]
	KindUnit          Kind = "0<=decimal<=1" // decimal in [0, 1]
	KindBool          Kind = "boolean"       // true | false | 1 | 0
	KindEnum          Kind = "enum"          // one of Values
	KindBackend       Kind = "backend"       // one of Values or a registered name
	KindJSON          Kind = "json"          // a JSON object
	KindList          Kind = "list"          // comma-separated strings
	KindRoutes        Kind = "routes"        // model=SCOPE,…
)

// Placeholder prefixes of the table's patterns.
const (
	scopeP  = "{SCOPE}__"
	sourceP = "{SCOPE}__{PROVIDER}__{N}__"
	extraP  = "{SCOPE}__X_{NAME}"
	escapeP = "PGW_X_{NAME}"
)

// Group names of the two-part scope keys {SCOPE}__{GROUP}__{FIELD}.
const (
	groupGlobal       = "GLOBAL"
	groupBudget       = "BUDGET"
	groupRetry        = "RETRY"
	groupBreaker      = "BREAKER"
	groupBackpressure = "BACKPRESSURE"
	groupFallback     = "FALLBACK"
	groupQuality      = "QUALITY"
)

// Wordings shared by several rows.
const (
	formSecPos    = "seconds > 0 (decimal, e.g. 0.5)"
	formSecNonNeg = "seconds >= 0 (decimal, e.g. 0.5)"
	formIntNonNeg = "integer >= 0"
	formIntPos    = "integer >= 1"
	formBool      = "true | false | 1 | 0"
)

// keyTable is the single source of truth for the known keys. Order matters:
// within a source, a group or the flat keys, values are validated in table
// order, so the first error reported is deterministic.
var keyTable = []KeyDoc{
	// Source keys.
	{Pattern: sourceP + "BASE_URL", Required: "yes", Form: "absolute http(s) URL without query or fragment",
		Meaning: "OpenAI-style base including its version path; requests go to BASE_URL + /chat/completions. Trailing slashes are trimmed.",
		Example: "https://api.example.com/v1", Kind: KindURL, at: inSource(func(c *core.SourceConfig) any { return &c.BaseURL })},
	{Pattern: sourceP + "API_KEY", Required: "yes", Form: "non-empty string; none = no Authorization header",
		Meaning: "Bearer key of the source. Never echoed in errors or logs.", Example: "sk-replace-me", Kind: KindSecret,
		at: inSource(func(c *core.SourceConfig) any { return &c.APIKey }), expect: apiKeyForm, parse: parseAPIKey, check: checkAPIKey},
	{Pattern: sourceP + "MODEL", Required: "yes", Form: "non-empty string",
		Meaning: "Upstream model name sent in every request.", Example: "qwen-plus", Kind: KindString,
		at: inSource(func(c *core.SourceConfig) any { return &c.Model }), expect: "the upstream model name"},
	{Pattern: sourceP + "TIMEOUT_S", Required: "yes, unless LLM_TIMEOUT is set", Default: "LLM_TIMEOUT",
		Form: formSecPos + ", <= PGW_LEASE_TTL_S", Meaning: "Wall-clock cap of one attempt.", Example: "120", Kind: KindSecondsPos, flat: "LLM_TIMEOUT",
		at: inSource(func(c *core.SourceConfig) any { return &c.Timeout }), check: (*validator).timeout},
	{Pattern: sourceP + "MAX_CONCURRENCY", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source in-flight cap.", Example: "8", Kind: KindIntNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.Limits.MaxConcurrency })},
	{Pattern: sourceP + "RPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source requests per minute.", Example: "60", Kind: KindIntNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.Limits.RPM })},
	{Pattern: sourceP + "TPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source tokens per minute; when > 0, EST_TOKENS is required.", Example: "100000", Kind: KindIntNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.Limits.TPM })},
	{Pattern: sourceP + "EST_TOKENS", Required: "if TPM > 0 or {SCOPE}__GLOBAL__TPM > 0", Default: "0",
		Form:    "integer >= 1, <= TPM and <= {SCOPE}__GLOBAL__TPM when those are on",
		Meaning: "Tokens pre-deducted from TPM per call, settled to the actual usage.", Example: "2000", Kind: KindIntPos, at: inSource(func(c *core.SourceConfig) any { return &c.EstTokens })},
	{Pattern: sourceP + "TTFT_TIMEOUT_S", Required: "together with INTER_TOKEN_TIMEOUT_S", Default: "LLM_TTFT_TIMEOUT, else min(TIMEOUT_S / 2, 30)",
		Form:    formSecNonNeg + "; INTER_TOKEN_TIMEOUT_S < TTFT_TIMEOUT_S < TIMEOUT_S; both 0 = no watchdog",
		Meaning: "Stream watchdog: longest wait for the first token (a thinking delta counts; a keep-alive comment does not).", Example: "30", Kind: KindSecondsNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.TTFTTimeout }), read: (*loader).watchdog, flat: "LLM_TTFT_TIMEOUT"},
	{Pattern: sourceP + "INTER_TOKEN_TIMEOUT_S", Required: "together with TTFT_TIMEOUT_S", Default: "LLM_INTER_TOKEN_TIMEOUT, else TTFT_TIMEOUT_S / 2",
		Form:    formSecNonNeg + "; INTER_TOKEN_TIMEOUT_S < TTFT_TIMEOUT_S; both 0 = no watchdog",
		Meaning: "Stream watchdog: longest gap between two tokens.", Example: "10", Kind: KindSecondsNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.InterTokenTimeout }), read: readWithPair, flat: "LLM_INTER_TOKEN_TIMEOUT"},
	{Pattern: sourceP + "CONTEXT_WINDOW", Default: "0 (unknown)", Form: formIntNonNeg,
		Meaning: "The model's context window in tokens: a call whose estimated prompt plus max_tokens does not fit skips this source before any request.", Example: "128000", Kind: KindIntNonNeg, at: inSource(func(c *core.SourceConfig) any { return &c.ContextWindow })},
	{Pattern: sourceP + "CONTINUE", Values: []string{"none", "prefill"},
		Form:    "none | prefill",
		Meaning: "prefill: the source can continue an answer given as an assistant prefill (DeepSeek prefix completion, vLLM continue_final_message, servers that continue a trailing assistant message), so a stream cut after it was committed to the caller continues here. Unset: the provider profile decides (the vllm profile continues).", Example: "prefill", Kind: KindEnum, at: inSource(func(c *core.SourceConfig) any { return &c.Continue })},
	{Pattern: sourceP + "ENABLE_THINKING", Default: "absent = not injected", Form: formBool,
		Meaning: "Inject the provider's thinking switch on (true) or off (false).", Example: "false", Kind: KindBool, at: inSource(func(c *core.SourceConfig) any { return &c.EnableThinking })},
	{Pattern: sourceP + "MISSING_DONE", Default: "retry", Values: []string{"retry", "salvage"},
		Form:    "retry | salvage",
		Meaning: "A stream ending without [DONE] and without finish_reason is retried, or its content salvaged.", Example: "retry", Kind: KindEnum, at: inSource(func(c *core.SourceConfig) any { return &c.MissingDone })},
	{Pattern: sourceP + "TRUST_ENV", Default: "true", Form: formBool,
		Meaning: "false = ignore HTTP(S)_PROXY for this source.", Example: "true", Kind: KindBool, at: inSource(func(c *core.SourceConfig) any { return &c.TrustEnv })},
	{Pattern: sourceP + "PRIORITY", Default: "0", Form: "integer",
		Meaning: "Tier: lower tiers are tried first.", Example: "0", Kind: KindInt, at: inSource(func(c *core.SourceConfig) any { return &c.Priority })},
	{Pattern: sourceP + "WEIGHT", Default: "1", Form: "decimal > 0",
		Meaning: "Share within a tier.", Example: "1", Kind: KindDecimalPos, at: inSource(func(c *core.SourceConfig) any { return &c.Weight })},
	{Pattern: sourceP + "REGION", Form: "free string",
		Meaning: "Region label, matched against {SCOPE}__PREFERRED_REGION.", Example: "cn-east", Kind: KindString, at: inSource(func(c *core.SourceConfig) any { return &c.Region })},
	{Pattern: sourceP + "EXTRA_BODY", Form: "JSON object",
		Meaning: "Merged into every request body sent to this source, its top-level members winning over the call's parameters (numbers kept exact); model, messages and stream (embeddings: model and input) are never replaced, in any letter case, and stream_options goes only with a streaming request.", Example: `{"top_k": 20}`, Kind: KindJSON, at: inSource(func(c *core.SourceConfig) any { return &c.ExtraBody })},
	{Pattern: sourceP + "PROFILE", Default: "PROVIDER, lower-cased", Form: "profile name: letters, digits, _ and -",
		Meaning: "The provider profile (dialect) of the source: a built-in one (openai, azure, deepseek, qwen, dashscope, minimax, vllm, ollama, moonshot, kimi, zhipu, glm) or one given with WithProfiles. Unset, PROVIDER names it (an unknown one speaks plain openai), and a PROVIDER one or two letters from a built-in profile is refused as a typo: set PROFILE to keep such a name.", Example: "openai", Kind: KindName, at: inSource(func(c *core.SourceConfig) any { return &c.Profile })},
	// A source's own breaker values: {SCOPE}__{PROVIDER}__{N}__BREAKER__{FIELD}.
	{Pattern: sourceP + "BREAKER__FAIL_THRESHOLD", Default: "{SCOPE}__BREAKER__FAIL_THRESHOLD", Form: formIntPos,
		Meaning: "This source's consecutive-failure threshold, in place of the scope's (effective: max(this, 2 x this source's MAX_CONCURRENCY)).", Example: "3", Kind: KindIntPos, at: inSource(func(c *core.SourceConfig) any { return &c.Breaker.FailThreshold })},
	{Pattern: sourceP + "BREAKER__COOLDOWN_S", Default: "{SCOPE}__BREAKER__COOLDOWN_S", Form: formSecPos,
		Meaning: "This source's first open period, in place of the scope's; doubles on each failed probe, up to this source's MAX_COOLDOWN_S.", Example: "30", Kind: KindSecondsPos, at: inSource(func(c *core.SourceConfig) any { return &c.Breaker.Cooldown })},
	{Pattern: sourceP + "BREAKER__MAX_COOLDOWN_S", Default: "{SCOPE}__BREAKER__MAX_COOLDOWN_S, or this source's COOLDOWN_S when larger",
		Form:    formSecPos + ", >= this source's COOLDOWN_S (its own or the scope's)",
		Meaning: "This source's cap of the doubling cooldown, in place of the scope's.", Example: "120", Kind: KindSecondsPos, at: inSource(func(c *core.SourceConfig) any { return &c.Breaker.MaxCooldown })},

	// Scope keys.
	{Pattern: scopeP + "GLOBAL__MAX_CONCURRENCY", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide in-flight cap across sources.", Example: "16", Kind: KindIntNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Global.MaxConcurrency })},
	{Pattern: scopeP + "GLOBAL__RPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide requests per minute.", Example: "120", Kind: KindIntNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Global.RPM })},
	{Pattern: scopeP + "GLOBAL__TPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide tokens per minute; when > 0, every source needs EST_TOKENS.", Example: "200000", Kind: KindIntNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Global.TPM })},
	{Pattern: scopeP + "GLOBAL__POOL", Form: "name: letters, digits, _ and -",
		Meaning: "Scopes naming the same pool share their GLOBAL gates (one count for all of them, in memory within a process and in Redis across processes); each scope's GLOBAL limits apply to the pool's count.", Example: "shared", Kind: KindName, at: inScope(func(s *core.GatewaySettings) any { return &s.GlobalPool })},
	{Pattern: scopeP + "BUDGET__USD", Default: "none", Form: "decimal > 0 (USD)",
		Meaning: "Spend budget of the scope per BUDGET__WINDOW_S: each attempt reserves its estimated cost (prompt at the input price, max_tokens, else EST_TOKENS, else 1024 tokens at the output price) in the admission step and settles it to the actual cost; a call that does not fit is refused before any request (budget_exhausted, with RetryAfter = the window's end). Needs a price for every source's model (PGW_PRICING_PATH).", Example: "50", Kind: KindDecimalPos, read: (*loader).budget},
	{Pattern: scopeP + "BUDGET__WINDOW_S", Default: "86400", Form: "integer seconds >= 1",
		Meaning: "The budget's window: fixed windows aligned to the Unix epoch (86400 resets at 00:00 UTC), shared by every process on the backend.", Example: "3600", Kind: KindIntPos, read: readWithPair},
	{Pattern: scopeP + "SELECTOR", Default: "health_aware",
		Values: []string{"health_aware", "round_robin", "least_inflight", "cost_aware"},
		Form:   "health_aware | round_robin | least_inflight | cost_aware", Meaning: "Source selection strategy.", Example: "health_aware", Kind: KindEnum, at: inScope(func(s *core.GatewaySettings) any { return &s.Selector })},
	{Pattern: scopeP + "PREFERRED_REGION", Form: "free string",
		Meaning: "Sources whose REGION matches are preferred.", Example: "cn-east", Kind: KindString, at: inScope(func(s *core.GatewaySettings) any { return &s.PreferredRegion })},
	{Pattern: scopeP + "QUOTA_FULL", Default: "wait", Values: []string{"wait", "fail_fast"},
		Form: "wait | fail_fast", Meaning: "When every gate is full: wait (bounded by the stall rule) or fail at once.", Example: "wait", Kind: KindEnum, at: inScope(func(s *core.GatewaySettings) any { return &s.QuotaFull })},
	{Pattern: scopeP + "RETRY__MAX_ATTEMPTS", Default: "LLM_MAX_RETRIES, else 3", Form: formIntPos,
		Meaning: "Attempts per call across sources, including the first.", Example: "3", Kind: KindIntPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Retry.MaxAttempts }), flat: "LLM_MAX_RETRIES"},
	{Pattern: scopeP + "RETRY__BACKOFF_BASE_S", Default: "LLM_RETRY_BASE_DELAY, else 1", Form: formSecNonNeg,
		Meaning: "First backoff; doubles per retry, with jitter.", Example: "1", Kind: KindSecondsNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Retry.BackoffBase }), flat: "LLM_RETRY_BASE_DELAY"},
	{Pattern: scopeP + "RETRY__BACKOFF_MAX_S", Default: "LLM_RETRY_MAX_DELAY, else 30", Form: formSecNonNeg + ", >= BACKOFF_BASE_S",
		Meaning: "Cap of every backoff.", Example: "30", Kind: KindSecondsNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Retry.BackoffMax }), flat: "LLM_RETRY_MAX_DELAY"},
	{Pattern: scopeP + "RETRY__TIER_PATIENCE_S", Default: "3", Form: formSecNonNeg,
		Meaning: "How long a call stays in the best PRIORITY tier after a healthy source there blips (5xx, reset, 429 with a Retry-After within it): retried in the tier before a lower tier is used. 0 = fail over at once.", Example: "3", Kind: KindSecondsNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Retry.TierPatience })},
	{Pattern: scopeP + "BREAKER__FAIL_THRESHOLD", Default: "LLM_CIRCUIT_BREAKER_THRESHOLD, else 5", Form: formIntPos,
		Meaning: "Consecutive failures that open the breaker (effective: max(this, 2 x MAX_CONCURRENCY)).", Example: "5", Kind: KindIntPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.FailThreshold }), flat: "LLM_CIRCUIT_BREAKER_THRESHOLD"},
	{Pattern: scopeP + "BREAKER__COOLDOWN_S", Default: "LLM_CIRCUIT_BREAKER_COOLDOWN, else 5", Form: formSecPos,
		Meaning: "First open period; doubles on each failed probe, up to MAX_COOLDOWN_S.", Example: "5", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.Cooldown }), flat: "LLM_CIRCUIT_BREAKER_COOLDOWN"},
	{Pattern: scopeP + "BREAKER__PROBE_TTL_S", Default: "the largest source TIMEOUT_S", Form: formSecPos + ", >= every source TIMEOUT_S",
		Meaning: "Lease of the half-open probe.", Example: "120", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.ProbeTTL }),
		derive: func(s *core.GatewaySettings) any { d, _ := largest(s, timeoutOf); return d }},
	{Pattern: scopeP + "BREAKER__MIN_CALLS", Default: "20", Form: formIntPos,
		Meaning: "Window samples needed before the failure-rate channel acts.", Example: "20", Kind: KindIntPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.MinCalls })},
	{Pattern: scopeP + "BREAKER__FAIL_RATE", Default: "0.5", Form: "decimal, 0 < x <= 1",
		Meaning: "Window failure rate that opens the breaker.", Example: "0.5", Kind: KindFraction, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.FailRate })},
	{Pattern: scopeP + "BREAKER__WINDOW_S", Default: "60", Form: formSecPos,
		Meaning: "Length of the failure-rate window.", Example: "60", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.Window })},
	{Pattern: scopeP + "BREAKER__MAX_COOLDOWN_S", Default: "8, or COOLDOWN_S when larger", Form: formSecPos + ", >= COOLDOWN_S",
		Meaning: "Cap of the doubling cooldown: with the defaults a recovered source gets its traffic back within 10 s.", Example: "8", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.MaxCooldown }),
		derive: func(s *core.GatewaySettings) any { return max(s.Breaker.MaxCooldown, s.Breaker.Cooldown) }},
	{Pattern: scopeP + "BREAKER__HALF_OPEN_SUCCESSES", Default: "1", Form: formIntPos,
		Meaning: "Probe successes needed to close.", Example: "1", Kind: KindIntPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.HalfOpenSuccesses })},
	{Pattern: scopeP + "BREAKER__TIMEOUT_WEIGHT", Default: "1", Form: "decimal, 0 <= x <= 1",
		Meaning: "Fraction of a failure a timeout counts as.", Example: "1", Kind: KindUnit, at: inScope(func(s *core.GatewaySettings) any { return &s.Breaker.TimeoutWeight })},
	{Pattern: scopeP + "BACKPRESSURE__STALL_WINDOW_S", Default: "max(60, the largest TTFT_TIMEOUT_S)",
		Form:    formSecPos + ", >= every source TTFT_TIMEOUT_S, > POLL_INTERVAL_S",
		Meaning: "A call waiting this long with no progress anywhere in the scope gives up (reason stalled).", Example: "60", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Backpressure.StallWindow }),
		derive: func(s *core.GatewaySettings) any { d, _ := largest(s, ttftOf); return max(defaultStallWindowFloor, d) }},
	{Pattern: scopeP + "BACKPRESSURE__POLL_INTERVAL_S", Default: "0.25", Form: formSecPos + ", < STALL_WINDOW_S",
		Meaning: "How often a waiting call re-tries a limiter that does not queue (a custom one, a Redis scope in a pool); a queuing limiter hands freed room to its waiters at once.", Example: "0.25", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Backpressure.PollInterval })},
	{Pattern: scopeP + "BACKPRESSURE__QUEUE_SHARE", Default: "9", Form: formIntPos,
		Meaning: "Admission queue: consecutive admissions of a higher priority class that a class with waiters lets pass before it is served (9: a waiting class gets at least one admission in every 11). A limiter shared by several scopes (the gateway's memory limiter) takes the first routed scope's value; processes sharing a Redis queue should agree on it (each call's own value applies to the choices it makes).", Example: "9", Kind: KindIntPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Backpressure.QueueShare })},
	{Pattern: scopeP + "BACKPRESSURE__QUEUE_CLAIM_TTL_S", Default: "2", Form: formSecPos,
		Meaning: "Admission queue: how long a slot handed to a waiter stays reserved for it; a claim not taken in time lapses to the next waiter. Shared like QUEUE_SHARE.", Example: "2", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Backpressure.QueueClaimTTL })},
	{Pattern: scopeP + "BACKPRESSURE__QUEUE_LEASE_S", Default: "300", Form: formSecPos,
		Meaning: "Admission queue on the redis limiter: how long a waiter's place lasts in Redis when its process does not renew it (a live process renews it every four fifths of it), so a process that dies leaves no place older.", Example: "300", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.Backpressure.QueueLease })},
	{Pattern: scopeP + "FALLBACK__STALE_S", Default: "0 (off)", Form: formSecNonNeg,
		Meaning: "How long past its TTL a cached answer may still be served, marked degraded, when the scope is unavailable. Needs a cache.", Example: "3600", Kind: KindSecondsNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Fallback.Stale })},
	{Pattern: scopeP + "QUALITY__GUARD", Default: "false", Form: "true | false | 1 | 0",
		Meaning: "Quality guard: empty answers, repetition loops, refusals and finish_reason length are invalid results, retried on another source without charging the breaker.", Example: "false", Kind: KindBool, at: inScope(func(s *core.GatewaySettings) any { return &s.Quality.Guard })},
	{Pattern: scopeP + "QUALITY__MIN_CHARS", Default: "1", Form: formIntNonNeg,
		Meaning: "With the guard on, answers shorter than this (in characters, tool calls excepted) are invalid.", Example: "1", Kind: KindIntNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.Quality.MinChars })},
	// Embedding keys: single-part scope keys read by package embed from
	// GatewaySettings.Extra (the settings parser keeps them there verbatim).
	{Pattern: scopeP + "BATCH_SIZE", Required: "in an embedding scope", Form: formIntPos, Reader: ReaderEmbed,
		Meaning: "Embedding scopes (package embed): inputs per upstream request.", Example: "64", Kind: KindIntPos},
	{Pattern: scopeP + "NORMALIZE", Default: "false", Form: formBool, Reader: ReaderEmbed,
		Meaning: "Embedding scopes: L2-normalise every vector (a zero vector stays zero).", Example: "false", Kind: KindBool},
	{Pattern: scopeP + "EXPECTED_DIM", Default: "off", Form: formIntPos, Reader: ReaderEmbed,
		Meaning: "Embedding scopes: the length every vector must have.", Example: "1536", Kind: KindIntPos},
	{Pattern: scopeP + "CONCURRENCY", Default: "1", Form: "integer, 1 <= x <= 64", Reader: ReaderEmbed,
		Meaning: "Embedding scopes: batches of one Embed call in flight at once.", Example: "1", Kind: KindIntPos},
	{Pattern: scopeP + "ENCODING_FORMAT", Default: "float", Values: []string{"float", "base64"}, Form: "float | base64", Reader: ReaderEmbed,
		Meaning: "Embedding scopes: the encoding_format requested upstream (base64 is about a quarter of the bytes).", Example: "float", Kind: KindEnum},
	{Pattern: scopeP + "MAX_INPUTS", Default: "2048", Form: formIntPos, Reader: ReaderEmbed,
		Meaning: "Embedding scopes: texts one Embed call accepts; more is refused before any request.", Example: "2048", Kind: KindIntPos},
	{Pattern: scopeP + "MAX_INPUT_BYTES", Default: "2097152 (2 MiB)", Form: formIntPos, Reader: ReaderEmbed,
		Meaning: "Embedding scopes: summed bytes of one Embed call's texts; more is refused before any request.", Example: "2097152", Kind: KindIntPos},
	{Pattern: extraP, Form: "any string", Reader: ReaderNobody,
		Meaning: "Escape for your own code: a single-part scope key starting with X_ is kept verbatim (trimmed) in GatewaySettings.Extra[\"X_{NAME}\"] and never checked. Every other unknown {SCOPE}__ key is an error, with a suggestion when a known key is close.",
		Example: "anything", Kind: KindString},

	// Flat shortcuts: fallbacks for every scope; scope keys win.
	{Pattern: "LLM_MAX_RETRIES", Form: formIntPos,
		Meaning: "Fallback for {SCOPE}__RETRY__MAX_ATTEMPTS (includes the first attempt).", Example: "3", Kind: KindIntPos},
	{Pattern: "LLM_RETRY_BASE_DELAY", Form: formSecNonNeg,
		Meaning: "Fallback for {SCOPE}__RETRY__BACKOFF_BASE_S.", Example: "1", Kind: KindSecondsNonNeg},
	{Pattern: "LLM_RETRY_MAX_DELAY", Form: formSecNonNeg,
		Meaning: "Fallback for {SCOPE}__RETRY__BACKOFF_MAX_S.", Example: "30", Kind: KindSecondsNonNeg},
	{Pattern: "LLM_CIRCUIT_BREAKER_THRESHOLD", Form: formIntPos,
		Meaning: "Fallback for {SCOPE}__BREAKER__FAIL_THRESHOLD.", Example: "5", Kind: KindIntPos},
	{Pattern: "LLM_CIRCUIT_BREAKER_COOLDOWN", Form: formSecPos,
		Meaning: "Fallback for {SCOPE}__BREAKER__COOLDOWN_S.", Example: "30", Kind: KindSecondsPos},
	{Pattern: "LLM_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's TIMEOUT_S.", Example: "120", Kind: KindSecondsPos},
	{Pattern: "LLM_TTFT_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's TTFT_TIMEOUT_S (still validated as a pair).", Example: "30", Kind: KindSecondsPos},
	{Pattern: "LLM_INTER_TOKEN_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's INTER_TOKEN_TIMEOUT_S (still validated as a pair).", Example: "10", Kind: KindSecondsPos},

	// Assembly keys.
	{Pattern: "PGW_LIMITER_BACKEND", Required: "yes", Values: []string{"memory", "redis"}, Form: "memory | redis | a registered name",
		Meaning: "Where rate-limit state lives; many processes need redis.", Example: "memory", Kind: KindBackend,
		at: inScope(func(s *core.GatewaySettings) any { return &s.LimiterBackend }), registry: registry.KindLimiter},
	{Pattern: "PGW_BREAKER_BACKEND", Required: "yes", Values: []string{"memory", "redis"}, Form: "memory | redis | a registered name",
		Meaning: "Where breaker state lives; many processes need redis.", Example: "memory", Kind: KindBackend,
		at: inScope(func(s *core.GatewaySettings) any { return &s.BreakerBackend }), registry: registry.KindBreaker},
	{Pattern: "PGW_CACHE_BACKEND", Required: "yes", Values: []string{"none", "memory", "redis"}, Form: "none | memory | redis | a registered name",
		Meaning: "Response cache.", Example: "none", Kind: KindBackend,
		at: inScope(func(s *core.GatewaySettings) any { return &s.CacheBackend }), registry: registry.KindCache},
	{Pattern: "PGW_TELEMETRY_BACKEND", Required: "yes", Values: []string{"none", "sqlite", "postgres"}, Form: "none | sqlite | postgres | a registered name",
		Meaning: "Telemetry sink (one row per call).", Example: "none", Kind: KindBackend,
		at: inScope(func(s *core.GatewaySettings) any { return &s.TelemetryBackend }), registry: registry.KindTelemetry},
	{Pattern: "PGW_CACHE_NAMESPACE", Required: "if PGW_CACHE_BACKEND is not none", Form: "non-empty string",
		Meaning: "Cache namespace; keeps projects and tenants apart.", Example: "my-project", Kind: KindString, at: inScope(func(s *core.GatewaySettings) any { return &s.CacheNamespace }),
		expect: "a non-empty namespace", need: neededBy("PGW_CACHE_BACKEND")},
	{Pattern: "PGW_CACHE_TTL_S", Required: "if PGW_CACHE_BACKEND is not none", Form: formSecPos,
		Meaning: "Lifetime of a cache entry.", Example: "604800", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.CacheTTL }), need: neededBy("PGW_CACHE_BACKEND")},
	{Pattern: "PGW_TELEMETRY_CONTENT", Default: "full", Values: []string{"full", "redacted", "none"}, Form: "full | redacted | none",
		Meaning: "What a telemetry row keeps of the prompts, the answer and its thinking: full; redacted (every configured secret removed by the library's redaction rule); none (empty). Tokens, cost, sources, timings and errors are always kept.", Example: "full", Kind: KindEnum, at: inScope(func(s *core.GatewaySettings) any { return &s.TelemetryContent })},
	{Pattern: "PGW_TELEMETRY_SQLITE_PATH", Required: "if PGW_TELEMETRY_BACKEND=sqlite", Form: "file path",
		Meaning: "SQLite database file.", Example: "logs/telemetry.db", Kind: KindPath, at: inScope(func(s *core.GatewaySettings) any { return &s.TelemetrySQLitePath }),
		expect: "a file path", need: neededBy("PGW_TELEMETRY_BACKEND", "sqlite")},
	{Pattern: "PGW_TELEMETRY_PG_DSN", Required: "if PGW_TELEMETRY_BACKEND=postgres", Form: "Postgres DSN",
		Meaning: "Postgres connection string. Never echoed.", Example: "postgres://user:pass@localhost:5432/polygateway", Kind: KindSecret, at: inScope(func(s *core.GatewaySettings) any { return &s.TelemetryPGDSN }),
		expect: "a Postgres DSN", need: neededBy("PGW_TELEMETRY_BACKEND", "postgres")},
	{Pattern: "PGW_PRICING_PATH", Form: "file path",
		Meaning: `Pricing JSON {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}; stored only, read at assembly.`, Example: "config/prices.json", Kind: KindPath, at: inScope(func(s *core.GatewaySettings) any { return &s.PricingPath })},
	{Pattern: "PGW_STRUCTURED_MAX_RETRIES", Default: "2", Form: formIntNonNeg,
		Meaning: "Structured-output re-asks after the first answer (0 = none).", Example: "2", Kind: KindIntNonNeg, at: inScope(func(s *core.GatewaySettings) any { return &s.StructuredMaxRetries })},
	{Pattern: "PGW_LEASE_TTL_S", Default: "1500", Form: formSecPos + ", >= every source TIMEOUT_S",
		Meaning: "Lease of a concurrency permit, so a dead process frees its slots.", Example: "1500", Kind: KindSecondsPos, at: inScope(func(s *core.GatewaySettings) any { return &s.LeaseTTL })},
	{Pattern: "REDIS_URL", Required: "if any PGW_*_BACKEND is redis", Form: "redis://, rediss:// or unix:// URL",
		Meaning: "Shared by the redis backends. Never echoed. Validated only when a redis backend is selected.",
		Example: "redis://localhost:6379/0", Kind: KindSecret, at: inScope(func(s *core.GatewaySettings) any { return &s.RedisURL }),
		expect: redisURLForm, need: (*validator).redis},
	{Pattern: "PGW_ALLOW_KEYS", Form: "comma-separated key names; a trailing * matches a prefix",
		Meaning: "Keys of other software that look like ours (e.g. LLM_MODEL) and are not to be checked: listed keys are ignored instead of being unknown-key errors.",
		Example: "LLM_MODEL,LLM_API_KEY", Kind: KindList},
	{Pattern: escapeP, Form: "any string", Reader: ReaderNobody,
		Meaning: "Escape for other software: PGW_X_… keys are ignored. Every other unknown PGW_* or flat LLM_* key (one without __) is an error, with a suggestion when a known key is close.",
		Example: "anything", Kind: KindString},

	// Gateway keys (cmd/polygateway): accepted by every client, read by the
	// gateway only.
	{Pattern: "PGW_LISTEN_ADDR", Default: "127.0.0.1:8400", Form: "host:port", Reader: ReaderGateway,
		Meaning: "Gateway: listen address.", Example: "127.0.0.1:8400", Kind: KindString},
	{Pattern: "PGW_ROUTES", Required: "unless PGW_DEFAULT_SCOPE or an embeddings route is set", Form: "model=SCOPE,…", Reader: ReaderGateway,
		Meaning: "Gateway: chat routes (reloadable).", Example: "gpt-4o=LLM,fast=FAST", Kind: KindRoutes},
	{Pattern: "PGW_DEFAULT_SCOPE", Form: "scope name", Reader: ReaderGateway,
		Meaning: "Gateway: scope for chat models not in PGW_ROUTES (reloadable).", Example: "LLM", Kind: KindString},
	{Pattern: "PGW_EMBED_ROUTES", Form: "model=SCOPE,…", Reader: ReaderGateway,
		Meaning: "Gateway: embeddings routes (reloadable); the scope needs {SCOPE}__BATCH_SIZE.", Example: "text-embedding-3-small=EMBED", Kind: KindRoutes},
	{Pattern: "PGW_DEFAULT_EMBED_SCOPE", Form: "scope name", Reader: ReaderGateway,
		Meaning: "Gateway: scope for embeddings models not in PGW_EMBED_ROUTES (reloadable).", Example: "EMBED", Kind: KindString},
	{Pattern: "PGW_STREAM_COMMIT", Default: "first_token", Values: []string{"first_token", "buffer"}, Form: "first_token | buffer", Reader: ReaderGateway,
		Meaning: "Gateway: relay stream deltas as they come (first_token) or hold the answer until the call succeeded (buffer).", Example: "first_token", Kind: KindEnum},
	{Pattern: "PGW_ADMIN_TOKEN", Default: "admin endpoints off", Form: "non-empty string", Reader: ReaderGateway,
		Meaning: "Gateway: bearer token of /admin/…; also opens /metrics and the /readyz details. Never logged.", Example: "replace-me", Kind: KindSecret},
	{Pattern: "PGW_ADMIN_ADDR", Default: "off", Form: "host:port", Reader: ReaderGateway,
		Meaning: "Gateway: a separate listener serving Go's profiles (net/http/pprof) under /debug/pprof/, without authentication: bind it to loopback. -admin-addr overrides it.", Example: "127.0.0.1:6060", Kind: KindString},
	{Pattern: "PGW_METRICS_TOKEN", Default: "/metrics open", Form: "non-empty string", Reader: ReaderGateway,
		Meaning: "Gateway: bearer token /metrics requires and the /readyz details need. Never logged.", Example: "replace-me", Kind: KindSecret},
	{Pattern: "PGW_CLIENT_KEYS", Default: "no client auth", Form: "comma-separated keys", Reader: ReaderGateway,
		Meaning: "Gateway: client API keys, kept as SHA-256 digests. Never logged.", Example: "key-a,key-b", Kind: KindList},
	{Pattern: "PGW_CLIENT_PRIORITIES", Default: "normal for every key", Form: "key id=interactive|normal|batch,… (key id: key- and 12 hex digits)", Reader: ReaderGateway,
		Meaning: "Gateway: default priority of a client key's calls, by the key's digest id (key- and the first 12 hex digits of its SHA-256; never the key); the X-PolyGateway-Priority header overrides it. Every id must be one of PGW_CLIENT_KEYS.", Example: "key-0123456789ab=batch", Kind: KindRoutes},
	{Pattern: "PGW_CLIENT_BUDGET_USD", Default: "0 (off)", Form: "decimal >= 0 (USD)", Reader: ReaderGateway,
		Meaning: "Gateway: spend budget of each client key per PGW_CLIENT_BUDGET_WINDOW_S, across every scope (needs PGW_CLIENT_KEYS, and prices for every routed chat scope); counted on the limiter backend, so gateways sharing Redis share it. A call that does not fit gets 429 budget_exhausted with Retry-After.", Example: "20", Kind: KindDecimalNonNeg},
	{Pattern: "PGW_CLIENT_BUDGET_WINDOW_S", Default: "86400", Form: "integer seconds >= 1", Reader: ReaderGateway,
		Meaning: "Gateway: the client budgets' window, fixed and aligned to the Unix epoch (86400 resets at 00:00 UTC).", Example: "86400", Kind: KindIntPos},
	{Pattern: "PGW_CLIENT_RATE", Default: "0 (off)", Form: "decimal >= 0", Reader: ReaderGateway,
		Meaning: "Gateway: per-client requests per second (per key with PGW_CLIENT_KEYS).", Example: "10", Kind: KindDecimalNonNeg},
	{Pattern: "PGW_CLIENT_BURST", Default: "ceil(PGW_CLIENT_RATE)", Form: formIntNonNeg, Reader: ReaderGateway,
		Meaning: "Gateway: per-client burst.", Example: "20", Kind: KindIntNonNeg},
	{Pattern: "PGW_CLIENT_ID_RATE", Default: "0 (off)", Form: "decimal >= 0", Reader: ReaderGateway,
		Meaning: "Gateway: requests per second of each X-Client-Id within its key; needs PGW_CLIENT_KEYS and PGW_CLIENT_RATE.", Example: "1", Kind: KindDecimalNonNeg},
	{Pattern: "PGW_CLIENT_ID_BURST", Default: "ceil(PGW_CLIENT_ID_RATE)", Form: formIntNonNeg, Reader: ReaderGateway,
		Meaning: "Gateway: burst of each X-Client-Id within its key.", Example: "2", Kind: KindIntNonNeg},
	{Pattern: "PGW_CLIENT_MAX", Default: "10000", Form: formIntNonNeg, Reader: ReaderGateway,
		Meaning: "Gateway: per-client buckets kept (with keys: X-Client-Id buckets, shared out between the keys).", Example: "10000", Kind: KindIntNonNeg},
	{Pattern: "PGW_MAX_IN_FLIGHT", Default: "0 (no cap)", Form: formIntNonNeg, Reader: ReaderGateway,
		Meaning: "Gateway: requests served at once, counted before the body is read; beyond it 503 at once.", Example: "256", Kind: KindIntNonNeg},
	{Pattern: "PGW_MAX_BODY_BYTES", Default: "8388608 (8 MiB)", Form: formIntNonNeg, Reader: ReaderGateway,
		Meaning: "Gateway: request body limit.", Example: "8388608", Kind: KindIntNonNeg},
	{Pattern: "PGW_MAX_BUFFERED_BODY_BYTES", Default: "64 MiB, or PGW_MAX_BODY_BYTES if larger", Form: formIntNonNeg + ", >= PGW_MAX_BODY_BYTES", Reader: ReaderGateway,
		Meaning: "Gateway: request body bytes held in memory at once, server-wide; beyond it 503 at once.", Example: "67108864", Kind: KindIntNonNeg},
	{Pattern: "PGW_READ_HEADER_TIMEOUT_S", Default: "10", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: request header read bound.", Example: "10", Kind: KindSecondsPos},
	{Pattern: "PGW_READ_TIMEOUT_S", Default: "60", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: request read bound (the request only, not the answer).", Example: "60", Kind: KindSecondsPos},
	{Pattern: "PGW_WRITE_TIMEOUT_S", Default: "30", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: bound of every single write to a client.", Example: "30", Kind: KindSecondsPos},
	{Pattern: "PGW_IDLE_TIMEOUT_S", Default: "120", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: keep-alive idle timeout.", Example: "120", Kind: KindSecondsPos},
	{Pattern: "PGW_DRAIN_TIMEOUT_S", Default: "30", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: graceful-shutdown drain bound.", Example: "30", Kind: KindSecondsPos},
	{Pattern: "PGW_REQUEST_TIMEOUT_S", Default: "600", Form: formSecPos, Reader: ReaderGateway,
		Meaning: "Gateway: deadline of every chat and embeddings request from its admission (504 timeout past it); also the most a client's X-PolyGateway-Timeout header may ask for.", Example: "600", Kind: KindSecondsPos},
	{Pattern: "PGW_SHARED_CACHE", Default: "false", Form: "true | false", Reader: ReaderGateway,
		Meaning: "Gateway: with PGW_CLIENT_KEYS, answer any client key from the answers cached for another; false keeps each key's cached answers its own.", Example: "false", Kind: KindBool},
	{Pattern: "PGW_METRICS", Default: "true", Form: "true | false", Reader: ReaderGateway,
		Meaning: "Gateway: serve /metrics.", Example: "true", Kind: KindBool},
	{Pattern: "PGW_LOG_LEVEL", Default: "info", Values: []string{"debug", "info", "warn", "error"}, Form: "debug | info | warn | error", Reader: ReaderGateway,
		Meaning: "Gateway: log level (slog to stderr).", Example: "info", Kind: KindEnum},
	{Pattern: "PGW_LOG_FORMAT", Default: "json", Values: []string{"json", "text"}, Form: "json | text", Reader: ReaderGateway,
		Meaning: "Gateway: log format.", Example: "json", Kind: KindEnum},

	// Tooling keys: read by this repository's tests and examples, accepted
	// and ignored by the clients.
	{Pattern: "PGW_TEST_{NAME}", Form: "any string", Reader: ReaderTooling,
		Meaning: "Tests of this repository (PGW_TEST_REDIS_URL, PGW_TEST_PG_DSN): the services to test against.", Example: "redis://127.0.0.1:6379/15", Kind: KindString},
	{Pattern: "PGW_REQUIRE_SERVICES", Form: "1", Reader: ReaderTooling,
		Meaning: "Tests of this repository: 1 = fail instead of skipping when a service is missing.", Example: "1", Kind: KindString},
	{Pattern: "PGW_LOAD", Form: "1", Reader: ReaderTooling,
		Meaning: "Tests of this repository: 1 = run the proxy load test.", Example: "1", Kind: KindString},
	{Pattern: "PGW_LOAD_CLIENTS", Form: formIntPos, Reader: ReaderTooling,
		Meaning: "Tests of this repository: clients of the proxy load test.", Example: "64", Kind: KindString},
	{Pattern: "PGW_LOAD_DURATION", Form: "Go duration", Reader: ReaderTooling,
		Meaning: "Tests of this repository: length of the proxy load test.", Example: "30s", Kind: KindString},
	{Pattern: "PGW_BASE_URL", Form: "URL", Reader: ReaderTooling,
		Meaning: "examples/openai-sdk: the gateway to call.", Example: "http://127.0.0.1:8400/v1", Kind: KindString},
	{Pattern: "PGW_MODEL", Form: "model name", Reader: ReaderTooling,
		Meaning: "examples/openai-sdk: the chat model to ask for.", Example: "gpt-4o", Kind: KindString},
	{Pattern: "PGW_EMBED_MODEL", Form: "model name", Reader: ReaderTooling,
		Meaning: "examples/openai-sdk: the embeddings model to ask for.", Example: "text-embedding-3-small", Kind: KindString},
	{Pattern: "PGW_CLIENT_KEY", Form: "a client key", Reader: ReaderTooling,
		Meaning: "examples/openai-sdk: the key it sends (the gateway's keys are PGW_CLIENT_KEYS).", Example: "key-a", Kind: KindString},
}

// Keys returns the documentation of every known key, in the table order the
// parser validates them. The result is a copy; changing it changes nothing.
func Keys() []KeyDoc {
	out := make([]KeyDoc, len(keyTable))
	for i, d := range keyTable {
		d.Values = slices.Clone(d.Values)
		out[i] = d
	}
	return out
}

// knownKeys is the parser's view of the table, each list in table order:
// the single-part FIELDs of a source (source) and those of its groups
// (sourceGroups, the groups in sourceGroupOrder); the FIELDs of the scope's
// groups (groups, in groupOrder); the single-part scope keys the settings
// parser reads (singles) and those other readers (embed) take from Extra
// (extension); the keys without a scope the settings parser reads (flat);
// every exact key without a scope (names) and every prefix of a {NAME}
// pattern without one (prefixes, PGW_X_, PGW_TEST_), mapped to its
// reader; the rows by pattern; the rows Load reads into the settings
// (scope keys, assembly keys) or into a source; and the parsed Default of
// the rows whose Default is a plain value of their kind.
type knownKeys struct {
	source, sourceGroupOrder, groupOrder, singles, extension, flat []string
	sourceGroups, groups                                           map[string][]string
	names, prefixes                                                map[string]string
	byPattern                                                      map[string]KeyDoc
	scopeFields, assemblyFields, sourceFields                      []KeyDoc
	defaults                                                       map[string]any
}

var known knownKeys

// The table's closures use known: it is derived once the table exists.
func init() { known = deriveKnown(keyTable) }

func deriveKnown(table []KeyDoc) knownKeys {
	k := knownKeys{groups: map[string][]string{}, sourceGroups: map[string][]string{}, byPattern: map[string]KeyDoc{},
		names: map[string]string{}, prefixes: map[string]string{}, defaults: map[string]any{}}
	for _, d := range table {
		if _, dup := k.byPattern[d.Pattern]; dup {
			panic("config: duplicate key pattern " + d.Pattern)
		}
		k.byPattern[d.Pattern] = d
		if v, ok := plainDefault(d); ok {
			k.defaults[d.Pattern] = v
		}
		switch {
		case d.Pattern == extraP:
			// The escape: {SCOPE}__X_… goes to Extra unchecked.
		case strings.HasPrefix(d.Pattern, sourceP):
			k.sourceFields = append(k.sourceFields, d)
			rest := strings.TrimPrefix(d.Pattern, sourceP)
			if g, f, ok := strings.Cut(rest, "__"); ok {
				k.sourceGroupOrder = addToGroup(k.sourceGroups, k.sourceGroupOrder, g, f)
			} else {
				k.source = append(k.source, rest)
			}
		case strings.HasPrefix(d.Pattern, scopeP):
			if d.at.scope != nil || d.read != nil {
				k.scopeFields = append(k.scopeFields, d)
			}
			rest := strings.TrimPrefix(d.Pattern, scopeP)
			if g, f, ok := strings.Cut(rest, "__"); ok {
				k.groupOrder = addToGroup(k.groups, k.groupOrder, g, f)
			} else if d.Reader == ReaderSettings {
				k.singles = append(k.singles, rest)
			} else {
				k.extension = append(k.extension, rest)
			}
		case strings.HasSuffix(d.Pattern, "{NAME}"):
			k.prefixes[strings.TrimSuffix(d.Pattern, "{NAME}")] = d.Reader
		default:
			k.names[d.Pattern] = d.Reader
			if d.Reader == ReaderSettings {
				k.flat = append(k.flat, d.Pattern)
			}
			if d.at.scope != nil {
				k.assemblyFields = append(k.assemblyFields, d)
			}
		}
	}
	return k
}

// addToGroup adds field f to group g, and g to order when it is new.
func addToGroup(groups map[string][]string, order []string, g, f string) []string {
	if _, seen := groups[g]; !seen {
		order = append(order, g)
	}
	groups[g] = append(groups[g], f)
	return order
}

// doc returns the table row of pattern; a missing row is a programming error.
func doc(pattern string) KeyDoc {
	d, ok := known.byPattern[pattern]
	if !ok {
		panic("config: no key table row for " + pattern)
	}
	return d
}
