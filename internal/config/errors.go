package config

import "github.com/polygateway/polygateway/internal/core"

// Error reports one bad or missing configuration value. Load and ReadEnv
// return it (as the only error, never joined): Load stops at the first
// problem, in the deterministic order described in the package documentation.
//
// Problem says what is wrong and what was expected. It quotes the offending
// value for numbers, booleans and enumerations, but never for API_KEY, URLs,
// DSNs or EXTRA_BODY, which may carry secrets.
type Error struct {
	// Key is the exact offending key, e.g. "LLM__QWEN__1__TIMEOUT_S". For the
	// scope argument of Load it is "scope"; for ReadEnv it is the .env path.
	Key string
	// Problem is what is wrong, in words.
	Problem string
	// Err is the underlying cause when there is one (e.g. a *fs.PathError
	// from ReadEnv); nil otherwise.
	Err error
}

// Error returns "polygateway: config: KEY: problem".
func (e *Error) Error() string {
	return "polygateway: config: " + e.Key + ": " + e.Problem
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is core.ErrGateway, so that
// errors.Is(err, polygateway.ErrGateway) holds for configuration errors.
func (e *Error) Is(target error) bool { return target == core.ErrGateway }

func errf(key, problem string) *Error { return &Error{Key: key, Problem: problem} }
