package config

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/internal/registry"
)

// entry is one key found in the map, its value trimmed of surrounding
// whitespace. The zero entry means "absent".
type entry struct {
	key, val string
}

func (e entry) present() bool { return e.key != "" }

// decimalRE is the only accepted number syntax for seconds and decimals:
// plain base-10 with an optional sign and fraction. No exponents, no hex,
// no underscores, no inf/nan.
var decimalRE = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$`)

// maxSeconds is the largest number of seconds a time.Duration holds.
const maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// WholeSeconds returns n seconds, the value of key, as a time.Duration,
// or an error naming key when a Duration cannot hold them (in
// nanoseconds the count would wrap, maybe to a valid window).
func WholeSeconds(key string, n int) (time.Duration, *Error) {
	if most := int64(math.MaxInt64 / time.Second); int64(n) > most {
		return 0, errf(key, fmt.Sprintf("invalid value %d: too large (at most %d seconds)", n, most))
	}
	return time.Duration(n) * time.Second, nil
}

// show quotes a value for an error message, shortening long ones. Callers
// never pass values that may be secret.
func show(v string) string {
	const limit = 40
	if r := []rune(v); len(r) > limit {
		v = string(r[:limit]) + "..."
	}
	return strconv.Quote(v)
}

// secs formats a duration as seconds, e.g. "0.5s".
func secs(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}

func emptyErr(e entry, form string) *Error {
	return errf(e.key, "empty value; expected "+form+" (remove the key to use the default)")
}

func invalidErr(e entry, form string) *Error {
	return errf(e.key, fmt.Sprintf("invalid value %s; expected %s", show(e.val), form))
}

// parseDecimal parses a plain decimal number.
func parseDecimal(e entry, form string) (float64, *Error) {
	if e.val == "" {
		return 0, emptyErr(e, form)
	}
	if !decimalRE.MatchString(e.val) {
		return 0, invalidErr(e, form)
	}
	f, err := strconv.ParseFloat(e.val, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, errf(e.key, fmt.Sprintf("invalid value %s: out of range; expected %s", show(e.val), form))
	}
	return f, nil
}

// seconds parses a non-negative number of seconds; with positive it must
// also be greater than zero.
func seconds(positive bool) func(entry, KeyDoc) (any, *Error) {
	form := map[bool]string{false: formSecNonNeg, true: formSecPos}[positive]
	return func(e entry, _ KeyDoc) (any, *Error) {
		f, perr := parseDecimal(e, form)
		if perr != nil {
			return nil, perr
		}
		ns := math.Round(f * float64(time.Second))
		switch {
		case f < 0:
			return nil, errf(e.key, fmt.Sprintf("invalid value %s: must not be negative; expected %s", show(e.val), form))
		case positive && f == 0:
			return nil, errf(e.key, fmt.Sprintf("invalid value %s: must be greater than 0; expected %s", show(e.val), form))
		case ns >= float64(math.MaxInt64):
			// float64(MaxInt64) is 2^63: the first count of nanoseconds a
			// time.Duration cannot hold (converting it would wrap).
			return nil, errf(e.key, fmt.Sprintf("invalid value %s: too large (at most %.0f seconds)", show(e.val), math.Floor(maxSeconds)))
		}
		d := time.Duration(ns)
		if positive && d <= 0 {
			return nil, errf(e.key, fmt.Sprintf("invalid value %s: rounds to zero (the resolution is 1ns); expected %s", show(e.val), form))
		}
		return d, nil
	}
}

// integer parses a base-10 integer that must be at least min (MinInt, 0
// or 1).
func integer(min int) func(entry, KeyDoc) (any, *Error) {
	form := map[int]string{math.MinInt: "integer", 0: formIntNonNeg, 1: formIntPos}[min]
	return func(e entry, _ KeyDoc) (any, *Error) {
		if e.val == "" {
			return nil, emptyErr(e, form)
		}
		n, err := strconv.ParseInt(e.val, 10, 0)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return nil, errf(e.key, fmt.Sprintf("invalid value %s: out of range; expected %s", show(e.val), form))
			}
			return nil, errf(e.key, fmt.Sprintf("invalid value %s; expected a base-10 %s", show(e.val), form))
		}
		if int(n) < min {
			what := fmt.Sprintf("must be at least %d", min)
			if min == 0 {
				what = "must not be negative"
			}
			return nil, errf(e.key, fmt.Sprintf("invalid value %s: %s; expected %s", show(e.val), what, form))
		}
		return int(n), nil
	}
}

// parseRange parses a decimal x with 0 <= x <= hi, or 0 < x <= hi when
// loOpen.
func parseRange(e entry, loOpen bool, hi float64) (float64, *Error) {
	lo := map[bool]string{true: "<", false: "<="}[loOpen]
	form := fmt.Sprintf("a decimal 0 %s x <= %s", lo, strconv.FormatFloat(hi, 'f', -1, 64))
	if math.IsInf(hi, 1) {
		form = "a decimal " + map[bool]string{true: "> 0", false: ">= 0"}[loOpen]
	}
	f, perr := parseDecimal(e, form)
	if perr != nil {
		return 0, perr
	}
	if f < 0 || (loOpen && f == 0) || f > hi {
		return 0, errf(e.key, fmt.Sprintf("invalid value %s: out of range; expected %s", show(e.val), form))
	}
	return f, nil
}

// parseBool accepts true/false/1/0, case-insensitively.
func parseBool(e entry) (bool, *Error) {
	if e.val == "" {
		return false, emptyErr(e, formBool)
	}
	switch strings.ToLower(e.val) {
	case "true", "1":
		return true, nil
	case "false", "0":
		return false, nil
	}
	return false, invalidErr(e, formBool)
}

// parseEnum accepts one of values (a row's Values), case-insensitively,
// and returns it in its canonical (lower-case) spelling.
func parseEnum(e entry, values []string) (string, *Error) {
	form := "one of " + strings.Join(values, ", ")
	if e.val == "" {
		return "", emptyErr(e, form)
	}
	for _, v := range values {
		if strings.EqualFold(e.val, v) {
			return v, nil
		}
	}
	return "", invalidErr(e, form)
}

// kindRule is how Load parses a value of a kind, and how Validate checks a
// field of that kind in settings made by hand (where zero is always
// accepted: the default, or off).
type kindRule struct {
	form  string                                                           // the value expected, in errors
	parse func(e entry, d KeyDoc) (any, *Error)                            // nil: the value itself
	check func(v *validator, key string, d KeyDoc, x reflect.Value) *Error // nil: any value
	plain bool                                                             // a Default may be a plain value
}

// kinds holds the rule of every kind.
var kinds = map[Kind]kindRule{
	KindString: {}, KindSecret: {}, KindPath: {}, KindList: {}, KindRoutes: {},
	KindURL:           {form: baseURLForm, parse: func(e entry, _ KeyDoc) (any, *Error) { return wrap(checkBaseURL(e)) }, check: checkURL},
	KindName:          {parse: parseName, check: checkName},
	KindSecondsPos:    {form: formSecPos, parse: seconds(true), check: checkNonNeg, plain: true},
	KindSecondsNonNeg: {form: formSecNonNeg, parse: seconds(false), check: checkNonNeg, plain: true},
	KindInt:           {form: "integer", parse: integer(math.MinInt), plain: true},
	KindIntNonNeg:     {form: formIntNonNeg, parse: integer(0), check: checkNonNeg, plain: true},
	KindIntPos:        {form: formIntPos, parse: integer(1), check: checkNonNeg, plain: true},
	KindDecimalPos:    {parse: decimal(true, math.Inf(1)), check: checkFloat(math.Inf(1)), plain: true},
	KindDecimalNonNeg: {parse: decimal(false, math.Inf(1)), check: checkFloat(math.Inf(1)), plain: true},
	KindFraction:      {parse: decimal(true, 1), check: checkFloat(1), plain: true},
	KindUnit:          {parse: decimal(false, 1), check: checkFloat(1), plain: true},
	KindBool:          {form: formBool, parse: func(e entry, _ KeyDoc) (any, *Error) { return wrap(parseBool(e)) }, plain: true},
	KindEnum:          {parse: func(e entry, d KeyDoc) (any, *Error) { return wrap(parseEnum(e, d.Values)) }, check: checkEnum, plain: true},
	KindBackend:       {parse: parseBackend, check: checkBackend},
	KindJSON:          {parse: func(e entry, _ KeyDoc) (any, *Error) { return wrap(parseJSONObject(e)) }},
}

func decimal(loOpen bool, hi float64) func(entry, KeyDoc) (any, *Error) {
	return func(e entry, _ KeyDoc) (any, *Error) { return wrap(parseRange(e, loOpen, hi)) }
}

// validName reports whether v is a non-empty name of letters, digits, '_'
// and '-' (at most 64 bytes): safe inside backend keys.
func validName(v string) bool {
	if v == "" || len(v) > 64 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func parseName(e entry, d KeyDoc) (any, *Error) {
	if !validName(e.val) {
		return nil, notAName(e.key, d, e.val)
	}
	return e.val, nil
}

// parseBackend accepts a built-in backend or one registered by another
// package (backend.Register…).
func parseBackend(e entry, d KeyDoc) (any, *Error) {
	v, perr := parseEnum(e, d.Values)
	if perr == nil || registry.Known(d.registry, e.val) {
		return cmp.Or(v, e.val), nil
	}
	return nil, registered(perr, d)
}

// registered adds the backends registered for d's kind to err.
func registered(err *Error, d KeyDoc) *Error {
	if names := registry.Names(d.registry); names != "" {
		err.Problem += " (registered: " + names + ")"
	}
	return err
}

// parseValue parses a present value by its row, as Load reads it.
func parseValue(e entry, d KeyDoc) (any, *Error) {
	parse := kinds[d.Kind].parse
	if d.parse != nil {
		parse = d.parse
	}
	if parse == nil {
		return e.val, nil
	}
	return parse(e, d)
}

// notAName is the error of a bad value of a KindName key.
func notAName(key string, d KeyDoc, v string) *Error {
	what := strings.ToLower(d.Pattern[strings.LastIndex(d.Pattern, "_")+1:])
	return errf(key, fmt.Sprintf("%q is not a %s name: use letters, digits, _ and -", v, what))
}

func wrap[T any](v T, err *Error) (any, *Error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// want words the value row d expects, for a "missing" error.
func (d KeyDoc) want() string {
	switch {
	case d.expect != "":
		return d.expect
	case d.Values != nil:
		return "one of " + strings.Join(d.Values, ", ")
	}
	return kinds[d.Kind].form
}

// plainDefault parses the Default of a row of a number, boolean or
// enumeration kind when it is a plain value of that kind ("0 (off)" is 0,
// "8, or COOLDOWN_S when larger" 8), after its flat shortcut's ", else "
// ("LLM_MAX_RETRIES, else 3" is 3); a Default made from other keys alone
// ("LLM_TIMEOUT") is none.
func plainDefault(d KeyDoc) (any, bool) {
	if !kinds[d.Kind].plain {
		return nil, false
	}
	word, ok := d.Default, true
	if d.flat != "" {
		_, word, ok = strings.Cut(word, ", else ")
	}
	word, _, _ = strings.Cut(word, " (")
	word, _, _ = strings.Cut(word, ", ")
	v, err := parseValue(entry{key: d.Pattern, val: word}, d)
	return v, ok && err == nil
}

// put stores v, a value parseValue gave, in the field dst points to (a
// pointer field is pointed at a copy).
func put(dst, v any) {
	field, val := reflect.ValueOf(dst).Elem(), reflect.ValueOf(v)
	if field.Kind() == reflect.Pointer {
		p := reflect.New(field.Type().Elem())
		p.Elem().Set(val.Convert(p.Elem().Type()))
		val = p
	}
	field.Set(val.Convert(field.Type()))
}

// ReadKey parses the value of key, a key of the table without a scope (a
// gateway key, say), from env into the field dst points to, as Load reads
// its own keys: trimmed, by the row's kind, the row's plain default when
// the key is absent. It reports whether env sets the key.
func ReadKey(env map[string]string, key string, dst any) (bool, *Error) {
	l := &loader{env: env, used: map[string]bool{}, origins: origins{}}
	set := l.read(key, doc(key), dst)
	return set, Join(l.problems...)
}

// Scopes lists the scopes env has keys of (the SCOPE of every
// SCOPE__… key), sorted.
func Scopes(env map[string]string) []string {
	set := map[string]bool{}
	for k := range env {
		if s, _, ok := strings.Cut(k, "__"); ok && scopeRE.MatchString(s) {
			set[s] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
