package config

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/registry"
	"github.com/polygateway/polygateway/internal/transport"
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
//     (health_aware, wait, retry, the provider profile's choice); a
//     source's Profile "" is its Provider, which must then not be one or
//     two letters from a built-in profile.
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
//   - Backpressure.QueueShare, QueueClaimTTL and QueueLease 0 are the
//     admission queue's defaults (9, 2 s, 5 minutes).
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

// validator checks one GatewaySettings, collecting every problem.
type validator struct {
	s *core.GatewaySettings
	p string // scope + "__"
	// from is nil for settings made by hand: every value is then named by
	// its own key and given when it is not zero.
	from origins
	problems
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
		return scopeError(s.Scope)
	}
	v.p = s.Scope + "__"
	if len(s.Sources) == 0 {
		return noSources(s.Scope)
	}
	// The backends and their companions, then every other value.
	for _, d := range known.assemblyFields {
		if d.Kind == KindBackend {
			v.value(d.Pattern, d, nil)
		} else if d.need != nil {
			d.need(v, d.Pattern, d)
		}
	}
	for _, d := range slices.Concat(known.scopeFields, known.assemblyFields) {
		if d.at.scope != nil && d.Kind != KindBackend {
			v.value(d.key(v.p), d, nil)
		}
	}
	for _, r := range scopeRelations {
		r(v)
	}
	seen := map[string]bool{}
	for i := range s.Sources {
		v.source(i, seen)
	}
	v.across()
	return Join(v.problems...)
}

// noSources is the error of a scope without sources.
func noSources(scope string) *Error {
	p := scope + "__"
	return errf(p+"{PROVIDER}__1__BASE_URL", fmt.Sprintf(
		"no sources in scope %s: set %s{PROVIDER}__1__BASE_URL, __API_KEY, __MODEL and __TIMEOUT_S (e.g. %sQWEN__1__BASE_URL)",
		scope, p, p))
}

func missing(key, why, form string) *Error {
	return errf(key, fmt.Sprintf("missing: required%s; expected %s", why, form))
}

// unlessFlat is the error of a key required unless its flat shortcut is set.
func unlessFlat(key string, d KeyDoc) *Error {
	return missing(key, " unless the flat "+d.flat+" is set", d.want())
}

// value checks the field of key, row d (of source sc, for a source's key):
// settings made by hand may hold any value (Load's are in it by
// construction).
func (v *validator) value(key string, d KeyDoc, sc *core.SourceConfig) {
	x := reflect.ValueOf(d.at.ptr(v.s, sc)).Elem()
	switch check := kinds[d.Kind].check; {
	case sc != nil && d.Required == "yes" && x.IsZero():
		v.fail(missing(key, "", d.want()))
	case d.check != nil:
		d.check(v, key, d, sc)
	case check != nil:
		v.fail(check(v, key, d, x))
	}
}

// The checks of the kinds. Zero is always accepted (the default, or off;
// see Validate).

// checkNonNeg refuses a negative number of seconds or integer.
func checkNonNeg(v *validator, key string, d KeyDoc, x reflect.Value) *Error {
	if x.Int() >= 0 {
		return nil
	}
	shown := strconv.FormatInt(x.Int(), 10)
	if x.Type() == reflect.TypeFor[time.Duration]() {
		shown = secs(time.Duration(x.Int()))
	}
	return errf(v.blame(key), fmt.Sprintf("invalid value %s: must not be negative; expected %s", shown, d.Form))
}

func checkFloat(hi float64) func(*validator, string, KeyDoc, reflect.Value) *Error {
	return func(_ *validator, key string, d KeyDoc, x reflect.Value) *Error {
		if f := x.Float(); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 || f > hi {
			return errf(key, fmt.Sprintf("invalid value %s: out of range; expected %s", strconv.FormatFloat(f, 'g', -1, 64), d.Form))
		}
		return nil
	}
}

func checkEnum(_ *validator, key string, d KeyDoc, x reflect.Value) *Error {
	if val := x.String(); val != "" && !slices.Contains(d.Values, val) {
		return errf(key, fmt.Sprintf("invalid value %s; expected one of %s", show(val), strings.Join(d.Values, ", ")))
	}
	return nil
}

func checkName(_ *validator, key string, d KeyDoc, x reflect.Value) *Error {
	if val := x.String(); val != "" && !validName(val) {
		return notAName(key, d, val)
	}
	return nil
}

func checkURL(_ *validator, key string, _ KeyDoc, x reflect.Value) *Error {
	if x.String() == "" {
		return nil
	}
	_, err := checkBaseURL(entry{key: key, val: x.String()})
	return err
}

