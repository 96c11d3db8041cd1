package core

// ConfigError reports what is wrong with a configuration: every bad or missing
// value found, at once. LoadSettings and FromEnv return it (as the only error,
// never joined), in the deterministic order described in the configuration
// reference.
//
// Key and Problem are the first problem's. When the configuration has
// others, Problem goes on with one line per other problem ("KEY: problem"),
// so that Error() lists them all, and All holds each one apart.
//
// A problem quotes the offending value for numbers, booleans and
// enumerations, but never for API_KEY, URLs, DSNs or EXTRA_BODY, which may
// carry secrets.
type ConfigError struct {
	// Key is the exact offending key, e.g. "LLM__QWEN__1__TIMEOUT_S". For the
	// scope argument of LoadSettings it is "scope"; for a .env file, its path.
	Key string
	// Problem is what is wrong, in words.
	Problem string
	// Err is the underlying cause when there is one (e.g. a *fs.PathError
	// from ReadEnv), the first problem's with several; nil otherwise.
	Err error
	// All lists every problem, each a single *ConfigError, the first being this
	// one's own Key; nil when there is only one.
	All []*ConfigError
}

// Error returns "polygateway: config: KEY: problem", one more line per
// further problem.
func (e *ConfigError) Error() string {
	return "polygateway: config: " + e.Key + ": " + e.Problem
}

// Unwrap returns the underlying cause, if any.
func (e *ConfigError) Unwrap() error { return e.Err }

// Is reports whether target is ErrGateway, so that
// errors.Is(err, polygateway.ErrGateway) holds for configuration errors.
func (e *ConfigError) Is(target error) bool { return target == ErrGateway }

// Problems returns every problem of e, each a single *ConfigError (none for a
// nil e).
func (e *ConfigError) Problems() []*ConfigError {
	if e == nil {
		return nil
	}
	if len(e.All) == 0 {
		return []*ConfigError{e}
	}
	return e.All
}
