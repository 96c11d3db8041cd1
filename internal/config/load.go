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

	"github.com/polygateway/polygateway/core"
)

// Defaults that are not a plain value of a key's row: derived from other
// keys, or the engine's own for settings made by hand. The plain ones
// (a number, boolean or enumeration in KeyDoc.Default) are read from the
// key table itself.
const (
	defaultMaxTTFT          = 30 * time.Second
	defaultStallWindowFloor = 60 * time.Second
	defaultPollInterval     = 250 * time.Millisecond
)

// MaxBudgetUSD bounds a spend budget (a scope's, a gateway's client key's):
// the backends keep a budget of at most 2^53 micro-USD (about 9.007
// billion USD, exact in a Redis script's double as in an int64) and
// refuse every request naming a larger one.
const MaxBudgetUSD = 9e9

var (
	// scopeRE is the accepted scope name (after upper-casing): a letter,
	// then letters, digits and single underscores, not ending with one.
	scopeRE = regexp.MustCompile(`^[A-Z](?:[A-Z0-9]|_[A-Z0-9])*$`)
	// providerRE is the accepted PROVIDER part of a source key.
	providerRE = regexp.MustCompile(`^[A-Z0-9](?:[A-Z0-9]|_[A-Z0-9])*$`)
	// nRE is the accepted N part of a source key: a canonical positive integer.
	nRE = regexp.MustCompile(`^[1-9][0-9]*$`)
)

// Load parses and validates the configuration of one scope from env, a flat
// key/value map (see ReadEnv). It does no I/O.
//
// scope is upper-cased and must then match [A-Z][A-Z0-9_]* without "__" and
// without a trailing "_". Keys of other scopes are ignored; flat (LLM_*) and
// assembly (PGW_*, REDIS_URL) keys are shared by every scope. Unknown keys
// of the scope and unknown PGW_* and flat LLM_* keys are errors (see the
// package documentation for the escapes).
//
// On failure it returns one *Error listing every problem found, in the
// order of the package documentation.
func Load(scope string, env map[string]string) (core.GatewaySettings, error) {
	l := &loader{env: env, used: map[string]bool{}, origins: origins{}, flats: map[string]any{}}
	if err := l.load(scope); err != nil {
		return core.GatewaySettings{}, err
	}
	return l.s, nil
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
	problems

	recognised []string // scope keys the table knows, sorted
	sources    []sourceID

	// flats holds the values of the flat shortcuts set.
	flats map[string]any

	// origins records where the values that take part in a relation came
	// from (see Validate).
	origins origins
}

// from records that the value of key came from o's key ("" = the default).
func (l *loader) from(key, o string) { l.origins[key] = o }

// defaulted reports whether the value of key is its default.
func (l *loader) defaulted(key string) bool {
	o, ok := l.origins[key]
	return ok && o == ""
}

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
		return scopeError(scope)
	}
	l.scope, l.prefix = up, up+"__"
	l.s = core.GatewaySettings{Scope: up, Extra: map[string]string{}}
	if err := l.allowed(); err != nil {
		return err
	}
	l.classify()
	l.problems = append(l.problems, checkNames(l.env, l.allow)...)
	if len(l.sources) == 0 {
		l.fail(noSources(l.scope))
	}
	l.rows(known.assemblyFields, "", nil)
	l.flat()
	l.rows(known.scopeFields, l.prefix, nil)
	for _, id := range l.sources {
		n := strconv.Itoa(id.n)
		sc := core.SourceConfig{Name: strings.ToLower(id.provider) + "_" + n, Provider: strings.ToLower(id.provider), Index: id.n}
		l.rows(known.sourceFields, l.prefix+id.provider+"__"+n+"__", &sc)
		l.s.Sources = append(l.s.Sources, sc)
	}
	// The defaults made of other values.
	for _, d := range known.scopeFields {
		if d.derive != nil && l.defaulted(d.key(l.prefix)) {
			put(d.at.scope(&l.s), d.derive(&l.s))
		}
	}
	// The relations, also between values already reported: a key named
	// twice is named once.
	named := map[string]bool{}
	for _, e := range l.problems {
		named[e.Key] = true
	}
	for _, e := range validate(&l.s, l.origins).Problems() {
		if !named[e.Key] {
			l.fail(e)
		}
	}
	if len(l.problems) == 0 {
		l.fail(l.allHandled())
	}
	return Join(l.problems...)
}

// scopeError is the error of an invalid scope name.
func scopeError(scope string) *Error {
	return errf("scope", fmt.Sprintf("invalid scope name %s; expected [A-Z][A-Z0-9_]* without \"__\" and not ending in \"_\" (e.g. LLM, EMBED, OCR_FAST)", show(scope)))
}

