package config

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/internal/core"
	"github.com/polygateway/polygateway/internal/registry"
)

// Defaults of optional keys (see Keys for the documentation).
const (
	defaultMaxAttempts          = 3
	defaultBackoffBase          = 1 * time.Second
	defaultBackoffMax           = 30 * time.Second
	defaultFailThreshold        = 5
	defaultCooldown             = 5 * time.Second
	defaultMaxCooldown          = 8 * time.Second
	defaultTierPatience         = 3 * time.Second
	defaultMaxTTFT              = 30 * time.Second
	defaultMinCalls             = 20
	defaultFailRate             = 0.5
	defaultWindow               = 60 * time.Second
	defaultHalfOpenSuccesses    = 1
	defaultTimeoutWeight        = 1.0
	defaultStallWindowFloor     = 60 * time.Second
	defaultPollInterval         = 250 * time.Millisecond
	defaultStructuredMaxRetries = 2
	defaultLeaseTTL             = 1500 * time.Second
	defaultWeight               = 1.0
)

// scopeRE is the accepted scope name (after upper-casing): a letter, then
// letters, digits and single underscores, not ending with an underscore.
var scopeRE = regexp.MustCompile(`^[A-Z](?:[A-Z0-9]|_[A-Z0-9])*$`)

// providerRE is the accepted PROVIDER part of a source key.
var providerRE = regexp.MustCompile(`^[A-Z0-9](?:[A-Z0-9]|_[A-Z0-9])*$`)

// nRE is the accepted N part of a source key: a canonical positive integer.
var nRE = regexp.MustCompile(`^[1-9][0-9]*$`)

// Load parses and validates the configuration of one scope from env, a flat
// key/value map (see ReadEnv). It does no I/O.
//
// scope is upper-cased and must then match [A-Z][A-Z0-9_]* without "__" and
// without a trailing "_". Keys of other scopes are ignored; flat (LLM_*) and
// assembly (PGW_*, REDIS_URL) keys are shared by every scope. Unknown keys
// of the scope and unknown PGW_* and flat LLM_* keys are errors (see the
// package documentation for the escapes).
//
// On failure it returns a *Error for the first problem found; see the package
// documentation for the order.
func Load(scope string, env map[string]string) (core.GatewaySettings, error) {
	l := &loader{env: env, used: map[string]bool{}, origins: origins{}}
	if err := l.load(scope); err != nil {
		return core.GatewaySettings{}, err
	}
	return l.s, nil
}

// optDur is an optional duration together with the key it came from
// (key == "" means absent: the default applies).
type optDur struct {
	d   time.Duration
	key string
}

func (o optDur) set() bool { return o.key != "" }

// or returns o when set, else fallback.
func (o optDur) or(fallback optDur) optDur {
	if o.set() {
		return o
	}
	return fallback
}

// optInt is an optional integer together with the key it came from.
type optInt struct {
	n   int
	key string
}

type sourceID struct {
	provider string // as written (upper case)
	n        int
}

type loader struct {
	env    map[string]string
	scope  string
	prefix string // scope + "__"
	used   map[string]bool
	s      core.GatewaySettings
	allow  allowList

	// Key classification.
	recognised []string // scope keys the table knows, sorted
	sources    []sourceID

	// Flat shortcut values.
	flatMaxRetries optInt
	flatBaseDelay  optDur
	flatMaxDelay   optDur
	flatThreshold  optInt
	flatCooldown   optDur
	flatTimeout    optDur
	flatTTFT       optDur
	flatInter      optDur

	// Scope values whose defaults need the sources.
	probeTTL     optDur
	stallWindow  optDur
	pollInterval optDur

	// origins records where the values that take part in a relation came
	// from (see Validate).
	origins origins
}

// from records that the value of key came from o's key ("" = the default).
func (l *loader) from(key, o string) { l.origins[key] = o }

// get returns the trimmed entry of key, or the zero entry when absent.
func (l *loader) get(key string) entry {
	v, ok := l.env[key]
	if !ok {
		return entry{}
	}
	l.used[key] = true
	return entry{key: key, val: strings.TrimSpace(v)}
}