// checkBackend checks a backend name: a built-in one or a registered one.
func checkBackend(_ *validator, key string, d KeyDoc, x reflect.Value) *Error {
	if val := x.String(); val != "" && !slices.Contains(d.Values, val) && !registry.Known(d.registry, val) {
		return registered(invalidErr(entry{key: key, val: val}, "one of "+strings.Join(d.Values, ", ")), d)
	}
	return nil
}

// neededBy is the need of a companion of the backend key backend: with
// one of values (any but none, without values) it is required.
func neededBy(backend string, values ...string) func(*validator, string, KeyDoc) {
	return func(v *validator, key string, d KeyDoc) {
		b := reflect.ValueOf(doc(backend).at.scope(v.s)).Elem().String()
		on := b != "" && b != "none" && (values == nil || slices.Contains(values, b))
		if on && reflect.ValueOf(d.at.scope(v.s)).Elem().IsZero() {
			v.fail(missing(key, " because "+backend+"="+b, d.want()))
		}
	}
}

// redis checks REDIS_URL only when a redis backend uses it: the name is
// generic enough that other software in the same environment may set it.
func (v *validator) redis(key string, d KeyDoc) {
	var users []string
	for _, b := range known.assemblyFields {
		if b.Kind == KindBackend && reflect.ValueOf(b.at.scope(v.s)).Elem().String() == "redis" {
			users = append(users, b.Pattern+"=redis")
		}
	}
	switch {
	case len(users) == 0:
	case v.s.RedisURL == "":
		v.fail(missing(key, " because "+strings.Join(users, " and "), d.want()))
	default:
		v.fail(checkRedisURL(entry{key: key, val: v.s.RedisURL}))
	}
}

// The relations between keys, in the order Validate reports them: inside
// the scope's groups, then those of each source (after its values); the
// relations between the scope and its sources come last (across).
var (
	scopeRelations  = []func(v *validator){(*validator).budget, (*validator).backoff, (*validator).cooldown}
	sourceRelations = []func(v *validator, pre string, sc *core.SourceConfig){
		(*validator).profile, (*validator).estimate, (*validator).watchdog, (*validator).sourceBreaker}
)

// backoff and cooldown check the caps of the doubling waits. Made by hand, a
// zero BackoffMax puts no cap on the backoff, and a zero MaxCooldown keeps
// every open period at Cooldown.
func (v *validator) backoff() {
	if r := v.s.Retry; r.BackoffBase >= 0 && (!v.handMade() || r.BackoffMax != 0) {
		v.notBelow(v.p+"RETRY__BACKOFF_BASE_S", r.BackoffBase, "the backoff base", v.p+"RETRY__BACKOFF_MAX_S", r.BackoffMax)
	}
}

func (v *validator) cooldown() {
	if b := v.s.Breaker; b.Cooldown >= 0 && (!v.handMade() || b.MaxCooldown != 0) {
		v.notBelow(v.p+"BREAKER__COOLDOWN_S", b.Cooldown, "the cooldown", v.p+"BREAKER__MAX_COOLDOWN_S", b.MaxCooldown)
	}
}