// read parses the value of key by its row d into field; when the key is
// absent it sets the value of the row's flat shortcut, else the row's
// plain default. It returns whether the key was set.
func (l *loader) read(key string, d KeyDoc, field any) bool {
	e := l.get(key)
	switch {
	case d.Required == "yes" && e.val == "":
		what := "missing"
		if e.present() {
			what = "empty value"
		}
		l.fail(errf(key, fmt.Sprintf("%s: required; expected %s", what, d.want())))
		return e.present()
	case !e.present():
		v, ok := l.flats[d.flat]
		l.from(key, d.flat)
		if !ok {
			v, ok = known.defaults[d.Pattern]
			l.from(key, "")
		}
		if ok {
			put(field, v)
		} else if d.flat != "" && strings.HasPrefix(d.Required, "yes") {
			l.fail(unlessFlat(key, d))
		}
		return false
	}
	v, err := parseValue(e, d)
	if err != nil {
		l.fail(err)
		return true
	}
	put(field, v)
	return true
}

// rows reads the keys of rows under the prefix pre into the settings (into
// sc for a source's keys): by the table, then those read by hand.
func (l *loader) rows(rows []KeyDoc, pre string, sc *core.SourceConfig) {
	for _, d := range rows {
		if d.read == nil {
			l.read(d.key(pre), d, d.at.ptr(&l.s, sc))
		}
	}
	for _, d := range rows {
		if d.read != nil {
			d.read(l, pre, sc)
		}
	}
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

// flat parses the flat shortcuts set.
func (l *loader) flat() {
	for _, k := range known.flat {
		if e := l.get(k); e.present() && strings.HasPrefix(k, "LLM_") {
			v, err := parseValue(e, doc(k))
			l.fail(err)
			if err == nil {
				l.flats[k] = v
			}
		}
	}
}

// budget reads {SCOPE}__BUDGET__USD and __WINDOW_S.
func (l *loader) budget(p string, _ *core.SourceConfig) {
	var window int // its default, a day, when unset
	set := l.read(p+"BUDGET__WINDOW_S", doc(scopeP+"BUDGET__WINDOW_S"), &window)
	w, werr := WholeSeconds(p+"BUDGET__WINDOW_S", window)
	if werr != nil {
		l.fail(werr)
		set = false
	}
	b := core.Budget{Key: "scope:" + l.s.Scope, Window: w}
	e := l.get(p + "BUDGET__USD")
	if !e.present() {
		if set {
			l.s.Budget.Window = b.Window // Validate refuses a window without a budget
		}
		return
	}
	usd, err := parseRange(e, true, MaxBudgetUSD)
	if b.Limit = int64(math.Round(usd * 1e6)); err == nil && b.Limit <= 0 {
		err = errf(e.key, fmt.Sprintf("invalid value %s: below one micro-USD", show(e.val)))
	}
	if err != nil {
		l.fail(err)
		return
	}
	l.s.Budget = b
}

// budget checks the scope's spend budget.
func (v *validator) budget() {
	b, p := v.s.Budget, v.p
	usd, window := p+"BUDGET__USD", p+"BUDGET__WINDOW_S"
	switch {
	case b.Limit < 0:
		v.fail(errf(usd, fmt.Sprintf("invalid value %d micro-USD: must be greater than 0", b.Limit)))
	case b.Limit == 0 && b.Window != 0:
		v.fail(errf(window, "is set without "+usd))
	case b.Limit == 0:
	case float64(b.Limit) > MaxBudgetUSD*1e6:
		v.fail(errf(usd, fmt.Sprintf("invalid value %d micro-USD: out of range; expected at most %g USD", b.Limit, float64(MaxBudgetUSD))))
	case b.Window < time.Second || b.Window%time.Second != 0:
		v.fail(errf(window, fmt.Sprintf("invalid value %s: expected integer seconds >= 1 (a budget with a limit needs its window)", secs(b.Window))))
	}
}

// allHandled guards the table/parser link: every key the table lets through
// must have been read by the parser. Failing it is a bug in this package.
func (l *loader) allHandled() *Error {
	for _, k := range slices.Concat(l.recognised, known.flat) {
		if _, ok := l.env[k]; ok && !l.used[k] {
			return errf(k, "internal error: key is in the key table but was not parsed")
		}
	}
	return nil
}

// classify checks the shape of every {SCOPE}__ key, in sorted key order,
// collects Extra and the set of sources.
func (l *loader) classify() {
	keys := make([]string, 0, len(l.env))
	for k := range l.env {
		if strings.HasPrefix(k, l.prefix) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	seen := map[sourceID]bool{}
	for _, k := range keys {
		if err := l.classifyKey(k, seen); err != nil && !l.allow.allows(k) {
			l.fail(err) // unless another program's key: ignored
		}
	}
	slices.SortFunc(l.sources, func(a, b sourceID) int {
		return cmp.Or(cmp.Compare(strings.ToLower(a.provider), strings.ToLower(b.provider)), cmp.Compare(a.n, b.n))
	})
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