func (l *loader) load(scope string) *Error {
	up := strings.ToUpper(scope)
	if !scopeRE.MatchString(up) {
		return errf("scope", fmt.Sprintf("invalid scope name %s; expected [A-Z][A-Z0-9_]* without \"__\" and not ending in \"_\" (e.g. LLM, EMBED, OCR_FAST)", show(scope)))
	}
	l.scope, l.prefix = up, up+"__"
	l.s = core.GatewaySettings{Scope: up, Extra: map[string]string{}}

	steps := []func() *Error{
		l.allowed,
		l.classify,
		l.names,
		l.requireSources,
		l.assembly,
		l.flat,
		l.scopeValues,
		l.parseSources,
		l.derived,
		l.validated,
		l.allHandled,
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return err
		}
	}
	return nil
}

// classify checks the shape of every {SCOPE}__ key, in sorted key order,
// collects Extra and the set of sources.
func (l *loader) classify() *Error {
	keys := make([]string, 0, len(l.env))
	for k := range l.env {
		if strings.HasPrefix(k, l.prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	seen := map[sourceID]bool{}
	for _, k := range keys {
		if err := l.classifyKey(k, seen); err != nil {
			if l.allow.allows(k) {
				continue // another program's key: ignored
			}
			return err
		}
	}
	slices.SortFunc(l.sources, func(a, b sourceID) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.provider), strings.ToLower(b.provider)), cmp.Compare(a.n, b.n))
	})
	return nil
}

// classifyKey checks the shape of one {SCOPE}__ key and records it.
func (l *loader) classifyKey(k string, seen map[sourceID]bool) *Error {
	parts := strings.Split(k[len(l.prefix):], "__")
	if slices.Contains(parts, "") {
		return errf(k, "malformed key: empty part (check the double underscores); "+l.shapes())
	}
	switch len(parts) {
	case 1:
		name := parts[0]
		if fields, isGroup := known.groups[name]; isGroup {
			return errf(k, fmt.Sprintf("incomplete key: expected %s%s__{FIELD} with FIELD one of %s", l.prefix, name, strings.Join(fields, ", ")))
		}
		if slices.Contains(known.singles, name) {
			l.recognised = append(l.recognised, k)
			return nil
		}
		if slices.Contains(known.extension, name) || strings.HasPrefix(name, "X_") {
			// For a sibling client (embed), or the user's own code.
			l.s.Extra[name] = l.get(k).val
			return nil
		}
		if where := l.fieldHomes(name); where != nil {
			// A known FIELD without its group or source: a typo, not Extra.
			return errf(k, "incomplete key: "+name+" is a field of "+strings.Join(where, " or ")+", not a scope key")
		}
		return errf(k, l.unknownSingle(name))
	case 2:
		group, field := parts[0], parts[1]
		fields, isGroup := known.groups[group]
		if !isGroup {
			hint := ""
			if best := Suggest(group, known.groupOrder); best != "" {
				hint = " (did you mean " + l.prefix + best + "__" + field + "?)"
			}
			return errf(k, fmt.Sprintf("malformed key: %s is not one of the groups %s%s (a source key needs {PROVIDER}__{N}__{FIELD}); %s",
				show(group), strings.Join(known.groupOrder, ", "), hint, l.shapes()))
		}
		if !slices.Contains(fields, field) {
			return errf(k, unknownField(field, fields, "under "+l.prefix+group))
		}
		l.recognised = append(l.recognised, k)
	case 3:
		provider, n, field := parts[0], parts[1], parts[2]
		if err := checkSourceID(k, l.prefix, provider, n, field); err != nil {
			return err
		}
		src := l.prefix + provider + "__" + n + "__"
		if !slices.Contains(known.source, field) {
			if fields, isGroup := known.sourceGroups[field]; isGroup {
				return errf(k, fmt.Sprintf("incomplete key: expected %s%s__{FIELD} with FIELD one of %s", src, field, strings.Join(fields, ", ")))
			}
			for _, g := range known.sourceGroupOrder {
				if slices.Contains(known.sourceGroups[g], field) {
					return errf(k, "incomplete key: "+field+" is a field of "+src+g+"__"+field+", not of a source itself")
				}
			}
			return errf(k, unknownField(field, known.source, "of a source"))
		}
		return l.recognise(k, provider, n, seen)
	case 4:
		// A source's group: {PROVIDER}__{N}__{GROUP}__{FIELD}.
		provider, n, group, field := parts[0], parts[1], parts[2], parts[3]
		if err := checkSourceID(k, l.prefix, provider, n, group+"__"+field); err != nil {
			return err
		}
		src := l.prefix + provider + "__" + n + "__"
		fields, isGroup := known.sourceGroups[group]
		if !isGroup {
			hint := ""
			if best := Suggest(group, known.sourceGroupOrder); best != "" {
				hint = " (did you mean " + src + best + "__" + field + "?)"
			}
			return errf(k, fmt.Sprintf("malformed key: too many parts for a source field, and %s is not one of the source groups %s%s; %s",
				show(group), strings.Join(known.sourceGroupOrder, ", "), hint, l.shapes()))
		}
		if !slices.Contains(fields, field) {
			msg := unknownField(field, fields, "under "+src+group)
			if slices.Contains(known.groups[group], field) {
				msg += " (" + field + " is set for the whole scope only: " + l.prefix + group + "__" + field + ")"
			}
			return errf(k, msg)
		}
		return l.recognise(k, provider, n, seen)
	default:
		return errf(k, "malformed key: too many parts; "+l.shapes())
	}
	return nil
}

