package config

import (
	"strings"

	"github.com/polygateway/polygateway/core"
)

// Error reports what is wrong with a configuration: every bad or missing
// value found, at once. Load and ReadEnv return it (as the only error,
// never joined), in the deterministic order described in the package
// documentation.
//
// Key and Problem are the first problem's. When the configuration has
// others, Problem goes on with one line per other problem ("KEY: problem"),
// so that Error() lists them all, and All holds each one apart.
//
// A problem quotes the offending value for numbers, booleans and
// enumerations, but never for API_KEY, URLs, DSNs or EXTRA_BODY, which may
// carry secrets.
type Error struct {
	// Key is the exact offending key, e.g. "LLM__QWEN__1__TIMEOUT_S". For the
	// scope argument of Load it is "scope"; for ReadEnv it is the .env path.
	Key string
	// Problem is what is wrong, in words.
	Problem string
	// Err is the underlying cause when there is one (e.g. a *fs.PathError
	// from ReadEnv), the first problem's with several; nil otherwise.
	Err error
	// All lists every problem, each a single *Error, the first being this
	// one's own Key; nil when there is only one.
	All []*Error
}

// Error returns "polygateway: config: KEY: problem", one more line per
// further problem.
func (e *Error) Error() string {
	return "polygateway: config: " + e.Key + ": " + e.Problem
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is core.ErrGateway, so that
// errors.Is(err, polygateway.ErrGateway) holds for configuration errors.
func (e *Error) Is(target error) bool { return target == core.ErrGateway }

// Problems returns every problem of e, each a single *Error (none for a
// nil e).
func (e *Error) Problems() []*Error {
	if e == nil {
		return nil
	}
	if len(e.All) == 0 {
		return []*Error{e}
	}
	return e.All
}

func errf(key, problem string) *Error { return &Error{Key: key, Problem: problem} }

// problems collects the problems found, in order.
type problems []*Error

// fail records a problem (nil is none).
func (p *problems) fail(err *Error) {
	if err != nil {
		*p = append(*p, err)
	}
}

// Join reports the problems of errs (nil ones skipped) as one *Error, nil
// when there are none. A *Error with several problems is taken apart, so
// that joining keeps one flat list.
func Join(errs ...*Error) *Error {
	var all []*Error
	for _, e := range errs {
		all = append(all, e.Problems()...)
	}
	switch len(all) {
	case 0:
		return nil
	case 1:
		return all[0]
	}
	var b strings.Builder
	b.WriteString(all[0].Problem)
	for _, o := range all[1:] {
		b.WriteString("\n  " + o.Key + ": " + o.Problem)
	}
	return &Error{Key: all[0].Key, Problem: b.String(), Err: all[0].Err, All: all}
}
