// Package config parses and validates the configuration of one PolyGateway
// scope from a flat key/value map, producing a core.GatewaySettings.
//
// ReadEnv builds the map (a .env file overlaid by the process environment);
// Load parses it without any I/O. Keys lists every known key: the same table
// drives the parser, so documentation generated from it cannot drift.
//
// # Keys
//
// Four families, all documented row by row in Keys:
//
//   - source keys {SCOPE}__{PROVIDER}__{N}__{FIELD}: N is an integer >= 1
//     without leading zeros, PROVIDER upper-case [A-Z0-9_] without "__"; the
//     source is named lower(PROVIDER)_N and sources are ordered by
//     (provider, N). An unknown FIELD is an error (typos are caught). A
//     source's own breaker values are {SCOPE}__{PROVIDER}__{N}__BREAKER__
//     {FIELD} (FIELD = FAIL_THRESHOLD, COOLDOWN_S, MAX_COOLDOWN_S): a FIELD
//     holding "__" is a group FIELD of the source, and a key of four parts
//     whose group or FIELD is unknown is an error too.
//   - scope keys {SCOPE}__{GROUP}__{FIELD} (GROUP = GLOBAL, RETRY, BREAKER,
//     BACKPRESSURE, FALLBACK, QUALITY; an unknown FIELD is an error) and
//     {SCOPE}__SELECTOR, {SCOPE}__PREFERRED_REGION, {SCOPE}__QUOTA_FULL.
//     The embedding keys ({SCOPE}__BATCH_SIZE, …, read by package embed) and
//     {SCOPE}__X_{NAME} (the user's own, never checked) go, trimmed, into
//     GatewaySettings.Extra["NAME"] (always non-nil). Any other single-part
//     key is an error.
//   - flat shortcuts LLM_MAX_RETRIES, LLM_RETRY_BASE_DELAY, ... : fallbacks
//     for every scope; the scope's own key wins.
//   - assembly keys PGW_* and REDIS_URL, shared by every scope.
//
// Every key is known to a reader (KeyDoc.Reader): the settings parser, the
// embeddings client, the gateway (cmd/polygateway) or this repository's
// tests and examples. Load accepts the keys of every reader and reads its
// own, so one environment configures every client and the gateway.
//
// # Unknown keys
//
// A key of the loaded scope, a PGW_* key and a flat LLM_* key (one without
// "__") that no reader knows is an error naming it, with a suggestion when
// a known key is close (see Suggest). The escapes for keys of other
// software: PGW_X_… keys are ignored, {SCOPE}__X_… single-part keys are
// kept in Extra unchecked, and PGW_ALLOW_KEYS lists further keys (exact, or
// a prefix ending in "*") to ignore. Keys of other scopes (including
// LLM_FAST__… for the scope LLM) and keys outside these families (PATH,
// HOME, …) are not looked at.
//
// # Values
//
// Values are trimmed of surrounding whitespace. Seconds (every …_S key and
// the flat delay, cooldown and timeout keys) are plain non-negative decimals
// ("0.5"): no exponent, no hex, no NaN or Inf, never empty.
// Integers are base-10. Booleans are true/false/1/0, case-insensitive.
// Enumerations are case-insensitive and stored in their lower-case spelling.
// A key present with an empty value is an error for typed keys (remove the
// key to get the default) and "missing" for required ones; an empty free
// string (REGION, PREFERRED_REGION, PGW_PRICING_PATH) means unset.
// Flat and PGW_* values are validated whenever present, even if a scope key
// overrides them or the feature they configure is off. REDIS_URL is the
// exception: it is validated only when a redis backend is selected.
//
// # Errors
//
// Load returns a single *Error (never an errors.Join) that lists every
// problem found, each naming its key (Error.Problems), in this order, each
// step in table order:
//
//  1. the scope argument, then PGW_ALLOW_KEYS (either stops the load);
//  2. the shape of every {SCOPE}__ key, in sorted key order (malformed key,
//     unknown name or FIELD, bad PROVIDER or N), then the names of the
//     PGW_* and flat LLM_* keys, in sorted order;
//  3. at least one source;
//  4. the form of every value: assembly keys (PGW_*), flat shortcuts, scope
//     keys, then the sources in (provider, N) order (a required key
//     missing, the watchdog pair set by halves);
//  5. the invariants of the parsed settings (Validate), for the keys not
//     already named: the assembly keys' companions (PGW_CACHE_NAMESPACE and
//     PGW_CACHE_TTL_S with a cache, the telemetry path or DSN, REDIS_URL
//     with a redis backend), the relations inside a scope group
//     (BACKOFF_MAX_S vs BACKOFF_BASE_S, MAX_COOLDOWN_S vs COOLDOWN_S, a
//     budget window without a budget), each source's relations (a PROVIDER
//     one or two letters from a built-in profile without PROFILE,
//     TIMEOUT_S vs PGW_LEASE_TTL_S, EST_TOKENS vs TPM and GLOBAL__TPM,
//     INTER_TOKEN_TIMEOUT_S < TTFT_TIMEOUT_S < TIMEOUT_S), then the
//     relations between the scope and its sources (PROBE_TTL_S,
//     STALL_WINDOW_S, POLL_INTERVAL_S).
//
// Each row of the key table declares a key once: its name, its kind (whose
// rule says how Load parses it and Validate checks it), its default (a
// plain Default is the value Load uses; a flat shortcut or a rule on other
// values may stand before it), when it is required and its documentation.
// Two short tables order the relations between keys; only the stream
// watchdog pair and the budget are read by hand, each from its row.
//
// Validate is also what assembling a client from settings made by hand
// runs (polygateway.FromSettings), so both refuse the same settings with
// the same key.
//
// An *Error names the exact key, or for a relation between two keys the one
// that was explicitly set (the constrained one when both were). A value
// inherited from a flat shortcut is blamed on the flat key. API keys, URLs,
// DSNs and EXTRA_BODY are never echoed.
package config