// checkSourceID checks the PROVIDER and N parts of the source key k; tail
// is the rest of the key, for the example in the error.
func checkSourceID(k, prefix, provider, n, tail string) *Error {
	if !providerRE.MatchString(provider) {
		return errf(k, fmt.Sprintf("invalid provider %s: expected upper-case letters, digits and single underscores ([A-Z0-9_], no \"__\", not starting or ending with \"_\")", show(provider)))
	}
	if !nRE.MatchString(n) {
		return errf(k, fmt.Sprintf("invalid source number %s: expected an integer >= 1 without leading zeros (%s%s__1__%s)", show(n), prefix, provider, tail))
	}
	if _, err := strconv.Atoi(n); err != nil {
		return errf(k, fmt.Sprintf("invalid source number %s: out of range", show(n)))
	}
	return nil
}

// recognise records the source key k of source (provider, n).
func (l *loader) recognise(k, provider, n string, seen map[sourceID]bool) *Error {
	num, _ := strconv.Atoi(n) // checked by checkSourceID
	if id := (sourceID{provider, num}); !seen[id] {
		seen[id] = true
		l.sources = append(l.sources, id)
	}
	l.recognised = append(l.recognised, k)
	return nil
}

// allowed parses PGW_ALLOW_KEYS.
func (l *loader) allowed() *Error {
	var err *Error
	l.allow, err = parseAllowList(l.env)
	if _, ok := l.env[allowKey]; ok {
		l.used[allowKey] = true
	}
	return err
}

// names checks the names of the PGW_* and flat LLM_* keys.
func (l *loader) names() *Error { return checkNames(l.env, l.allow) }

// fieldHomes lists the key patterns in which name is a known FIELD, or nil.
func (l *loader) fieldHomes(name string) []string {
	var homes []string
	for _, g := range known.groupOrder {
		if slices.Contains(known.groups[g], name) {
			homes = append(homes, l.prefix+g+"__"+name)
		}
	}
	if slices.Contains(known.source, name) {
		homes = append(homes, l.prefix+"{PROVIDER}__{N}__"+name)
	}
	for _, g := range known.sourceGroupOrder {
		if slices.Contains(known.sourceGroups[g], name) {
			homes = append(homes, l.prefix+"{PROVIDER}__{N}__"+g+"__"+name)
		}
	}
	return homes
}

func (l *loader) shapes() string {
	p := l.prefix
	var srcGroups []string
	for _, g := range known.sourceGroupOrder {
		srcGroups = append(srcGroups, p+"{PROVIDER}__{N}__"+g+"__{FIELD}")
	}
	return fmt.Sprintf("expected %s{PROVIDER}__{N}__{FIELD}, %s, %s{GROUP}__{FIELD} (GROUP one of %s) or %s{NAME}",
		p, strings.Join(srcGroups, ", "), p, strings.Join(known.groupOrder, ", "), p)
}

