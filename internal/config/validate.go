package config

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/polygateway/polygateway/internal/core"
	"github.com/polygateway/polygateway/internal/registry"
)

// Validate checks the invariants of settings, however they were made: the
// domain of every value and every relation between values that Load
// enforces (EST_TOKENS with a TPM, TIMEOUT_S within PGW_LEASE_TTL_S, the
// stream watchdog pair below TIMEOUT_S, MAX_COOLDOWN_S >= COOLDOWN_S,
// PROBE_TTL_S and STALL_WINDOW_S against every source, the backends'
// companions, …). Load calls it on what it parsed, and assembling a client
// from settings (polygateway.FromSettings) calls it on the settings given:
// both refuse the same settings with the same *Error, naming the key the
// environment form of the offending value has. It never changes s.
//
// Settings made by hand may leave an optional value at its zero value. The
// zero values accepted, and what they mean:
//
//   - Selector, QuotaFull, MissingDone, Continue: "" is the default
//     (health_aware, wait, retry, the provider profile's choice).
//   - CacheBackend and TelemetryBackend: "" is none. LimiterBackend and
//     BreakerBackend: "" only with the option that gives the backend
//     (polygateway.WithLimiter, WithBreaker); assembly refuses it otherwise.
//   - Source Weight 0 is 1; Backpressure.PollInterval 0 is 0.25 s;
//     Breaker.HalfOpenSuccesses 0 is 1: the defaults of Load.
//   - Retry.MaxAttempts 0 is a single attempt; Retry.BackoffMax 0 puts no
//     cap on the backoff.
//   - Breaker.FailThreshold 0 turns the consecutive channel off, and
//     FailRate or Window 0 the failure-rate channel; MinCalls 0 is 1;
//     MaxCooldown 0 keeps every open period at Cooldown (no doubling);
//     ProbeTTL 0 gives the half-open probe a lease without expiry.
//   - A source's Breaker overrides: 0 is the scope's value.
//   - Backpressure.StallWindow 0 turns the stall rule off.
//   - LeaseTTL 0 leases each concurrency permit for its attempt's
//     TIMEOUT_S plus a margin.
//   - EstTokens 0 is none (refused with a TPM gate); TTFTTimeout and
//     InterTokenTimeout both 0 switch the stream watchdog off.
//
// The other zero values are themselves (Retry.BackoffBase and
// TierPatience 0, StructuredMaxRetries 0, Quality.MinChars 0, …). A
// source's Timeout, BaseURL, APIKey and Model are required, as are its
// Provider and Index (Name is lower(Provider)_Index, as Load names it), and
// a Budget with a Limit needs a Window of whole seconds.
func Validate(s core.GatewaySettings) error {
	if err := validate(&s, nil); err != nil {
		return err
	}
	return nil
}

// origins says where Load took each value from: origins[key] is the key
// that gave the value of key (key itself, or a flat shortcut such as
// LLM_TIMEOUT), or "" when the value is the default. A key the map does not
// hold gave its own value.
type origins map[string]string

// validator checks one GatewaySettings.
type validator struct {
	s *core.GatewaySettings
	p string // scope + "__"
	// from is nil for settings made by hand: every value is then named by
	// its own key and given when it is not zero.
	from origins
}

// given returns the key to name for the value of key and whether the value
// was given (set in the environment; not zero in settings made by hand).
// A value that was not given is the default, and key names it.
func (v *validator) given(key string, nonzero bool) (string, bool) {
	if v.from == nil {
		return key, nonzero
	}
	if o, ok := v.from[key]; ok {
		if o == "" {
			return key, false
		}
		return o, true
	}
	return key, true
}

// blame returns the key to name for the value of key.
func (v *validator) blame(key string) string {
	k, _ := v.given(key, true)
	return k
}

// origin words where the value of key came from: its key, or "the default".
func (v *validator) origin(key string, nonzero bool) string {
	if k, ok := v.given(key, nonzero); ok {
		return k
	}
	return "the default"
}

// handMade reports whether the settings were not made by Load.
func (v *validator) handMade() bool { return v.from == nil }

