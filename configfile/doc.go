// Package configfile reads a PolyGateway configuration file (YAML) and turns
// it into the flat keys of the environment configuration, so that a file and
// an environment that say the same thing yield the same settings: the file is
// translated key by key, then parsed and validated by the same parser
// (polygateway.LoadSettings). Errors name the file's path of the bad value,
// e.g. scopes.LLM.sources[0].timeout_s, never the key it became; one error
// lists every problem of the file.
//
//	cf, err := configfile.Load("gateway.yaml")
//	...
//	s, err := cf.Settings("LLM")             // a *polygateway.ConfigError naming a path
//	client, err := polygateway.FromSettings(s)
//
// Any client assembles from the file's keys with polygateway.WithEnv:
//
//	emb, err := embed.FromEnv("EMBED", polygateway.WithEnv(cf.Env()))
//	err = cf.Explain(err) // the key in the error becomes its path
//
// # Shape
//
//	assembly:   the PGW_* assembly keys and REDIS_URL, e.g. limiter_backend, redis_url
//	defaults:   the flat LLM_* shortcuts, e.g. timeout (LLM_TIMEOUT)
//	scopes:
//	  LLM:      one mapping per scope: selector, preferred_region, quota_full,
//	            the embedding keys (batch_size, …), the groups (global, retry,
//	            breaker, backpressure, fallback, quality) as mappings, x_… keys
//	            for the user's own code, and sources: a list
//	    sources:
//	      - {provider: openai, base_url: …, api_key: …, model: …, timeout_s: 60,
//	         breaker: {fail_threshold: 1}}  # this source's own breaker values
//	server:     the gateway's PGW_* keys, e.g. listen_addr, routes, client_keys
//
// Every field name is the lower-cased tail of its environment key:
// PGW_LEASE_TTL_S is assembly.lease_ttl_s, LLM_TIMEOUT is defaults.timeout,
// LLM__RETRY__MAX_ATTEMPTS is scopes.LLM.retry.max_attempts, PGW_ROUTES is
// server.routes; inside a source the same rule holds, so
// LLM__OPENAI__1__BREAKER__COOLDOWN_S is the field cooldown_s of the
// mapping breaker of the first openai source. A source's N is its position among the sources of the same
// provider in the list: the first openai source is OPENAI__1 (named
// openai_1), the second OPENAI__2, whatever comes between them. Scope names
// and providers are upper-cased.
//
// Values are YAML scalars, written as in the environment (numbers, booleans
// and strings are taken as written: 0.5 stays "0.5"); a null value (~ or
// nothing) means the key is absent. Exceptions: server.routes and
// server.embed_routes are mappings of model to scope, server.client_keys is
// a list (an element may itself be a comma-separated list), and a source's
// extra_body is a mapping (or a JSON string). Unknown fields are errors,
// with a suggestion when a known one is close.
//
// # Variables
//
// Scalar values may name environment variables: ${NAME} is replaced by the
// variable's value (a variable that is not set is an error naming the path;
// set to the empty string it is empty), and $$ is a literal $. Any other $ is
// an error. Substitution happens after the YAML is parsed, so a value can
// never change the file's structure. Mapping keys are not substituted. The
// variables are the process environment unless WithVariables or WithLookup
// say otherwise (the gateway passes its .env file and environment).
//
// # Limits
//
// A file is at most MaxFileBytes and at most MaxNodes YAML nodes, and its
// values and field names hold at most MaxFileBytes of text (aliases count
// every time they are used); one YAML document; no merge keys (<<).
//
// The YAML parser is go.yaml.in/yaml/v3. It is linked only by programs that
// import this package: the root package stays free of it.
package configfile