// unknownField words an unknown-FIELD error, suggesting the closest known one.
func unknownField(field string, fields []string, where string) string {
	msg := fmt.Sprintf("unknown field %s %s", show(field), where)
	if best := Suggest(field, fields); best != "" {
		msg += fmt.Sprintf(" (did you mean %s?)", best)
	}
	return msg + "; known fields: " + strings.Join(fields, ", ")
}

// unknownSingle words the error of an unknown single-part scope key.
func (l *loader) unknownSingle(name string) string {
	cands := slices.Concat(known.singles, known.extension, known.groupOrder)
	msg := fmt.Sprintf("unknown scope key %s", show(name))
	if best := Suggest(name, cands); best != "" {
		if _, isGroup := known.groups[best]; isGroup {
			best += "__{FIELD}"
		}
		msg += " (did you mean " + l.prefix + best + "?)"
	}
	return msg + fmt.Sprintf("; known: %s, the embedding keys %s and the groups %s; name a key for your own code %sX_…",
		strings.Join(known.singles, ", "), strings.Join(known.extension, ", "), strings.Join(known.groupOrder, ", "), l.prefix)
}

func (l *loader) requireSources() *Error {
	if len(l.sources) > 0 {
		return nil
	}
	return noSources(l.scope)
}

// required returns the entry of a required key, or a "missing" error.
func (l *loader) required(key, form, why string) (entry, *Error) {
	e := l.get(key)
	if !e.present() || e.val == "" {
		what := "missing"
		if e.present() {
			what = "empty value"
		}
		return entry{}, errf(key, fmt.Sprintf("%s: required%s; expected %s", what, why, form))
	}
	return e, nil
}

// optSeconds parses key when present.
func (l *loader) optSeconds(key string, positive bool) (optDur, *Error) {
	e := l.get(key)
	if !e.present() {
		return optDur{}, nil
	}
	d, err := parseSeconds(e, positive)
	if err != nil {
		return optDur{}, err
	}
	return optDur{d: d, key: key}, nil
}

// optInt parses key when present.
func (l *loader) optInt(key string, min int) (optInt, *Error) {
	e := l.get(key)
	if !e.present() {
		return optInt{}, nil
	}
	n, err := parseInt(e, min)
	if err != nil {
		return optInt{}, err
	}
	return optInt{n: n, key: key}, nil
}

// intOr parses key when present, else returns def.
func (l *loader) intOr(key string, min, def int) (int, *Error) {
	o, err := l.optInt(key, min)
	if err != nil || o.key == "" {
		return def, err
	}
	return o.n, nil
}

// enumOr parses the enumerated key when present, else returns def.
func enumOr[T ~string](l *loader, key, pattern string, def T) (T, *Error) {
	e := l.get(key)
	if !e.present() {
		return def, nil
	}
	v, err := parseEnum(e, pattern)
	return T(v), err
}

func (l *loader) assembly() *Error {
	s := &l.s
	var err *Error
	if s.LimiterBackend, err = l.requiredEnum("PGW_LIMITER_BACKEND"); err != nil {
		return err
	}
	if s.BreakerBackend, err = l.requiredEnum("PGW_BREAKER_BACKEND"); err != nil {
		return err
	}
	if err := l.cache(); err != nil {
		return err
	}
	if err := l.telemetry(); err != nil {
		return err
	}
	s.PricingPath = l.get("PGW_PRICING_PATH").val
	if s.StructuredMaxRetries, err = l.intOr("PGW_STRUCTURED_MAX_RETRIES", 0, defaultStructuredMaxRetries); err != nil {
		return err
	}
	lease, err := l.optSeconds("PGW_LEASE_TTL_S", true)
	if err != nil {
		return err
	}
	s.LeaseTTL = orDefault(lease, defaultLeaseTTL)
	l.from("PGW_LEASE_TTL_S", lease.key)
	s.RedisURL = l.get("REDIS_URL").val
	return nil
}

// cache parses PGW_CACHE_BACKEND and its companions.
func (l *loader) cache() *Error {
	s := &l.s
	var err *Error
	if s.CacheBackend, err = l.requiredEnum("PGW_CACHE_BACKEND"); err != nil {
		return err
	}
	// Stored when present, and the TTL checked even with the cache off (it
	// is ours); Validate requires both with the cache on.
	s.CacheNamespace = l.get("PGW_CACHE_NAMESPACE").val
	ttl, err := l.optSeconds("PGW_CACHE_TTL_S", true)
	s.CacheTTL = ttl.d
	return err
}