// notBelow checks hi >= lo, two values of which either may be a default.
// The error names hi's key when hi was given, else lo's.
func (v *validator) notBelow(loKey string, lo time.Duration, loName, hiKey string, hi time.Duration) {
	switch k, ok := v.given(hiKey, hi != 0); {
	case hi >= lo:
	case ok:
		v.fail(errf(k, fmt.Sprintf("%s must be >= %s (%s from %s)", secs(hi), loName, secs(lo), v.origin(loKey, lo != 0))))
	default:
		v.fail(errf(v.blame(loKey), fmt.Sprintf("%s exceeds the default %s (%s); lower it or set %s", secs(lo), hiKey, secs(hi), hiKey)))
	}
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
func (v *validator) source(i int, seen map[string]bool) {
	sc := &v.s.Sources[i]
	pre, err := v.sourcePrefix(i, sc)
	if err != nil {
		v.fail(err)
		return
	}
	if seen[pre] {
		v.fail(errf(pre+"BASE_URL", "source "+sc.Name+" is configured twice"))
		return
	}
	seen[pre] = true

	for _, d := range known.sourceFields {
		v.value(d.key(pre), d, sc)
	}
	for _, r := range sourceRelations {
		r(v, pre, sc)
	}
}

// profileNames are the built-in provider profiles, sorted.
var profileNames = slices.Sorted(maps.Keys(transport.DefaultProfiles()))

// profile refuses a provider one or two letters from a built-in profile
// when the source does not name its profile: such a typo would otherwise
// speak plain openai.
func (v *validator) profile(pre string, sc *core.SourceConfig) {
	name := strings.ToLower(sc.Provider)
	if sc.Profile != "" || slices.Contains(profileNames, name) {
		return
	}
	if best := Suggest(name, profileNames); best != "" {
		v.fail(errf(pre+"PROFILE", fmt.Sprintf(
			"missing: provider %s is no known provider, and %s is (did you mean %s%s__%d__…?); to keep the name, set this key to the profile the source speaks (one of %s)",
			strings.ToUpper(sc.Provider), best, v.p, strings.ToUpper(best), sc.Index, strings.Join(profileNames, ", "))))
	}
}

// estimate checks EST_TOKENS: needed by a TPM gate, and within it.
func (v *validator) estimate(pre string, sc *core.SourceConfig) {
	estKey, globalTPM, tpm := pre+"EST_TOKENS", v.p+"GLOBAL__TPM", v.s.Global.TPM
	switch est := sc.EstTokens; {
	case est < 0:
	case est == 0 && sc.Limits.TPM > 0:
		v.fail(missing(estKey, fmt.Sprintf(" because %sTPM is %d", pre, sc.Limits.TPM), formIntPos))
	case est == 0 && tpm > 0:
		v.fail(missing(estKey, fmt.Sprintf(" because %s is %d", globalTPM, tpm), formIntPos))
	case sc.Limits.TPM > 0 && est > sc.Limits.TPM:
		v.fail(errf(estKey, fmt.Sprintf("%d exceeds %sTPM (%d): such a call could never be admitted", est, pre, sc.Limits.TPM)))
	case tpm > 0 && est > tpm:
		v.fail(errf(estKey, fmt.Sprintf("%d exceeds %s (%d): such a call could never be admitted", est, globalTPM, tpm)))
	}
}

// sourceBreaker checks a source's cap of the doubling cooldown against its
// effective cooldown (its own, else the scope's), as the scope's keys are
// checked. A cap of the scope's, inherited, follows a longer cooldown of
// the source's (as the scope's default cap does): nothing to check.
func (v *validator) sourceBreaker(pre string, sc *core.SourceConfig) {
	o, bp := sc.Breaker, pre+"BREAKER__"
	if o.MaxCooldown <= 0 || o.Cooldown < 0 {
		return
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
		v.fail(errf(bp+"MAX_COOLDOWN_S", fmt.Sprintf("%s (source %s) must be >= the cooldown (%s from %s)",
			secs(o.MaxCooldown), sc.Name, secs(cooldown), from)))
	}
}

// across checks the relations between the scope and its sources.
func (v *validator) across() {
	s, p := v.s, v.p
	maxTimeout, timeoutSource := largest(s, timeoutOf)
	maxTTFT, ttftSource := largest(s, ttftOf)
	// Made by hand, a zero ProbeTTL gives the probe a lease without expiry.
	probeKey := p + "BREAKER__PROBE_TTL_S"
	if probe := s.Breaker.ProbeTTL; probe >= 0 && probe < maxTimeout && (!v.handMade() || probe != 0) {
		v.fail(errf(v.blame(probeKey), fmt.Sprintf("%s must be >= the largest source TIMEOUT_S (%s, source %s): a probe's lease must outlive its attempt",
			secs(probe), secs(maxTimeout), timeoutSource)))
	}
	// Made by hand, a zero StallWindow turns the stall rule off.
	stallKey, pollKey := p+"BACKPRESSURE__STALL_WINDOW_S", p+"BACKPRESSURE__POLL_INTERVAL_S"
	stall, poll := s.Backpressure.StallWindow, s.Backpressure.PollInterval
	if stall < 0 || poll < 0 || v.handMade() && stall == 0 {
		return
	}
	if stall < maxTTFT {
		v.fail(errf(v.blame(stallKey), fmt.Sprintf("%s must be >= the largest source TTFT_TIMEOUT_S (%s, source %s)",
			secs(stall), secs(maxTTFT), ttftSource)))
	}
	_, pollGiven := v.given(pollKey, true)
	if v.handMade() && poll == 0 {
		poll, pollGiven = defaultPollInterval, false // the engine's default
	}
	switch {
	case poll < stall:
	case pollGiven:
		v.fail(errf(v.blame(pollKey), fmt.Sprintf("%s must be < the stall window (%s)", secs(poll), secs(stall))))
	default:
		v.fail(errf(v.blame(stallKey), fmt.Sprintf("%s must be > the default %s (%s)", secs(stall), pollKey, secs(poll))))
	}
}
