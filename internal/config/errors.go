package config

import (
	"strings"

	"github.com/polygateway/polygateway/core"
)

// Error reports what is wrong with a configuration (core.ConfigError, the
// root's ConfigError): Load and ReadEnv return it as the only error, never
// joined, in the deterministic order described in the package
// documentation.
type Error = core.ConfigError

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