// telemetry parses PGW_TELEMETRY_BACKEND and its companions.
func (l *loader) telemetry() *Error {
	s := &l.s
	var err *Error
	if s.TelemetryBackend, err = l.requiredEnum("PGW_TELEMETRY_BACKEND"); err != nil {
		return err
	}
	// Validate requires the path or the DSN of the backend chosen.
	s.TelemetrySQLitePath = l.get("PGW_TELEMETRY_SQLITE_PATH").val
	s.TelemetryPGDSN = l.get("PGW_TELEMETRY_PG_DSN").val
	s.TelemetryContent, err = enumOr[core.TelemetryContent](l, "PGW_TELEMETRY_CONTENT", "PGW_TELEMETRY_CONTENT", "") // "" is full
	return err
}

func (l *loader) requiredEnum(key string) (string, *Error) {
	e, err := l.required(key, "one of "+strings.Join(doc(key).Values, ", "), "")
	if err != nil {
		return "", err
	}
	v, perr := parseEnum(e, key)
	if perr == nil {
		return v, nil
	}
	// A backend registered by another package (polygateway.Register…) is
	// as good as a built-in one.
	if kind, ok := backendKinds[key]; ok && registry.Known(kind, e.val) {
		return e.val, nil
	}
	if kind, ok := backendKinds[key]; ok {
		if names := registry.Names(kind); names != "" {
			perr.Problem += " (registered: " + names + ")"
		}
	}
	return "", perr
}

// backendKinds maps the backend keys to the registry's kinds.
var backendKinds = map[string]registry.Kind{
	"PGW_LIMITER_BACKEND":   registry.KindLimiter,
	"PGW_BREAKER_BACKEND":   registry.KindBreaker,
	"PGW_CACHE_BACKEND":     registry.KindCache,
	"PGW_TELEMETRY_BACKEND": registry.KindTelemetry,
}

func (l *loader) flat() *Error {
	var err *Error
	if l.flatMaxRetries, err = l.optInt("LLM_MAX_RETRIES", 1); err != nil {
		return err
	}
	if l.flatBaseDelay, err = l.optSeconds("LLM_RETRY_BASE_DELAY", false); err != nil {
		return err
	}
	if l.flatMaxDelay, err = l.optSeconds("LLM_RETRY_MAX_DELAY", false); err != nil {
		return err
	}
	if l.flatThreshold, err = l.optInt("LLM_CIRCUIT_BREAKER_THRESHOLD", 1); err != nil {
		return err
	}
	if l.flatCooldown, err = l.optSeconds("LLM_CIRCUIT_BREAKER_COOLDOWN", true); err != nil {
		return err
	}
	if l.flatTimeout, err = l.optSeconds("LLM_TIMEOUT", true); err != nil {
		return err
	}
	if l.flatTTFT, err = l.optSeconds("LLM_TTFT_TIMEOUT", true); err != nil {
		return err
	}
	if l.flatInter, err = l.optSeconds("LLM_INTER_TOKEN_TIMEOUT", true); err != nil {
		return err
	}
	return nil
}

// orDefault returns o's duration or def.
func orDefault(o optDur, def time.Duration) time.Duration {
	if o.set() {
		return o.d
	}
	return def
}