func validate(s *core.GatewaySettings, from origins) *Error {
	v := &validator{s: s, from: from}
	if !scopeRE.MatchString(s.Scope) {
		return errf("scope", fmt.Sprintf("invalid scope name %s; expected [A-Z][A-Z0-9_]* without \"__\" and not ending in \"_\" (e.g. LLM, EMBED, OCR_FAST)", show(s.Scope)))
	}
	v.p = s.Scope + "__"
	if len(s.Sources) == 0 {
		return noSources(s.Scope)
	}
	for _, step := range []func() *Error{v.assembly, v.scopeValues, v.sources, v.across} {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// noSources is the error of a scope without sources.
func noSources(scope string) *Error {
	p := scope + "__"
	return errf(p+"{PROVIDER}__1__BASE_URL", fmt.Sprintf(
		"no sources in scope %s: set %s{PROVIDER}__1__BASE_URL, __API_KEY, __MODEL and __TIMEOUT_S (e.g. %sQWEN__1__BASE_URL)",
		scope, p, p))
}

// Wordings of the domain errors of typed values.
func negativeInt(key string, n int, form string) *Error {
	return errf(key, fmt.Sprintf("invalid value %d: must not be negative; expected %s", n, form))
}

func negativeDur(key string, d time.Duration, form string) *Error {
	return errf(key, fmt.Sprintf("invalid value %s: must not be negative; expected %s", secs(d), form))
}

func missing(key, why, form string) *Error {
	return errf(key, fmt.Sprintf("missing: required%s; expected %s", why, form))
}

// intKey and durKey are a value and the key it is named by.
type (
	intKey = struct {
		key string
		n   int
	}
	durKey = struct {
		key string
		d   time.Duration
	}
)

// nonNegInts checks integers that must not be negative.
func nonNegInts(vals ...intKey) *Error {
	for _, c := range vals {
		if c.n < 0 {
			return negativeInt(c.key, c.n, formIntNonNeg)
		}
	}
	return nil
}

// nonNegDurs checks durations that must not be negative.
func nonNegDurs(vals ...durKey) *Error {
	for _, c := range vals {
		if c.d < 0 {
			return negativeDur(c.key, c.d, formSecNonNeg)
		}
	}
	return nil
}

// inRange checks a float within [lo, hi], NaN refused.
func inRange(key string, f, lo, hi float64, loOpen bool) *Error {
	if math.IsNaN(f) || f < lo || f > hi || loOpen && f == lo {
		sign := "<="
		if loOpen {
			sign = "<"
		}
		return errf(key, fmt.Sprintf("invalid value %s: out of range; expected a decimal %s %s x <= %s",
			strconv.FormatFloat(f, 'g', -1, 64), strconv.FormatFloat(lo, 'f', -1, 64), sign, strconv.FormatFloat(hi, 'f', -1, 64)))
	}
	return nil
}

// oneOf checks an enumerated value ("" = the default).
func oneOf(key, pattern, val string) *Error {
	values := doc(pattern).Values
	if val == "" || slices.Contains(values, val) {
		return nil
	}
	return errf(key, fmt.Sprintf("invalid value %s; expected one of %s", show(val), strings.Join(values, ", ")))
}

// backend checks a backend name: a built-in one or a registered one.
func backend(key, val string) *Error {
	if val == "" || slices.Contains(doc(key).Values, val) {
		return nil
	}
	kind := backendKinds[key]
	if registry.Known(kind, val) {
		return nil
	}
	msg := fmt.Sprintf("invalid value %s; expected one of %s", show(val), strings.Join(doc(key).Values, ", "))
	if names := registry.Names(kind); names != "" {
		msg += " (registered: " + names + ")"
	}
	return errf(key, msg)
}

// assembly checks the PGW_* values and REDIS_URL.
func (v *validator) assembly() *Error {
	s := v.s
	for _, b := range []struct{ key, val string }{
		{"PGW_LIMITER_BACKEND", s.LimiterBackend}, {"PGW_BREAKER_BACKEND", s.BreakerBackend},
		{"PGW_CACHE_BACKEND", s.CacheBackend},
	} {
		if err := backend(b.key, b.val); err != nil {
			return err
		}
	}
	if s.CacheBackend != "" && s.CacheBackend != "none" {
		why := " because PGW_CACHE_BACKEND=" + s.CacheBackend
		if s.CacheNamespace == "" {
			return missing("PGW_CACHE_NAMESPACE", why, "a non-empty namespace")
		}
		if s.CacheTTL == 0 {
			return missing("PGW_CACHE_TTL_S", why, formSecPos)
		}
	}
	if s.CacheTTL < 0 {
		return negativeDur("PGW_CACHE_TTL_S", s.CacheTTL, formSecPos)
	}
	if err := backend("PGW_TELEMETRY_BACKEND", s.TelemetryBackend); err != nil {
		return err
	}
	if err := oneOf("PGW_TELEMETRY_CONTENT", "PGW_TELEMETRY_CONTENT", string(s.TelemetryContent)); err != nil {
		return err
	}
	why := " because PGW_TELEMETRY_BACKEND=" + s.TelemetryBackend
	switch {
	case s.TelemetryBackend == "sqlite" && s.TelemetrySQLitePath == "":
		return missing("PGW_TELEMETRY_SQLITE_PATH", why, "a file path")
	case s.TelemetryBackend == "postgres" && s.TelemetryPGDSN == "":
		return missing("PGW_TELEMETRY_PG_DSN", why, "a Postgres DSN")
	}
	if s.StructuredMaxRetries < 0 {
		return negativeInt("PGW_STRUCTURED_MAX_RETRIES", s.StructuredMaxRetries, formIntNonNeg)
	}
	if s.LeaseTTL < 0 {
		return negativeDur("PGW_LEASE_TTL_S", s.LeaseTTL, formSecPos)
	}
	// REDIS_URL is checked only when a redis backend uses it: the name is
	// generic enough that other software in the same environment may set it.
	var users []string
	for _, b := range []struct{ key, val string }{
		{"PGW_LIMITER_BACKEND", s.LimiterBackend}, {"PGW_BREAKER_BACKEND", s.BreakerBackend}, {"PGW_CACHE_BACKEND", s.CacheBackend},
	} {
		if b.val == "redis" {
			users = append(users, b.key+"=redis")
		}
	}
	if len(users) == 0 {
		return nil
	}
	if s.RedisURL == "" {
		return missing("REDIS_URL", " because "+strings.Join(users, " and "), "a redis://, rediss:// or unix:// URL")
	}
	return checkRedisURL(entry{key: "REDIS_URL", val: s.RedisURL})
}

// scopeValues checks the scope's own values and the relations inside a
// group, in table order.
func (v *validator) scopeValues() *Error {
	s, p := v.s, v.p
	if err := nonNegInts(intKey{p + "GLOBAL__MAX_CONCURRENCY", s.Global.MaxConcurrency},
		intKey{p + "GLOBAL__RPM", s.Global.RPM}, intKey{p + "GLOBAL__TPM", s.Global.TPM}); err != nil {
		return err
	}
	if s.GlobalPool != "" && !validName(s.GlobalPool) {
		return errf(p+"GLOBAL__POOL", fmt.Sprintf("%q is not a pool name: use letters, digits, _ and -", s.GlobalPool))
	}
	if err := v.budget(); err != nil {
		return err
	}
	if err := oneOf(p+"SELECTOR", scopeP+"SELECTOR", string(s.Selector)); err != nil {
		return err
	}
	if err := oneOf(p+"QUOTA_FULL", scopeP+"QUOTA_FULL", string(s.QuotaFull)); err != nil {
		return err
	}

	// RETRY
	r := s.Retry
	if r.MaxAttempts < 0 {
		return negativeInt(v.blame(p+"RETRY__MAX_ATTEMPTS"), r.MaxAttempts, formIntPos)
	}
	baseKey, maxKey := p+"RETRY__BACKOFF_BASE_S", p+"RETRY__BACKOFF_MAX_S"
	if err := nonNegDurs(durKey{v.blame(baseKey), r.BackoffBase}, durKey{v.blame(maxKey), r.BackoffMax}); err != nil {
		return err
	}
	// Made by hand, a zero BackoffMax puts no cap on the backoff.
	if !(v.handMade() && r.BackoffMax == 0) {
		if err := v.notBelow(baseKey, r.BackoffBase, "the backoff base", maxKey, r.BackoffMax); err != nil {
			return err
		}
	}
	if r.TierPatience < 0 {
		return negativeDur(p+"RETRY__TIER_PATIENCE_S", r.TierPatience, formSecNonNeg)
	}

	// BREAKER
	b := s.Breaker
	if b.FailThreshold < 0 {
		return negativeInt(v.blame(p+"BREAKER__FAIL_THRESHOLD"), b.FailThreshold, formIntPos)
	}
	coolKey, maxCoolKey := p+"BREAKER__COOLDOWN_S", p+"BREAKER__MAX_COOLDOWN_S"
	if err := nonNegDurs(durKey{v.blame(coolKey), b.Cooldown}, durKey{p + "BREAKER__PROBE_TTL_S", b.ProbeTTL}); err != nil {
		return err
	}
	if b.MinCalls < 0 {
		return negativeInt(p+"BREAKER__MIN_CALLS", b.MinCalls, formIntPos)
	}
	if err := inRange(p+"BREAKER__FAIL_RATE", b.FailRate, 0, 1, !v.handMade()); err != nil {
		return err
	}
	if err := nonNegDurs(durKey{p + "BREAKER__WINDOW_S", b.Window}, durKey{maxCoolKey, b.MaxCooldown}); err != nil {
		return err
	}
	// Made by hand, a zero MaxCooldown keeps every open period at Cooldown.
	if !(v.handMade() && b.MaxCooldown == 0) {
		if err := v.notBelow(coolKey, b.Cooldown, "the cooldown", maxCoolKey, b.MaxCooldown); err != nil {
			return err
		}
	}
	if b.HalfOpenSuccesses < 0 {
		return negativeInt(p+"BREAKER__HALF_OPEN_SUCCESSES", b.HalfOpenSuccesses, formIntPos)
	}
	if err := inRange(p+"BREAKER__TIMEOUT_WEIGHT", b.TimeoutWeight, 0, 1, false); err != nil {
		return err
	}

	// BACKPRESSURE (relations to the sources in across), FALLBACK, QUALITY
	if err := nonNegDurs(durKey{p + "BACKPRESSURE__STALL_WINDOW_S", s.Backpressure.StallWindow},
		durKey{p + "BACKPRESSURE__POLL_INTERVAL_S", s.Backpressure.PollInterval},
		durKey{p + "FALLBACK__STALE_S", s.Fallback.Stale}); err != nil {
		return err
	}
	if s.Quality.MinChars < 0 {
		return negativeInt(p+"QUALITY__MIN_CHARS", s.Quality.MinChars, formIntNonNeg)
	}
	return nil
}

// notBelow checks hi >= lo, two values of which either may be a default.
// The error names hi's key when hi was given, else lo's.
func (v *validator) notBelow(loKey string, lo time.Duration, loName, hiKey string, hi time.Duration) *Error {
	if hi >= lo {
		return nil
	}
	if k, ok := v.given(hiKey, hi != 0); ok {
		return errf(k, fmt.Sprintf("%s must be >= %s (%s from %s)", secs(hi), loName, secs(lo), v.origin(loKey, lo != 0)))
	}
	return errf(v.blame(loKey), fmt.Sprintf("%s exceeds the default %s (%s); lower it or set %s", secs(lo), hiKey, secs(hi), hiKey))
}

// budget checks the scope's spend budget.
func (v *validator) budget() *Error {
	b, p := v.s.Budget, v.p
	usd, window := p+"BUDGET__USD", p+"BUDGET__WINDOW_S"
	switch {
	case b.Limit < 0:
		return errf(usd, fmt.Sprintf("invalid value %d micro-USD: must be greater than 0", b.Limit))
	case b.Limit == 0 && b.Window != 0:
		return errf(window, "is set without "+usd)
	case b.Limit == 0:
		return nil
	case float64(b.Limit) > maxBudgetUSD*1e6:
		return errf(usd, fmt.Sprintf("invalid value %d micro-USD: out of range; expected at most %g USD", b.Limit, float64(maxBudgetUSD)))
	case b.Window < time.Second || b.Window%time.Second != 0:
		return errf(window, fmt.Sprintf("invalid value %s: expected integer seconds >= 1 (a budget with a limit needs its window)", secs(b.Window)))
	}
	return nil
}

// sources checks every source, in order, field by field in table order.
func (v *validator) sources() *Error {
	seen := map[string]bool{}
	for i := range v.s.Sources {
		if err := v.source(i, seen); err != nil {
			return err
		}
	}
	return nil
}

// sourcePrefix returns the key prefix {SCOPE}__{PROVIDER}__{N}__ of a
// source, or an error when its Provider, Index and Name make none.
func (v *validator) sourcePrefix(i int, sc *core.SourceConfig) (string, *Error) {
	provider := strings.ToUpper(sc.Provider)
	if !providerRE.MatchString(provider) || sc.Index < 1 {
		return "", errf(v.p+"{PROVIDER}__{N}__BASE_URL", fmt.Sprintf(
			"source %d (%s): Provider %s and Index %d make no source key %s{PROVIDER}__{N}__…; expected a provider of letters, digits and single underscores and an index >= 1",
			i, show(sc.Name), show(sc.Provider), sc.Index, v.p))
	}
	pre := v.p + provider + "__" + strconv.Itoa(sc.Index) + "__"
	if want := strings.ToLower(provider) + "_" + strconv.Itoa(sc.Index); sc.Name != want {
		return "", errf(pre+"BASE_URL", fmt.Sprintf("source %d is named %s; the source of these keys is named %s", i, show(sc.Name), want))
	}
	return pre, nil
}

// source checks one source.
func (v *validator) source(i int, seen map[string]bool) *Error {
	s := v.s
	sc := &s.Sources[i]
	pre, err := v.sourcePrefix(i, sc)
	if err != nil {
		return err
	}
	if seen[pre] {
		return errf(pre+"BASE_URL", "source "+sc.Name+" is configured twice")
	}
	seen[pre] = true

	// BASE_URL, API_KEY, MODEL: never echoed but MODEL.
	if sc.BaseURL == "" {
		return missing(pre+"BASE_URL", "", baseURLForm)
	}
	if _, err := checkBaseURL(entry{key: pre + "BASE_URL", val: sc.BaseURL}); err != nil {
		return err
	}
	if sc.APIKey == "" {
		return missing(pre+"API_KEY", "", `the key, or "none" for servers without authentication`)
	}
	if strings.IndexFunc(sc.APIKey, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) >= 0 {
		return errf(pre+"API_KEY", "invalid value: contains whitespace or control characters (value not shown)")
	}
	if sc.Model == "" {
		return missing(pre+"MODEL", "", "the upstream model name")
	}

	// TIMEOUT_S, within the permit lease.
	timeoutKey := pre + "TIMEOUT_S"
	switch {
	case sc.Timeout == 0:
		return missing(v.blame(timeoutKey), " unless the flat LLM_TIMEOUT is set", formSecPos)
	case sc.Timeout < 0:
		return errf(v.blame(timeoutKey), fmt.Sprintf("invalid value %s: must be greater than 0; expected %s", secs(sc.Timeout), formSecPos))
	}
	// Made by hand, a zero LeaseTTL leases each permit for its attempt.
	if s.LeaseTTL > 0 && sc.Timeout > s.LeaseTTL {
		lease := secs(s.LeaseTTL)
		if _, ok := v.given("PGW_LEASE_TTL_S", true); !ok {
			lease += ", the default"
		}
		return errf(v.blame(timeoutKey), fmt.Sprintf("%s (source %s) exceeds the permit lease PGW_LEASE_TTL_S (%s); lower the timeout or raise PGW_LEASE_TTL_S",
			secs(sc.Timeout), sc.Name, lease))
	}

	// MAX_CONCURRENCY, RPM, TPM
	if err := nonNegInts(intKey{pre + "MAX_CONCURRENCY", sc.Limits.MaxConcurrency}, intKey{pre + "RPM", sc.Limits.RPM},
		intKey{pre + "TPM", sc.Limits.TPM}); err != nil {
		return err
	}

	// EST_TOKENS: needed by a TPM gate, and within it.
	estKey, globalTPM := pre+"EST_TOKENS", v.p+"GLOBAL__TPM"
	switch est := sc.EstTokens; {
	case est < 0:
		return negativeInt(estKey, est, formIntPos)
	case est == 0 && sc.Limits.TPM > 0:
		return missing(estKey, fmt.Sprintf(" because %sTPM is %d", pre, sc.Limits.TPM), formIntPos)
	case est == 0 && s.Global.TPM > 0:
		return missing(estKey, fmt.Sprintf(" because %s is %d", globalTPM, s.Global.TPM), formIntPos)
	case sc.Limits.TPM > 0 && est > sc.Limits.TPM:
		return errf(estKey, fmt.Sprintf("%d exceeds %sTPM (%d): such a call could never be admitted", est, pre, sc.Limits.TPM))
	case s.Global.TPM > 0 && est > s.Global.TPM:
		return errf(estKey, fmt.Sprintf("%d exceeds %s (%d): such a call could never be admitted", est, globalTPM, s.Global.TPM))
	}

	// TTFT_TIMEOUT_S, INTER_TOKEN_TIMEOUT_S: INTER < TTFT < TIMEOUT, or both 0.
	if err := v.watchdog(pre, sc); err != nil {
		return err
	}

	// CONTEXT_WINDOW, CONTINUE, MISSING_DONE, WEIGHT
	if sc.ContextWindow < 0 {
		return negativeInt(pre+"CONTEXT_WINDOW", sc.ContextWindow, formIntNonNeg)
	}
	if err := oneOf(pre+"CONTINUE", sourceP+"CONTINUE", string(sc.Continue)); err != nil {
		return err
	}
	if err := oneOf(pre+"MISSING_DONE", sourceP+"MISSING_DONE", string(sc.MissingDone)); err != nil {
		return err
	}
	if w := sc.Weight; math.IsNaN(w) || math.IsInf(w, 0) || w < 0 {
		return errf(pre+"WEIGHT", fmt.Sprintf("invalid value %s: out of range; expected a decimal > 0", strconv.FormatFloat(w, 'g', -1, 64)))
	}
	return v.sourceBreaker(pre, sc)
}

// sourceBreaker checks a source's own breaker values: each in its domain,
// and its cap of the doubling cooldown not below its effective cooldown
// (its own, else the scope's), as the scope's keys are checked. A cap of
// the scope's, inherited, follows a longer cooldown of the source's (as
// the scope's default cap does): nothing to check.
func (v *validator) sourceBreaker(pre string, sc *core.SourceConfig) *Error {
	o, bp := sc.Breaker, pre+"BREAKER__"
	if o.FailThreshold < 0 {
		return negativeInt(bp+"FAIL_THRESHOLD", o.FailThreshold, formIntPos)
	}
	if err := nonNegDurs(durKey{bp + "COOLDOWN_S", o.Cooldown}, durKey{bp + "MAX_COOLDOWN_S", o.MaxCooldown}); err != nil {
		return err
	}
	if o.MaxCooldown == 0 {
		return nil
	}
	cooldown, from := o.Cooldown, bp+"COOLDOWN_S"
	if cooldown == 0 {
		scope := v.s.Breaker.Cooldown
		cooldown, from = scope, v.origin(v.p+"BREAKER__COOLDOWN_S", scope != 0)
		if from == "the default" {
			from = "the scope's default"
		}
	}
	if o.MaxCooldown < cooldown {
		return errf(bp+"MAX_COOLDOWN_S", fmt.Sprintf("%s (source %s) must be >= the cooldown (%s from %s)",
			secs(o.MaxCooldown), sc.Name, secs(cooldown), from))
	}
	return nil
}

// watchdog checks a source's stream watchdog pair.
func (v *validator) watchdog(pre string, sc *core.SourceConfig) *Error {
	ttftKey, interKey, timeoutKey := pre+"TTFT_TIMEOUT_S", pre+"INTER_TOKEN_TIMEOUT_S", pre+"TIMEOUT_S"
	ttft, inter := sc.TTFTTimeout, sc.InterTokenTimeout
	if err := nonNegDurs(durKey{v.blame(ttftKey), ttft}, durKey{v.blame(interKey), inter}); err != nil {
		return err
	}
	switch {
	case ttft == 0 && inter == 0:
		// No watchdog (models that think silently for long).
	case ttft == 0:
		return errf(v.blame(ttftKey), fmt.Sprintf("0 (source %s) switches the watchdog off only together with INTER_TOKEN_TIMEOUT_S=0 (it is %s from %s)",
			sc.Name, secs(inter), v.origin(interKey, true)))
	case inter >= ttft:
		return errf(v.blame(interKey), fmt.Sprintf("%s (source %s) must be < TTFT_TIMEOUT_S (%s from %s)",
			secs(inter), sc.Name, secs(ttft), v.origin(ttftKey, true)))
	case ttft >= sc.Timeout:
		return errf(v.blame(ttftKey), fmt.Sprintf("%s (source %s) must be < TIMEOUT_S (%s from %s)",
			secs(ttft), sc.Name, secs(sc.Timeout), v.origin(timeoutKey, true)))
	case inter == 0:
		return errf(v.blame(interKey), fmt.Sprintf("0 (source %s) switches the watchdog off only together with TTFT_TIMEOUT_S=0 (it is %s from %s)",
			sc.Name, secs(ttft), v.origin(ttftKey, true)))
	}
	return nil
}

// across checks the relations between the scope and its sources.
func (v *validator) across() *Error {
	s, p := v.s, v.p
	var maxTimeout, maxTTFT time.Duration
	var timeoutOf, ttftOf string
	for _, sc := range s.Sources {
		if sc.Timeout > maxTimeout {
			maxTimeout, timeoutOf = sc.Timeout, sc.Name
		}
		if sc.TTFTTimeout > maxTTFT {
			maxTTFT, ttftOf = sc.TTFTTimeout, sc.Name
		}
	}
	// Made by hand, a zero ProbeTTL gives the probe a lease without expiry.
	probeKey := p + "BREAKER__PROBE_TTL_S"
	if probe := s.Breaker.ProbeTTL; probe < maxTimeout && !(v.handMade() && probe == 0) {
		return errf(v.blame(probeKey), fmt.Sprintf("%s must be >= the largest source TIMEOUT_S (%s, source %s): a probe's lease must outlive its attempt",
			secs(probe), secs(maxTimeout), timeoutOf))
	}
	// Made by hand, a zero StallWindow turns the stall rule off.
	stallKey, pollKey := p+"BACKPRESSURE__STALL_WINDOW_S", p+"BACKPRESSURE__POLL_INTERVAL_S"
	stall, poll := s.Backpressure.StallWindow, s.Backpressure.PollInterval
	if v.handMade() && stall == 0 {
		return nil
	}
	if stall < maxTTFT {
		return errf(v.blame(stallKey), fmt.Sprintf("%s must be >= the largest source TTFT_TIMEOUT_S (%s, source %s)",
			secs(stall), secs(maxTTFT), ttftOf))
	}
	pollGiven := true
	if v.handMade() && poll == 0 {
		poll, pollGiven = defaultPollInterval, false // the engine's default
	} else if _, ok := v.given(pollKey, true); !ok {
		pollGiven = false
	}
	if poll >= stall {
		if pollGiven {
			return errf(v.blame(pollKey), fmt.Sprintf("%s must be < the stall window (%s)", secs(poll), secs(stall)))
		}
		return errf(v.blame(stallKey), fmt.Sprintf("%s must be > the default %s (%s)", secs(stall), pollKey, secs(poll)))
	}
	return nil
}
