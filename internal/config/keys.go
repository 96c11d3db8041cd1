package config

import (
	"slices"
	"strings"
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
}

// Placeholder prefixes of the table's patterns.
const (
	scopeP  = "{SCOPE}__"
	sourceP = "{SCOPE}__{PROVIDER}__{N}__"
	extraP  = "{SCOPE}__{NAME}"
)

// Group names of the two-part scope keys {SCOPE}__{GROUP}__{FIELD}.
const (
	groupGlobal       = "GLOBAL"
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
		Example: "https://api.example.com/v1"},
	{Pattern: sourceP + "API_KEY", Required: "yes", Form: "non-empty string; none = no Authorization header",
		Meaning: "Bearer key of the source. Never echoed in errors or logs.", Example: "sk-replace-me"},
	{Pattern: sourceP + "MODEL", Required: "yes", Form: "non-empty string",
		Meaning: "Upstream model name sent in every request.", Example: "qwen-plus"},
	{Pattern: sourceP + "TIMEOUT_S", Required: "yes, unless LLM_TIMEOUT is set", Default: "LLM_TIMEOUT",
		Form: formSecPos + ", <= PGW_LEASE_TTL_S", Meaning: "Wall-clock cap of one attempt.", Example: "120"},
	{Pattern: sourceP + "MAX_CONCURRENCY", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source in-flight cap.", Example: "8"},
	{Pattern: sourceP + "RPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source requests per minute.", Example: "60"},
	{Pattern: sourceP + "TPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Per-source tokens per minute; when > 0, EST_TOKENS is required.", Example: "100000"},
	{Pattern: sourceP + "EST_TOKENS", Required: "if TPM > 0 or {SCOPE}__GLOBAL__TPM > 0", Default: "0",
		Form:    "integer >= 1, <= TPM and <= {SCOPE}__GLOBAL__TPM when those are on",
		Meaning: "Tokens pre-deducted from TPM per call, settled to the actual usage.", Example: "2000"},
	{Pattern: sourceP + "TTFT_TIMEOUT_S", Required: "together with INTER_TOKEN_TIMEOUT_S", Default: "LLM_TTFT_TIMEOUT, else min(TIMEOUT_S / 2, 30)",
		Form:    formSecNonNeg + "; INTER_TOKEN_TIMEOUT_S < TTFT_TIMEOUT_S < TIMEOUT_S; both 0 = no watchdog",
		Meaning: "Stream watchdog: longest wait for the first token (a thinking delta counts; a keep-alive comment does not).", Example: "30"},
	{Pattern: sourceP + "INTER_TOKEN_TIMEOUT_S", Required: "together with TTFT_TIMEOUT_S", Default: "LLM_INTER_TOKEN_TIMEOUT, else TTFT_TIMEOUT_S / 2",
		Form:    formSecNonNeg + "; INTER_TOKEN_TIMEOUT_S < TTFT_TIMEOUT_S; both 0 = no watchdog",
		Meaning: "Stream watchdog: longest gap between two tokens.", Example: "10"},
	{Pattern: sourceP + "CONTEXT_WINDOW", Default: "0 (unknown)", Form: formIntNonNeg,
		Meaning: "The model's context window in tokens: a call whose estimated prompt plus max_tokens does not fit skips this source before any request.", Example: "128000"},
	{Pattern: sourceP + "CONTINUE", Default: "none", Values: []string{"none", "prefill"},
		Form:    "none | prefill",
		Meaning: "prefill: the source can continue an answer given as an assistant prefill (DeepSeek prefix completion, vLLM continue_final_message, servers that continue a trailing assistant message), so a stream cut after it was committed to the caller continues here. Unset: the provider profile decides (deepseek continues).", Example: "prefill"},
	{Pattern: sourceP + "ENABLE_THINKING", Default: "absent = not injected", Form: formBool,
		Meaning: "Inject the provider's thinking switch on (true) or off (false).", Example: "false"},
	{Pattern: sourceP + "MISSING_DONE", Default: "retry", Values: []string{"retry", "salvage"},
		Form:    "retry | salvage",
		Meaning: "A stream ending without [DONE] and without finish_reason is retried, or its content salvaged.", Example: "retry"},
	{Pattern: sourceP + "TRUST_ENV", Default: "true", Form: formBool,
		Meaning: "false = ignore HTTP(S)_PROXY for this source.", Example: "true"},
	{Pattern: sourceP + "PRIORITY", Default: "0", Form: "integer",
		Meaning: "Tier: lower tiers are tried first.", Example: "0"},
	{Pattern: sourceP + "WEIGHT", Default: "1", Form: "decimal > 0",
		Meaning: "Share within a tier.", Example: "1"},
	{Pattern: sourceP + "REGION", Form: "free string",
		Meaning: "Region label, matched against {SCOPE}__PREFERRED_REGION.", Example: "cn-east"},
	{Pattern: sourceP + "EXTRA_BODY", Form: "JSON object",
		Meaning: "Merged into every request body sent to this source (numbers kept exact).", Example: `{"top_k": 20}`},

	// Scope keys.
	{Pattern: scopeP + "GLOBAL__MAX_CONCURRENCY", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide in-flight cap across sources.", Example: "16"},
	{Pattern: scopeP + "GLOBAL__RPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide requests per minute.", Example: "120"},
	{Pattern: scopeP + "GLOBAL__TPM", Default: "0 (off)", Form: formIntNonNeg,
		Meaning: "Scope-wide tokens per minute; when > 0, every source needs EST_TOKENS.", Example: "200000"},
	{Pattern: scopeP + "GLOBAL__POOL", Form: "name: letters, digits, _ and -",
		Meaning: "Scopes naming the same pool share their GLOBAL gates (one count for all of them, in memory within a process and in Redis across processes); each scope's GLOBAL limits apply to the pool's count.", Example: "shared"},
	{Pattern: scopeP + "SELECTOR", Default: "health_aware",
		Values: []string{"health_aware", "round_robin", "least_inflight", "cost_aware"},
		Form:   "health_aware | round_robin | least_inflight | cost_aware", Meaning: "Source selection strategy.", Example: "health_aware"},
	{Pattern: scopeP + "PREFERRED_REGION", Form: "free string",
		Meaning: "Sources whose REGION matches are preferred.", Example: "cn-east"},
	{Pattern: scopeP + "QUOTA_FULL", Default: "wait", Values: []string{"wait", "fail_fast"},
		Form: "wait | fail_fast", Meaning: "When every gate is full: wait (bounded by the stall rule) or fail at once.", Example: "wait"},
	{Pattern: scopeP + "RETRY__MAX_ATTEMPTS", Default: "LLM_MAX_RETRIES, else 3", Form: formIntPos,
		Meaning: "Attempts per call across sources, including the first.", Example: "3"},
	{Pattern: scopeP + "RETRY__BACKOFF_BASE_S", Default: "LLM_RETRY_BASE_DELAY, else 1", Form: formSecNonNeg,
		Meaning: "First backoff; doubles per retry, with jitter.", Example: "1"},
	{Pattern: scopeP + "RETRY__BACKOFF_MAX_S", Default: "LLM_RETRY_MAX_DELAY, else 30", Form: formSecNonNeg + ", >= BACKOFF_BASE_S",
		Meaning: "Cap of every backoff.", Example: "30"},
	{Pattern: scopeP + "RETRY__TIER_PATIENCE_S", Default: "3", Form: formSecNonNeg,
		Meaning: "How long a call stays in the best PRIORITY tier after a healthy source there blips (5xx, reset, 429 with a Retry-After within it): retried in the tier before a lower tier is used. 0 = fail over at once.", Example: "3"},
	{Pattern: scopeP + "BREAKER__FAIL_THRESHOLD", Default: "LLM_CIRCUIT_BREAKER_THRESHOLD, else 5", Form: formIntPos,
		Meaning: "Consecutive failures that open the breaker (effective: max(this, 2 x MAX_CONCURRENCY)).", Example: "5"},
	{Pattern: scopeP + "BREAKER__COOLDOWN_S", Default: "LLM_CIRCUIT_BREAKER_COOLDOWN, else 5", Form: formSecPos,
		Meaning: "First open period; doubles on each re-open.", Example: "30"},
	{Pattern: scopeP + "BREAKER__PROBE_TTL_S", Default: "the largest source TIMEOUT_S", Form: formSecPos + ", >= every source TIMEOUT_S",
		Meaning: "Lease of the half-open probe.", Example: "120"},
	{Pattern: scopeP + "BREAKER__MIN_CALLS", Default: "20", Form: formIntPos,
		Meaning: "Window samples needed before the failure-rate channel acts.", Example: "20"},
	{Pattern: scopeP + "BREAKER__FAIL_RATE", Default: "0.5", Form: "decimal, 0 < x <= 1",
		Meaning: "Window failure rate that opens the breaker.", Example: "0.5"},
	{Pattern: scopeP + "BREAKER__WINDOW_S", Default: "60", Form: formSecPos,
		Meaning: "Length of the failure-rate window.", Example: "60"},
	{Pattern: scopeP + "BREAKER__MAX_COOLDOWN_S", Default: "8", Form: formSecPos + ", >= COOLDOWN_S",
		Meaning: "Cap of the doubling cooldown.", Example: "300"},
	{Pattern: scopeP + "BREAKER__HALF_OPEN_SUCCESSES", Default: "1", Form: formIntPos,
		Meaning: "Probe successes needed to close.", Example: "1"},
	{Pattern: scopeP + "BREAKER__TIMEOUT_WEIGHT", Default: "1", Form: "decimal, 0 <= x <= 1",
		Meaning: "Fraction of a failure a timeout counts as.", Example: "1"},
	{Pattern: scopeP + "BACKPRESSURE__STALL_WINDOW_S", Default: "max(60, the largest TTFT_TIMEOUT_S)",
		Form:    formSecPos + ", >= every source TTFT_TIMEOUT_S, > POLL_INTERVAL_S",
		Meaning: "A call waiting this long with no progress anywhere in the scope gives up (reason stalled).", Example: "60"},
	{Pattern: scopeP + "BACKPRESSURE__POLL_INTERVAL_S", Default: "0.25", Form: formSecPos + ", < STALL_WINDOW_S",
		Meaning: "How often a waiting call re-tries the limiter.", Example: "0.25"},
	{Pattern: scopeP + "FALLBACK__STALE_S", Default: "0 (off)", Form: formSecNonNeg,
		Meaning: "How long past its TTL a cached answer may still be served, marked degraded, when the scope is unavailable. Needs a cache.", Example: "3600"},
	{Pattern: scopeP + "QUALITY__GUARD", Default: "false", Form: "true | false | 1 | 0",
		Meaning: "Quality guard: empty answers, repetition loops, refusals and finish_reason length are invalid results, retried on another source without charging the breaker.", Example: "false"},
	{Pattern: scopeP + "QUALITY__MIN_CHARS", Default: "1", Form: formIntNonNeg,
		Meaning: "With the guard on, answers shorter than this (in characters, tool calls excepted) are invalid.", Example: "1"},
	{Pattern: extraP, Form: "any string",
		Meaning: "Any other single-part scope key (e.g. EMBED__BATCH_SIZE) is kept verbatim (trimmed) in GatewaySettings.Extra[NAME] for sibling clients; a source or group FIELD name here is an error.",
		Example: "64"},

	// Flat shortcuts: fallbacks for every scope; scope keys win.
	{Pattern: "LLM_MAX_RETRIES", Form: formIntPos,
		Meaning: "Fallback for {SCOPE}__RETRY__MAX_ATTEMPTS (includes the first attempt).", Example: "3"},
	{Pattern: "LLM_RETRY_BASE_DELAY", Form: formSecNonNeg,
		Meaning: "Fallback for {SCOPE}__RETRY__BACKOFF_BASE_S.", Example: "1"},
	{Pattern: "LLM_RETRY_MAX_DELAY", Form: formSecNonNeg,
		Meaning: "Fallback for {SCOPE}__RETRY__BACKOFF_MAX_S.", Example: "30"},
	{Pattern: "LLM_CIRCUIT_BREAKER_THRESHOLD", Form: formIntPos,
		Meaning: "Fallback for {SCOPE}__BREAKER__FAIL_THRESHOLD.", Example: "5"},
	{Pattern: "LLM_CIRCUIT_BREAKER_COOLDOWN", Form: formSecPos,
		Meaning: "Fallback for {SCOPE}__BREAKER__COOLDOWN_S.", Example: "30"},
	{Pattern: "LLM_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's TIMEOUT_S.", Example: "120"},
	{Pattern: "LLM_TTFT_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's TTFT_TIMEOUT_S (still validated as a pair).", Example: "30"},
	{Pattern: "LLM_INTER_TOKEN_TIMEOUT", Form: formSecPos,
		Meaning: "Fallback for every source's INTER_TOKEN_TIMEOUT_S (still validated as a pair).", Example: "10"},

	// Assembly keys.
	{Pattern: "PGW_LIMITER_BACKEND", Required: "yes", Values: []string{"memory", "redis"}, Form: "memory | redis | a registered name",
		Meaning: "Where rate-limit state lives; many processes need redis.", Example: "memory"},
	{Pattern: "PGW_BREAKER_BACKEND", Required: "yes", Values: []string{"memory", "redis"}, Form: "memory | redis | a registered name",
		Meaning: "Where breaker state lives; many processes need redis.", Example: "memory"},
	{Pattern: "PGW_CACHE_BACKEND", Required: "yes", Values: []string{"none", "memory", "redis"}, Form: "none | memory | redis | a registered name",
		Meaning: "Response cache.", Example: "none"},
	{Pattern: "PGW_CACHE_NAMESPACE", Required: "if PGW_CACHE_BACKEND is not none", Form: "non-empty string",
		Meaning: "Cache namespace; keeps projects and tenants apart.", Example: "my-project"},
	{Pattern: "PGW_CACHE_TTL_S", Required: "if PGW_CACHE_BACKEND is not none", Form: formSecPos,
		Meaning: "Lifetime of a cache entry.", Example: "604800"},
	{Pattern: "PGW_TELEMETRY_BACKEND", Required: "yes", Values: []string{"none", "sqlite", "postgres"}, Form: "none | sqlite | postgres | a registered name",
		Meaning: "Telemetry sink (one row per call).", Example: "none"},
	{Pattern: "PGW_TELEMETRY_SQLITE_PATH", Required: "if PGW_TELEMETRY_BACKEND=sqlite", Form: "file path",
		Meaning: "SQLite database file.", Example: "logs/telemetry.db"},
	{Pattern: "PGW_TELEMETRY_PG_DSN", Required: "if PGW_TELEMETRY_BACKEND=postgres", Form: "Postgres DSN",
		Meaning: "Postgres connection string. Never echoed.", Example: "postgres://user:pass@localhost:5432/polygateway"},
	{Pattern: "PGW_PRICING_PATH", Form: "file path",
		Meaning: `Pricing JSON {"model": {"input_per_1m": 2.1, "output_per_1m": 8.4}}; stored only, read at assembly.`, Example: "config/prices.json"},
	{Pattern: "PGW_STRUCTURED_MAX_RETRIES", Default: "2", Form: formIntNonNeg,
		Meaning: "Structured-output re-asks after the first answer (0 = none).", Example: "2"},
	{Pattern: "PGW_LEASE_TTL_S", Default: "1500", Form: formSecPos + ", >= every source TIMEOUT_S",
		Meaning: "Lease of a concurrency permit, so a dead process frees its slots.", Example: "1500"},
	{Pattern: "REDIS_URL", Required: "if any PGW_*_BACKEND is redis", Form: "redis://, rediss:// or unix:// URL",
		Meaning: "Shared by the redis backends. Never echoed. Validated only when a redis backend is selected.",
		Example: "redis://localhost:6379/0"},
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

// known is the parser's view of the table.
type knownKeys struct {
	// source lists the source FIELDs in table order.
	source []string
	// groups maps GROUP to its FIELDs in table order.
	groups map[string][]string
	// groupOrder lists the groups in table order.
	groupOrder []string
	// singles lists the single-part scope keys in table order.
	singles []string
	// flat lists the keys without a scope in table order.
	flat []string
	// byPattern indexes the table.
	byPattern map[string]KeyDoc
}

var known = deriveKnown(keyTable)

func deriveKnown(table []KeyDoc) knownKeys {
	k := knownKeys{groups: map[string][]string{}, byPattern: map[string]KeyDoc{}}
	for _, d := range table {
		if _, dup := k.byPattern[d.Pattern]; dup {
			panic("config: duplicate key pattern " + d.Pattern)
		}
		k.byPattern[d.Pattern] = d
		switch {
		case d.Pattern == extraP:
			// Documentation only: the catch-all.
		case strings.HasPrefix(d.Pattern, sourceP):
			k.source = append(k.source, strings.TrimPrefix(d.Pattern, sourceP))
		case strings.HasPrefix(d.Pattern, scopeP):
			rest := strings.TrimPrefix(d.Pattern, scopeP)
			if g, f, ok := strings.Cut(rest, "__"); ok {
				if _, seen := k.groups[g]; !seen {
					k.groupOrder = append(k.groupOrder, g)
				}
				k.groups[g] = append(k.groups[g], f)
			} else {
				k.singles = append(k.singles, rest)
			}
		default:
			k.flat = append(k.flat, d.Pattern)
		}
	}
	return k
}

// doc returns the table row of pattern; a missing row is a programming error.
func doc(pattern string) KeyDoc {
	d, ok := known.byPattern[pattern]
	if !ok {
		panic("config: no key table row for " + pattern)
	}
	return d
}