func (l *loader) scopeValues() *Error {
	s, p := &l.s, l.prefix
	var err *Error

	// GLOBAL
	if s.Global.MaxConcurrency, err = l.intOr(p+"GLOBAL__MAX_CONCURRENCY", 0, 0); err != nil {
		return err
	}
	if s.Global.RPM, err = l.intOr(p+"GLOBAL__RPM", 0, 0); err != nil {
		return err
	}
	if s.Global.TPM, err = l.intOr(p+"GLOBAL__TPM", 0, 0); err != nil {
		return err
	}
	if e := l.get(p + "GLOBAL__POOL"); e.key != "" {
		if !validName(e.val) {
			return errf(e.key, fmt.Sprintf("%q is not a pool name: use letters, digits, _ and -", e.val))
		}
		s.GlobalPool = e.val
	}

	// BUDGET
	if err := l.budget(p); err != nil {
		return err
	}

	// Singles.
	if s.Selector, err = enumOr(l, p+"SELECTOR", scopeP+"SELECTOR", core.SelectorHealthAware); err != nil {
		return err
	}
	s.PreferredRegion = l.get(p + "PREFERRED_REGION").val
	if s.QuotaFull, err = enumOr(l, p+"QUOTA_FULL", scopeP+"QUOTA_FULL", core.QuotaFullWait); err != nil {
		return err
	}

	// RETRY
	attempts, err := l.optInt(p+"RETRY__MAX_ATTEMPTS", 1)
	if err != nil {
		return err
	}
	s.Retry.MaxAttempts = defaultMaxAttempts
	if attempts.key != "" {
		s.Retry.MaxAttempts = attempts.n
	} else if l.flatMaxRetries.key != "" {
		s.Retry.MaxAttempts = l.flatMaxRetries.n
	}
	base, err := l.optSeconds(p+"RETRY__BACKOFF_BASE_S", false)
	if err != nil {
		return err
	}
	maxB, err := l.optSeconds(p+"RETRY__BACKOFF_MAX_S", false)
	if err != nil {
		return err
	}
	base, maxB = base.or(l.flatBaseDelay), maxB.or(l.flatMaxDelay)
	l.from(p+"RETRY__BACKOFF_BASE_S", base.key)
	l.from(p+"RETRY__BACKOFF_MAX_S", maxB.key)
	s.Retry.BackoffBase = orDefault(base, defaultBackoffBase)
	s.Retry.BackoffMax = orDefault(maxB, defaultBackoffMax)
	patience, err := l.optSeconds(p+"RETRY__TIER_PATIENCE_S", false)
	if err != nil {
		return err
	}
	s.Retry.TierPatience = orDefault(patience, defaultTierPatience)

	// BREAKER
	b := &s.Breaker
	threshold, err := l.optInt(p+"BREAKER__FAIL_THRESHOLD", 1)
	if err != nil {
		return err
	}
	b.FailThreshold = defaultFailThreshold
	if threshold.key != "" {
		b.FailThreshold = threshold.n
	} else if l.flatThreshold.key != "" {
		b.FailThreshold = l.flatThreshold.n
	}
	cooldown, err := l.optSeconds(p+"BREAKER__COOLDOWN_S", true)
	if err != nil {
		return err
	}
	cooldown = cooldown.or(l.flatCooldown)
	b.Cooldown = orDefault(cooldown, defaultCooldown)
	l.from(p+"BREAKER__COOLDOWN_S", cooldown.key)
	if l.probeTTL, err = l.optSeconds(p+"BREAKER__PROBE_TTL_S", true); err != nil {
		return err
	}
	if b.MinCalls, err = l.intOr(p+"BREAKER__MIN_CALLS", 1, defaultMinCalls); err != nil {
		return err
	}
	b.FailRate = defaultFailRate
	if e := l.get(p + "BREAKER__FAIL_RATE"); e.present() {
		if b.FailRate, err = parseRange(e, 0, true, 1, false); err != nil {
			return err
		}
	}
	window, err := l.optSeconds(p+"BREAKER__WINDOW_S", true)
	if err != nil {
		return err
	}
	b.Window = orDefault(window, defaultWindow)
	maxCool, err := l.optSeconds(p+"BREAKER__MAX_COOLDOWN_S", true)
	if err != nil {
		return err
	}
	l.from(p+"BREAKER__MAX_COOLDOWN_S", maxCool.key)
	// Unset, the cap is 8 s, or the cooldown when that is longer: a cap that
	// keeps a recovered source's traffic coming back within seconds.
	b.MaxCooldown = orDefault(maxCool, max(defaultMaxCooldown, b.Cooldown))
	if b.HalfOpenSuccesses, err = l.intOr(p+"BREAKER__HALF_OPEN_SUCCESSES", 1, defaultHalfOpenSuccesses); err != nil {
		return err
	}
	b.TimeoutWeight = defaultTimeoutWeight
	if e := l.get(p + "BREAKER__TIMEOUT_WEIGHT"); e.present() {
		if b.TimeoutWeight, err = parseRange(e, 0, false, 1, false); err != nil {
			return err
		}
	}

	// BACKPRESSURE (relations to the sources are checked in crossChecks).
	if l.stallWindow, err = l.optSeconds(p+"BACKPRESSURE__STALL_WINDOW_S", true); err != nil {
		return err
	}
	if l.pollInterval, err = l.optSeconds(p+"BACKPRESSURE__POLL_INTERVAL_S", true); err != nil {
		return err
	}

	// FALLBACK and QUALITY
	stale, err := l.optSeconds(p+"FALLBACK__STALE_S", false)
	if err != nil {
		return err
	}
	s.Fallback.Stale = orDefault(stale, 0)
	if e := l.get(p + "QUALITY__GUARD"); e.present() {
		if s.Quality.Guard, err = parseBool(e); err != nil {
			return err
		}
	}
	if s.Quality.MinChars, err = l.intOr(p+"QUALITY__MIN_CHARS", 0, 1); err != nil {
		return err
	}
	return nil
}

