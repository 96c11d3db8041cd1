package polygatewaytest

import (
	"strconv"
	"strings"
)

// DefaultAPIKey is the API key Server.Env configures unless EnvAPIKey says
// otherwise. The server accepts any key.
const DefaultAPIKey = "sk-polygatewaytest"

// EnvOption adjusts the source that Server.Env configures.
type EnvOption func(*envSource)

type envSource struct {
	provider string
	n        int
	model    string
	key      string
	fields   [][2]string
}

// EnvSource names the source provider_n (default "openai", 1): the keys
// are {SCOPE}__{PROVIDER}__{N}__…, and the client calls the source
// "{provider}_{n}" (e.g. "openai_1"). The provider is upper-cased in the
// keys; n < 1 is taken as 1.
func EnvSource(provider string, n int) EnvOption {
	return func(e *envSource) { e.provider, e.n = provider, max(n, 1) }
}

// EnvModel sets the source's MODEL (default DefaultModel): the "model"
// its requests carry, which WithModel matches.
func EnvModel(model string) EnvOption {
	return func(e *envSource) { e.model = model }
}

// EnvAPIKey sets the source's API_KEY (default DefaultAPIKey).
func EnvAPIKey(key string) EnvOption {
	return func(e *envSource) { e.key = key }
}

// EnvField sets one more field of the source: EnvField("PRIORITY", "1")
// gives {SCOPE}__{PROVIDER}__{N}__PRIORITY=1. It also overrides the
// defaults (EnvField("TIMEOUT_S", "30")).
func EnvField(field, value string) EnvOption {
	return func(e *envSource) { e.fields = append(e.fields, [2]string{strings.ToUpper(field), value}) }
}

// Env returns configuration keys for polygateway.WithEnv that make one
// source of scope point at the server, and the assembly keys that a client
// needs to start in memory:
//
//	{SCOPE}__OPENAI__1__BASE_URL   URL()
//	{SCOPE}__OPENAI__1__API_KEY    DefaultAPIKey
//	{SCOPE}__OPENAI__1__MODEL      DefaultModel
//	{SCOPE}__OPENAI__1__TIMEOUT_S  10
//	PGW_LIMITER_BACKEND=memory  PGW_BREAKER_BACKEND=memory
//	PGW_CACHE_BACKEND=none      PGW_TELEMETRY_BACKEND=none
//
// The options change the source's name, model, key and other fields. The
// map is new on every call: merge the maps of several sources (of this
// server or of others) with maps.Copy and add scope keys such as
// {SCOPE}__RETRY__MAX_ATTEMPTS to it as needed.
func (s *Server) Env(scope string, opts ...EnvOption) map[string]string {
	e := envSource{provider: "openai", n: 1, model: DefaultModel, key: DefaultAPIKey}
	for _, o := range opts {
		o(&e)
	}
	p := scope + "__" + strings.ToUpper(e.provider) + "__" + strconv.Itoa(e.n) + "__"
	env := map[string]string{
		p + "BASE_URL":          s.URL(),
		p + "API_KEY":           e.key,
		p + "MODEL":             e.model,
		p + "TIMEOUT_S":         "10",
		"PGW_LIMITER_BACKEND":   "memory",
		"PGW_BREAKER_BACKEND":   "memory",
		"PGW_CACHE_BACKEND":     "none",
		"PGW_TELEMETRY_BACKEND": "none",
	}
	for _, f := range e.fields {
		env[p+f[0]] = f[1]
	}
	return env
}