func (l *loader) parseSources() *Error {
	l.s.Sources = make([]core.SourceConfig, 0, len(l.sources))
	for _, id := range l.sources {
		sc, err := l.source(id)
		if err != nil {
			return err
		}
		l.s.Sources = append(l.s.Sources, sc)
	}
	return nil
}

// derived sets the scope values whose defaults depend on the sources.
func (l *loader) derived() *Error {
	s, p := &l.s, l.prefix
	var maxTimeout, maxTTFT time.Duration
	for _, sc := range s.Sources {
		maxTimeout = max(maxTimeout, sc.Timeout)
		maxTTFT = max(maxTTFT, sc.TTFTTimeout)
	}
	s.Breaker.ProbeTTL = orDefault(l.probeTTL, maxTimeout)
	s.Backpressure.StallWindow = orDefault(l.stallWindow, max(defaultStallWindowFloor, maxTTFT))
	s.Backpressure.PollInterval = orDefault(l.pollInterval, defaultPollInterval)
	l.from(p+"BREAKER__PROBE_TTL_S", l.probeTTL.key)
	l.from(p+"BACKPRESSURE__STALL_WINDOW_S", l.stallWindow.key)
	l.from(p+"BACKPRESSURE__POLL_INTERVAL_S", l.pollInterval.key)
	return nil
}

// validated checks the relations between the parsed values (Validate),
// naming the keys they came from.
func (l *loader) validated() *Error { return validate(&l.s, l.origins) }

// allHandled guards the table/parser link: every key the table lets through
// must have been read by the parser. Failing it is a bug in this package.
func (l *loader) allHandled() *Error {
	for _, k := range l.recognised {
		if !l.used[k] {
			return errf(k, "internal error: key is in the key table but was not parsed")
		}
	}
	for _, k := range known.flat {
		if _, ok := l.env[k]; ok && !l.used[k] {
			return errf(k, "internal error: key is in the key table but was not parsed")
		}
	}
	return nil
}

// defaultBudgetWindow is a budget's window when BUDGET__WINDOW_S is unset.
const defaultBudgetWindow = 24 * time.Hour

// maxBudgetUSD bounds a budget so that its micro-USD fit in an int64 with
// room for the reservations of calls in flight.
const maxBudgetUSD = 1e12

// budget reads {SCOPE}__BUDGET__USD and __WINDOW_S.
func (l *loader) budget(p string) *Error {
	e := l.get(p + "BUDGET__USD")
	window, err := l.optInt(p+"BUDGET__WINDOW_S", 1)
	if err != nil {
		return err
	}
	if !e.present() {
		// Validate refuses a window without a budget.
		if window.key != "" {
			l.s.Budget.Window = time.Duration(window.n) * time.Second
		}
		return nil
	}
	usd, err := parseRange(e, 0, true, maxBudgetUSD, false)
	if err != nil {
		return err
	}
	b := core.Budget{Key: "scope:" + l.s.Scope, Limit: int64(math.Round(usd * 1e6)), Window: defaultBudgetWindow}
	if b.Limit <= 0 {
		return errf(e.key, fmt.Sprintf("invalid value %s: below one micro-USD", show(e.val)))
	}
	if window.key != "" {
		b.Window = time.Duration(window.n) * time.Second
	}
	l.s.Budget = b
	return nil
}
