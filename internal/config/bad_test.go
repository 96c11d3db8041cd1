package config

import (
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

type badCase struct {
	name  string
	scope string            // default "LLM"
	env   map[string]string // default base()
	set   map[string]string
	del   []string
	key   string   // the exact offending key
	want  []string // substrings of Problem
}

var badCases = []badCase{
	// The scope argument.
	{name: "scope with dash", scope: "llm-x", key: "scope", want: []string{"invalid scope name", `"llm-x"`}},
	{name: "scope with double underscore", scope: "A__B", key: "scope", want: []string{"invalid scope name"}},
	{name: "scope ending in underscore", scope: "LLM_", key: "scope", want: []string{"invalid scope name"}},
	{name: "scope starting with digit", scope: "1LLM", key: "scope", want: []string{"invalid scope name"}},
	{name: "empty scope", scope: "", key: "scope", want: []string{"invalid scope name"}},

	// Key shapes.
	{name: "no sources in scope", scope: "EMBED", key: "EMBED__{PROVIDER}__1__BASE_URL",
		want: []string{"no sources", "EMBED__{PROVIDER}__1__BASE_URL"}},
	{name: "source field typo", set: map[string]string{"LLM__QWEN__1__API_KEYS": secretKey},
		key: "LLM__QWEN__1__API_KEYS", want: []string{"unknown field", "did you mean API_KEY?"}},
	{name: "source field typo TIMEOUT", set: map[string]string{"LLM__QWEN__1__TIMEOUT": "5"},
		key: "LLM__QWEN__1__TIMEOUT", want: []string{"unknown field", "did you mean TIMEOUT_S?"}},
	{name: "lower-case provider", set: map[string]string{"LLM__qwen__2__MODEL": "m"},
		key: "LLM__qwen__2__MODEL", want: []string{"invalid provider", `"qwen"`}},
	{name: "provider with leading underscore", set: map[string]string{"LLM___QWEN__2__MODEL": "m"},
		key: "LLM___QWEN__2__MODEL", want: []string{"invalid provider"}},
	{name: "source number zero", set: map[string]string{"LLM__QWEN__0__MODEL": "m"},
		key: "LLM__QWEN__0__MODEL", want: []string{"invalid source number", `"0"`}},
	{name: "source number with leading zero", set: map[string]string{"LLM__QWEN__01__MODEL": "m"},
		key: "LLM__QWEN__01__MODEL", want: []string{"invalid source number", "leading zeros"}},
	{name: "source number not a number", set: map[string]string{"LLM__QWEN__A__MODEL": "m"},
		key: "LLM__QWEN__A__MODEL", want: []string{"invalid source number"}},
	{name: "source key without N", set: map[string]string{"LLM__DEEPSEEK__BASE_URL": "https://x/v1"},
		key: "LLM__DEEPSEEK__BASE_URL", want: []string{"malformed key", "{PROVIDER}__{N}__{FIELD}"}},
	{name: "too many parts", set: map[string]string{"LLM__QWEN__1__MODEL__X": "m"},
		key: "LLM__QWEN__1__MODEL__X", want: []string{"malformed key", "too many parts"}},
	{name: "empty part", set: map[string]string{"LLM____SELECTOR": "round_robin"},
		key: "LLM____SELECTOR", want: []string{"malformed key", "empty part"}},
	{name: "retry field typo", set: map[string]string{"LLM__RETRY__MAX_ATTEMPT": "3"},
		key: "LLM__RETRY__MAX_ATTEMPT", want: []string{"unknown field", "LLM__RETRY", "did you mean MAX_ATTEMPTS?"}},
	{name: "breaker unknown field", set: map[string]string{"LLM__BREAKER__FOO": "1"},
		key: "LLM__BREAKER__FOO", want: []string{"unknown field", "known fields: FAIL_THRESHOLD"}},
	{name: "global unknown field", set: map[string]string{"LLM__GLOBAL__QPS": "1"},
		key: "LLM__GLOBAL__QPS", want: []string{"unknown field"}},
	{name: "source field without source", set: map[string]string{"LLM__BASE_URL": "https://x/v1"},
		key: "LLM__BASE_URL", want: []string{"incomplete key", "LLM__{PROVIDER}__{N}__BASE_URL"}},
	{name: "group field without group", set: map[string]string{"LLM__RPM": "5"},
		key: "LLM__RPM", want: []string{"incomplete key", "LLM__GLOBAL__RPM or LLM__{PROVIDER}__{N}__RPM"}},
	{name: "breaker field without group", set: map[string]string{"LLM__COOLDOWN_S": "5"},
		key: "LLM__COOLDOWN_S", want: []string{"LLM__BREAKER__COOLDOWN_S"}},
	{name: "group without field", set: map[string]string{"LLM__BREAKER": "5"},
		key: "LLM__BREAKER", want: []string{"incomplete key", "LLM__BREAKER__{FIELD}"}},

	// Assembly keys.
	{name: "missing limiter backend", del: []string{"PGW_LIMITER_BACKEND"},
		key: "PGW_LIMITER_BACKEND", want: []string{"missing", "required", "memory, redis"}},
	{name: "empty limiter backend", set: map[string]string{"PGW_LIMITER_BACKEND": " "},
		key: "PGW_LIMITER_BACKEND", want: []string{"empty value", "required"}},
	{name: "unknown breaker backend", set: map[string]string{"PGW_BREAKER_BACKEND": "etcd"},
		key: "PGW_BREAKER_BACKEND", want: []string{`"etcd"`, "memory, redis"}},
	{name: "missing cache backend", del: []string{"PGW_CACHE_BACKEND"},
		key: "PGW_CACHE_BACKEND", want: []string{"missing", "none, memory, redis"}},
	{name: "cache without namespace", set: map[string]string{"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_TTL_S": "60"},
		key: "PGW_CACHE_NAMESPACE", want: []string{"missing", "PGW_CACHE_BACKEND=memory"}},
	{name: "cache without ttl", set: map[string]string{"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "p"},
		key: "PGW_CACHE_TTL_S", want: []string{"missing", "PGW_CACHE_BACKEND=memory"}},
	{name: "cache ttl zero", set: map[string]string{"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "p", "PGW_CACHE_TTL_S": "0"},
		key: "PGW_CACHE_TTL_S", want: []string{`"0"`, "greater than 0"}},
	{name: "cache off but ttl malformed", set: map[string]string{"PGW_CACHE_TTL_S": "1 week"},
		key: "PGW_CACHE_TTL_S", want: []string{`"1 week"`, "seconds"}},
	{name: "unknown telemetry backend", set: map[string]string{"PGW_TELEMETRY_BACKEND": "mysql"},
		key: "PGW_TELEMETRY_BACKEND", want: []string{`"mysql"`, "none, sqlite, postgres"}},
	{name: "sqlite without path", set: map[string]string{"PGW_TELEMETRY_BACKEND": "sqlite"},
		key: "PGW_TELEMETRY_SQLITE_PATH", want: []string{"missing", "PGW_TELEMETRY_BACKEND=sqlite"}},
	{name: "postgres without dsn", set: map[string]string{"PGW_TELEMETRY_BACKEND": "postgres"},
		key: "PGW_TELEMETRY_PG_DSN", want: []string{"missing", "PGW_TELEMETRY_BACKEND=postgres"}},
	{name: "structured retries negative", set: map[string]string{"PGW_STRUCTURED_MAX_RETRIES": "-1"},
		key: "PGW_STRUCTURED_MAX_RETRIES", want: []string{`"-1"`, "must not be negative"}},
	{name: "lease ttl zero", set: map[string]string{"PGW_LEASE_TTL_S": "0"},
		key: "PGW_LEASE_TTL_S", want: []string{"greater than 0"}},
	{name: "redis limiter without url", set: map[string]string{"PGW_LIMITER_BACKEND": "redis"},
		key: "REDIS_URL", want: []string{"missing", "PGW_LIMITER_BACKEND=redis"}},
	{name: "redis cache without url", set: map[string]string{"PGW_CACHE_BACKEND": "redis", "PGW_CACHE_NAMESPACE": "p", "PGW_CACHE_TTL_S": "60"},
		key: "REDIS_URL", want: []string{"missing", "PGW_CACHE_BACKEND=redis"}},
	{name: "redis url wrong scheme", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "http://:SECRETpw@host:6379/0"},
		key: "REDIS_URL", want: []string{`scheme "http"`, "redis://"}},
	{name: "redis url without host", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "redis://"},
		key: "REDIS_URL", want: []string{"no host"}},
	{name: "redis url unparsable", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "redis://:SECRET%zz@host"},
		key: "REDIS_URL", want: []string{"invalid URL"}},
	{name: "unix redis url without path", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "unix://"},
		key: "REDIS_URL", want: []string{"no socket path"}},
	// A password holding '#', '/' or '?' unescaped ends the authority early:
	// url.Parse then quotes what is left of it as the port.
	{name: "redis url with an unescaped # in the password", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "redis://:SECRET#1@cache:6379/0"},
		key: "REDIS_URL", want: []string{"invalid port", "value not shown"}},
	{name: "redis url with an unescaped / in the password", set: map[string]string{"PGW_BREAKER_BACKEND": "redis", "REDIS_URL": "redis://user:SECRET/1@cache:6379/0"},
		key: "REDIS_URL", want: []string{"invalid port", "value not shown"}},

	// Flat shortcuts.
	{name: "flat max retries zero", set: map[string]string{"LLM_MAX_RETRIES": "0"},
		key: "LLM_MAX_RETRIES", want: []string{"at least 1"}},
	{name: "flat timeout malformed even when overridden", set: map[string]string{"LLM_TIMEOUT": "2m"},
		key: "LLM_TIMEOUT", want: []string{`"2m"`, "seconds"}},
	{name: "flat base delay negative", set: map[string]string{"LLM_RETRY_BASE_DELAY": "-2"},
		key: "LLM_RETRY_BASE_DELAY", want: []string{"must not be negative"}},
	{name: "flat threshold not int", set: map[string]string{"LLM_CIRCUIT_BREAKER_THRESHOLD": "five"},
		key: "LLM_CIRCUIT_BREAKER_THRESHOLD", want: []string{`"five"`, "base-10"}},
	{name: "flat cooldown zero", set: map[string]string{"LLM_CIRCUIT_BREAKER_COOLDOWN": "0"},
		key: "LLM_CIRCUIT_BREAKER_COOLDOWN", want: []string{"greater than 0"}},

	// Scope keys.
	{name: "global rpm negative", set: map[string]string{"LLM__GLOBAL__RPM": "-5"},
		key: "LLM__GLOBAL__RPM", want: []string{"must not be negative"}},
	{name: "global concurrency decimal", set: map[string]string{"LLM__GLOBAL__MAX_CONCURRENCY": "1.5"},
		key: "LLM__GLOBAL__MAX_CONCURRENCY", want: []string{`"1.5"`, "base-10 integer"}},
	{name: "unknown selector", set: map[string]string{"LLM__SELECTOR": "random"},
		key: "LLM__SELECTOR", want: []string{`"random"`, "health_aware, round_robin, least_inflight, cost_aware"}},
	{name: "empty selector", set: map[string]string{"LLM__SELECTOR": ""},
		key: "LLM__SELECTOR", want: []string{"empty value", "remove the key"}},
	{name: "quality guard not a bool", set: map[string]string{"LLM__QUALITY__GUARD": "maybe"},
		key: "LLM__QUALITY__GUARD", want: []string{`"maybe"`}},
	{name: "negative min chars", set: map[string]string{"LLM__QUALITY__MIN_CHARS": "-1"},
		key: "LLM__QUALITY__MIN_CHARS", want: []string{"-1"}},
	{name: "negative stale window", set: map[string]string{"LLM__FALLBACK__STALE_S": "-5"},
		key: "LLM__FALLBACK__STALE_S", want: []string{"-5"}},
	{name: "stale window at the limit of a duration", set: map[string]string{"LLM__FALLBACK__STALE_S": "9223372036.854775807"},
		key: "LLM__FALLBACK__STALE_S", want: []string{"too large"}},
	// 2^55+1 seconds is 1 s modulo 2^64 ns: it must not wrap to a valid window.
	{name: "budget window beyond a duration", set: map[string]string{"LLM__BUDGET__USD": "5", "LLM__BUDGET__WINDOW_S": "36028797018963969"},
		key: "LLM__BUDGET__WINDOW_S", want: []string{"too large"}},
	{name: "unknown quality field", set: map[string]string{"LLM__QUALITY__GAURD": "true"},
		key: "LLM__QUALITY__GAURD", want: []string{"unknown field", "did you mean GUARD?"}},
	{name: "unknown quota policy", set: map[string]string{"LLM__QUOTA_FULL": "block"},
		key: "LLM__QUOTA_FULL", want: []string{`"block"`, "wait, fail_fast"}},
	{name: "max attempts zero", set: map[string]string{"LLM__RETRY__MAX_ATTEMPTS": "0"},
		key: "LLM__RETRY__MAX_ATTEMPTS", want: []string{"at least 1"}},
	{name: "backoff max below base", set: map[string]string{"LLM__RETRY__BACKOFF_MAX_S": "0.5"},
		key: "LLM__RETRY__BACKOFF_MAX_S", want: []string{"0.5s must be >=", "1s from the default"}},
	{name: "backoff base above default max", set: map[string]string{"LLM__RETRY__BACKOFF_BASE_S": "60"},
		key: "LLM__RETRY__BACKOFF_BASE_S", want: []string{"60s exceeds the default", "LLM__RETRY__BACKOFF_MAX_S"}},
	{name: "flat base delay above scope max", set: map[string]string{"LLM_RETRY_BASE_DELAY": "10", "LLM__RETRY__BACKOFF_MAX_S": "5"},
		key: "LLM__RETRY__BACKOFF_MAX_S", want: []string{"5s must be >=", "10s from LLM_RETRY_BASE_DELAY"}},
	{name: "flat base delay above default max", set: map[string]string{"LLM_RETRY_BASE_DELAY": "60"},
		key: "LLM_RETRY_BASE_DELAY", want: []string{"exceeds the default"}},
	{name: "fail threshold zero", set: map[string]string{"LLM__BREAKER__FAIL_THRESHOLD": "0"},
		key: "LLM__BREAKER__FAIL_THRESHOLD", want: []string{"at least 1"}},
	{name: "cooldown zero", set: map[string]string{"LLM__BREAKER__COOLDOWN_S": "0"},
		key: "LLM__BREAKER__COOLDOWN_S", want: []string{"greater than 0"}},
	{name: "max cooldown below cooldown", set: map[string]string{"LLM__BREAKER__MAX_COOLDOWN_S": "3"},
		key: "LLM__BREAKER__MAX_COOLDOWN_S", want: []string{"3s must be >= the cooldown", "5s from the default"}},
	{name: "max cooldown below a set cooldown", set: map[string]string{"LLM__BREAKER__MAX_COOLDOWN_S": "10", "LLM__BREAKER__COOLDOWN_S": "20"},
		key: "LLM__BREAKER__MAX_COOLDOWN_S", want: []string{"10s must be >= the cooldown", "from LLM__BREAKER__COOLDOWN_S"}},
	{name: "probe ttl below largest timeout", set: map[string]string{"LLM__BREAKER__PROBE_TTL_S": "60"},
		key: "LLM__BREAKER__PROBE_TTL_S", want: []string{"largest source TIMEOUT_S", "120s", "qwen_1"}},
	{name: "min calls zero", set: map[string]string{"LLM__BREAKER__MIN_CALLS": "0"},
		key: "LLM__BREAKER__MIN_CALLS", want: []string{"at least 1"}},
	{name: "fail rate zero", set: map[string]string{"LLM__BREAKER__FAIL_RATE": "0"},
		key: "LLM__BREAKER__FAIL_RATE", want: []string{"out of range", "0 < x <= 1"}},
	{name: "fail rate above one", set: map[string]string{"LLM__BREAKER__FAIL_RATE": "1.5"},
		key: "LLM__BREAKER__FAIL_RATE", want: []string{"out of range"}},
	{name: "fail rate percent", set: map[string]string{"LLM__BREAKER__FAIL_RATE": "50%"},
		key: "LLM__BREAKER__FAIL_RATE", want: []string{`"50%"`}},
	{name: "window zero", set: map[string]string{"LLM__BREAKER__WINDOW_S": "0"},
		key: "LLM__BREAKER__WINDOW_S", want: []string{"greater than 0"}},
	{name: "half-open successes zero", set: map[string]string{"LLM__BREAKER__HALF_OPEN_SUCCESSES": "0"},
		key: "LLM__BREAKER__HALF_OPEN_SUCCESSES", want: []string{"at least 1"}},
	{name: "timeout weight above one", set: map[string]string{"LLM__BREAKER__TIMEOUT_WEIGHT": "1.1"},
		key: "LLM__BREAKER__TIMEOUT_WEIGHT", want: []string{"0 <= x <= 1"}},
	{name: "stall window below largest ttft",
		set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "30", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "5", "LLM__BACKPRESSURE__STALL_WINDOW_S": "20"},
		key: "LLM__BACKPRESSURE__STALL_WINDOW_S", want: []string{"largest source TTFT_TIMEOUT_S", "30s"}},
	{name: "poll interval not below stall window", set: map[string]string{"LLM__BACKPRESSURE__POLL_INTERVAL_S": "60"},
		key: "LLM__BACKPRESSURE__POLL_INTERVAL_S", want: []string{"must be < the stall window (60s)"}},
	{name: "stall window below default poll", set: map[string]string{"LLM__BACKPRESSURE__STALL_WINDOW_S": "0.2",
		"LLM__QWEN__1__TTFT_TIMEOUT_S": "0", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "0"},
		key: "LLM__BACKPRESSURE__STALL_WINDOW_S", want: []string{"POLL_INTERVAL_S (0.25s)"}},
	{name: "poll interval zero", set: map[string]string{"LLM__BACKPRESSURE__POLL_INTERVAL_S": "0"},
		key: "LLM__BACKPRESSURE__POLL_INTERVAL_S", want: []string{"greater than 0"}},

	// Source fields.
	{name: "missing base url", del: []string{"LLM__QWEN__1__BASE_URL"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"missing", "required"}},
	{name: "base url ftp", set: map[string]string{"LLM__QWEN__1__BASE_URL": "ftp://files.example.com/v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{`scheme "ftp"`, "http"}},
	{name: "base url relative", set: map[string]string{"LLM__QWEN__1__BASE_URL": "api.example.com/v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"scheme none"}},
	{name: "base url with query", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https://api.example.com/v1?key=SECRET"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"query or fragment"}},
	{name: "base url with fragment", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https://api.example.com/v1#x"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"query or fragment"}},
	{name: "base url unparsable", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https://user:SECRET@[::1/v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"invalid URL", "value not shown"}},
	{name: "base url without host", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https:///v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"no host"}},
	{name: "base url with an unescaped ? in the password", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https://user:SECRET?1@api.example.com/v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"invalid port", "value not shown"}},
	{name: "base url with a bad IP literal", set: map[string]string{"LLM__QWEN__1__BASE_URL": "https://[SECRET]/v1"},
		key: "LLM__QWEN__1__BASE_URL", want: []string{"invalid host", "value not shown"}},
	{name: "missing api key", del: []string{"LLM__QWEN__1__API_KEY"},
		key: "LLM__QWEN__1__API_KEY", want: []string{"missing", `"none"`}},
	{name: "blank api key", set: map[string]string{"LLM__QWEN__1__API_KEY": "   "},
		key: "LLM__QWEN__1__API_KEY", want: []string{"empty value", "required"}},
	{name: "api key with inner space", set: map[string]string{"LLM__QWEN__1__API_KEY": "sk-SECRET abc"},
		key: "LLM__QWEN__1__API_KEY", want: []string{"whitespace", "value not shown"}},
	{name: "missing model", del: []string{"LLM__QWEN__1__MODEL"},
		key: "LLM__QWEN__1__MODEL", want: []string{"missing"}},
	{name: "missing timeout without flat", del: []string{"LLM__QWEN__1__TIMEOUT_S"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"missing", "LLM_TIMEOUT"}},
	{name: "timeout not a number", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "abc"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{`"abc"`, "seconds"}},
	{name: "timeout zero", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "0"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"greater than 0"}},
	{name: "timeout negative", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "-1"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"must not be negative"}},
	{name: "timeout NaN", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "NaN"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{`"NaN"`}},
	{name: "timeout Inf", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "+Inf"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{`"+Inf"`}},
	{name: "timeout exponent", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "1e2"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{`"1e2"`}},
	{name: "timeout empty", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": ""},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"empty value"}},
	{name: "timeout too large", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "99999999999"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"too large"}},
	{name: "timeout at the limit of a duration", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "9223372036.8547758"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"too large"}},
	{name: "timeout rounds to zero", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "0.0000000001"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"rounds to zero"}},
	{name: "timeout long garbage is shortened", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": strings.Repeat("x", 100)},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{strings.Repeat("x", 40) + `..."`}},
	{name: "timeout with unit", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "30s"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{`"30s"`}},
	{name: "timeout beyond default lease", set: map[string]string{"LLM__QWEN__1__TIMEOUT_S": "2000"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"exceeds the permit lease PGW_LEASE_TTL_S", "1500s, the default"}},
	{name: "timeout beyond explicit lease", set: map[string]string{"PGW_LEASE_TTL_S": "100"},
		key: "LLM__QWEN__1__TIMEOUT_S", want: []string{"PGW_LEASE_TTL_S (100s"}},
	{name: "flat timeout beyond lease", set: map[string]string{"LLM_TIMEOUT": "2000"}, del: []string{"LLM__QWEN__1__TIMEOUT_S"},
		key: "LLM_TIMEOUT", want: []string{"source qwen_1", "exceeds"}},
	{name: "max concurrency negative", set: map[string]string{"LLM__QWEN__1__MAX_CONCURRENCY": "-1"},
		key: "LLM__QWEN__1__MAX_CONCURRENCY", want: []string{"must not be negative"}},
	{name: "rpm overflow", set: map[string]string{"LLM__QWEN__1__RPM": "99999999999999999999"},
		key: "LLM__QWEN__1__RPM", want: []string{"out of range"}},
	{name: "rpm decimal", set: map[string]string{"LLM__QWEN__1__RPM": "1.5"},
		key: "LLM__QWEN__1__RPM", want: []string{"base-10 integer"}},
	{name: "tpm hex", set: map[string]string{"LLM__QWEN__1__TPM": "0x10"},
		key: "LLM__QWEN__1__TPM", want: []string{`"0x10"`}},
	{name: "tpm without est tokens", set: map[string]string{"LLM__QWEN__1__TPM": "1000"},
		key: "LLM__QWEN__1__EST_TOKENS", want: []string{"missing", "LLM__QWEN__1__TPM is 1000"}},
	{name: "global tpm without est tokens", set: map[string]string{"LLM__GLOBAL__TPM": "5000"},
		key: "LLM__QWEN__1__EST_TOKENS", want: []string{"missing", "LLM__GLOBAL__TPM is 5000"}},
	{name: "est tokens above tpm", set: map[string]string{"LLM__QWEN__1__TPM": "1000", "LLM__QWEN__1__EST_TOKENS": "2000"},
		key: "LLM__QWEN__1__EST_TOKENS", want: []string{"2000 exceeds LLM__QWEN__1__TPM (1000)"}},
	{name: "est tokens above global tpm", set: map[string]string{"LLM__GLOBAL__TPM": "1000", "LLM__QWEN__1__EST_TOKENS": "2000"},
		key: "LLM__QWEN__1__EST_TOKENS", want: []string{"exceeds LLM__GLOBAL__TPM (1000)"}},
	{name: "est tokens zero", set: map[string]string{"LLM__QWEN__1__EST_TOKENS": "0"},
		key: "LLM__QWEN__1__EST_TOKENS", want: []string{"at least 1"}},
	{name: "ttft without inter", set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "30"},
		key: "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", want: []string{"missing", "pair", "LLM_INTER_TOKEN_TIMEOUT"}},
	{name: "inter without ttft", set: map[string]string{"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "5"},
		key: "LLM__QWEN__1__TTFT_TIMEOUT_S", want: []string{"missing", "pair"}},
	{name: "inter not below ttft", set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "10", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "10"},
		key: "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", want: []string{"must be < TTFT_TIMEOUT_S (10s"}},
	{name: "ttft not below timeout", set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "120", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "10"},
		key: "LLM__QWEN__1__TTFT_TIMEOUT_S", want: []string{"must be < TIMEOUT_S (120s"}},
	{name: "ttft zero with an inter-token timeout", set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "0", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "5"},
		key: "LLM__QWEN__1__TTFT_TIMEOUT_S", want: []string{"only together with INTER_TOKEN_TIMEOUT_S=0"}},
	{name: "inter-token zero with a ttft", set: map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "20", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "0"},
		key: "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", want: []string{"only together with TTFT_TIMEOUT_S=0"}},
	{name: "tier patience negative", set: map[string]string{"LLM__RETRY__TIER_PATIENCE_S": "-1"},
		key: "LLM__RETRY__TIER_PATIENCE_S", want: []string{"negative"}},
	{name: "context window negative", set: map[string]string{"LLM__QWEN__1__CONTEXT_WINDOW": "-5"},
		key: "LLM__QWEN__1__CONTEXT_WINDOW", want: []string{"must not be negative"}},
	{name: "continue unknown", set: map[string]string{"LLM__QWEN__1__CONTINUE": "resume"},
		key: "LLM__QWEN__1__CONTINUE", want: []string{"none, prefill"}},
	{name: "flat ttft without any inter", set: map[string]string{"LLM_TTFT_TIMEOUT": "30"},
		key: "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", want: []string{"from LLM_TTFT_TIMEOUT"}},
	{name: "flat inter not below flat ttft", set: map[string]string{"LLM_TTFT_TIMEOUT": "30", "LLM_INTER_TOKEN_TIMEOUT": "40"},
		key: "LLM_INTER_TOKEN_TIMEOUT", want: []string{"from LLM_TTFT_TIMEOUT"}},
	{name: "flat ttft not below source timeout", set: map[string]string{"LLM_TTFT_TIMEOUT": "300", "LLM_INTER_TOKEN_TIMEOUT": "10"},
		key: "LLM_TTFT_TIMEOUT", want: []string{"must be < TIMEOUT_S (120s from LLM__QWEN__1__TIMEOUT_S)"}},
	{name: "enable thinking yes", set: map[string]string{"LLM__QWEN__1__ENABLE_THINKING": "yes"},
		key: "LLM__QWEN__1__ENABLE_THINKING", want: []string{`"yes"`, "true | false | 1 | 0"}},
	{name: "missing done unknown", set: map[string]string{"LLM__QWEN__1__MISSING_DONE": "ignore"},
		key: "LLM__QWEN__1__MISSING_DONE", want: []string{`"ignore"`, "retry, salvage"}},
	{name: "trust env empty", set: map[string]string{"LLM__QWEN__1__TRUST_ENV": ""},
		key: "LLM__QWEN__1__TRUST_ENV", want: []string{"empty value"}},
	{name: "priority hex", set: map[string]string{"LLM__QWEN__1__PRIORITY": "0x1"},
		key: "LLM__QWEN__1__PRIORITY", want: []string{"base-10"}},
	{name: "weight zero", set: map[string]string{"LLM__QWEN__1__WEIGHT": "0"},
		key: "LLM__QWEN__1__WEIGHT", want: []string{"out of range", "> 0"}},
	{name: "weight negative", set: map[string]string{"LLM__QWEN__1__WEIGHT": "-1"},
		key: "LLM__QWEN__1__WEIGHT", want: []string{"out of range"}},
	{name: "extra body array", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `[1, 2]`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"array, not an object"}},
	{name: "extra body null", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `null`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"null, not an object"}},
	{name: "extra body broken", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `{"token": "SECRET"`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"invalid JSON"}},
	{name: "extra body trailing data", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `{"a": 1} {"token": "SECRET"}`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"trailing data"}},
	{name: "extra body string", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `"SECRET"`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"string, not an object"}},
	{name: "extra body syntax error", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": `{"a": SECRET}`},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"syntax error at byte"}},
	{name: "extra body empty", set: map[string]string{"LLM__QWEN__1__EXTRA_BODY": ""},
		key: "LLM__QWEN__1__EXTRA_BODY", want: []string{"empty value"}},

	// A source's own breaker values.
	{name: "source fail threshold zero", set: map[string]string{"LLM__QWEN__1__BREAKER__FAIL_THRESHOLD": "0"},
		key: "LLM__QWEN__1__BREAKER__FAIL_THRESHOLD", want: []string{`"0"`, "at least 1"}},
	{name: "source fail threshold not an integer", set: map[string]string{"LLM__QWEN__1__BREAKER__FAIL_THRESHOLD": "2.5"},
		key: "LLM__QWEN__1__BREAKER__FAIL_THRESHOLD", want: []string{`"2.5"`, "base-10"}},
	{name: "source fail threshold empty", set: map[string]string{"LLM__QWEN__1__BREAKER__FAIL_THRESHOLD": ""},
		key: "LLM__QWEN__1__BREAKER__FAIL_THRESHOLD", want: []string{"empty value"}},
	{name: "source cooldown zero", set: map[string]string{"LLM__QWEN__1__BREAKER__COOLDOWN_S": "0"},
		key: "LLM__QWEN__1__BREAKER__COOLDOWN_S", want: []string{"greater than 0"}},
	{name: "source cooldown negative", set: map[string]string{"LLM__QWEN__1__BREAKER__COOLDOWN_S": "-3"},
		key: "LLM__QWEN__1__BREAKER__COOLDOWN_S", want: []string{"must not be negative"}},
	{name: "source cooldown with a unit", set: map[string]string{"LLM__QWEN__1__BREAKER__COOLDOWN_S": "30s"},
		key: "LLM__QWEN__1__BREAKER__COOLDOWN_S", want: []string{`"30s"`}},
	{name: "source max cooldown zero", set: map[string]string{"LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S": "0"},
		key: "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", want: []string{"greater than 0"}},
	{name: "source max cooldown below its cooldown",
		set: map[string]string{"LLM__QWEN__1__BREAKER__COOLDOWN_S": "20", "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S": "10"},
		key: "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", want: []string{"10s (source qwen_1) must be >= the cooldown (20s from LLM__QWEN__1__BREAKER__COOLDOWN_S)"}},
	{name: "source max cooldown below the scope's default cooldown", set: map[string]string{"LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S": "3"},
		key: "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", want: []string{"3s (source qwen_1) must be >= the cooldown (5s from the scope's default)"}},
	{name: "source max cooldown below the scope's cooldown",
		set: map[string]string{"LLM__BREAKER__COOLDOWN_S": "30", "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S": "10"},
		key: "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", want: []string{"(30s from LLM__BREAKER__COOLDOWN_S)"}},
	{name: "source max cooldown below the flat cooldown",
		set: map[string]string{"LLM_CIRCUIT_BREAKER_COOLDOWN": "30", "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S": "10"},
		key: "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", want: []string{"(30s from LLM_CIRCUIT_BREAKER_COOLDOWN)"}},
	{name: "source breaker field typo", set: map[string]string{"LLM__QWEN__1__BREAKER__FAIL_TRESHOLD": "1"},
		key: "LLM__QWEN__1__BREAKER__FAIL_TRESHOLD", want: []string{"unknown field", "under LLM__QWEN__1__BREAKER", "did you mean FAIL_THRESHOLD?"}},
	{name: "source breaker field of the scope only", set: map[string]string{"LLM__QWEN__1__BREAKER__MIN_CALLS": "5"},
		key: "LLM__QWEN__1__BREAKER__MIN_CALLS", want: []string{"unknown field", "whole scope only: LLM__BREAKER__MIN_CALLS"}},
	{name: "source group typo", set: map[string]string{"LLM__QWEN__1__BREAKR__COOLDOWN_S": "5"},
		key: "LLM__QWEN__1__BREAKR__COOLDOWN_S", want: []string{"malformed key", "did you mean LLM__QWEN__1__BREAKER__COOLDOWN_S?"}},
	{name: "source group without field", set: map[string]string{"LLM__QWEN__1__BREAKER": "5"},
		key: "LLM__QWEN__1__BREAKER", want: []string{"incomplete key", "LLM__QWEN__1__BREAKER__{FIELD}", "FAIL_THRESHOLD, COOLDOWN_S, MAX_COOLDOWN_S"}},
	{name: "source breaker field without its group", set: map[string]string{"LLM__QWEN__1__COOLDOWN_S": "5"},
		key: "LLM__QWEN__1__COOLDOWN_S", want: []string{"incomplete key", "LLM__QWEN__1__BREAKER__COOLDOWN_S"}},
	{name: "source breaker key with a bad source number", set: map[string]string{"LLM__QWEN__01__BREAKER__COOLDOWN_S": "5"},
		key: "LLM__QWEN__01__BREAKER__COOLDOWN_S", want: []string{"invalid source number", "LLM__QWEN__1__BREAKER__COOLDOWN_S"}},
	{name: "source breaker key with too many parts", set: map[string]string{"LLM__QWEN__1__BREAKER__COOLDOWN_S__X": "5"},
		key: "LLM__QWEN__1__BREAKER__COOLDOWN_S__X", want: []string{"malformed key", "too many parts"}},
	{name: "source breaker key alone makes an incomplete source", set: map[string]string{"LLM__ZHIPU__2__BREAKER__FAIL_THRESHOLD": "1"},
		key: "LLM__ZHIPU__2__BASE_URL", want: []string{"missing"}},

	{name: "second source incomplete", set: map[string]string{"LLM__ZHIPU__3__MODEL": "glm-4"},
		key: "LLM__ZHIPU__3__BASE_URL", want: []string{"missing"}},

	// Deterministic order among several problems.
	{name: "shape errors before value errors", set: map[string]string{"LLM__QWEN__1__MODLE": "x"}, del: []string{"PGW_LIMITER_BACKEND"},
		key: "LLM__QWEN__1__MODLE", want: []string{"did you mean MODEL?"}},
	{name: "shape errors in sorted key order", set: map[string]string{"LLM__B__1__X": "1", "LLM__A__1__X": "1"},
		key: "LLM__A__1__X", want: []string{"unknown field"}},
	{name: "sources in numeric N order",
		set: map[string]string{"LLM__QWEN__10__MODEL": "m", "LLM__QWEN__2__MODEL": "m"},
		key: "LLM__QWEN__2__BASE_URL", want: []string{"missing"}},
	{name: "assembly before scope keys", set: map[string]string{"LLM__SELECTOR": "x", "PGW_TELEMETRY_BACKEND": "x"},
		key: "PGW_TELEMETRY_BACKEND"},
	{name: "scope keys before sources", set: map[string]string{"LLM__SELECTOR": "x"}, del: []string{"LLM__QWEN__1__MODEL"},
		key: "LLM__SELECTOR"},
	{name: "fields in table order", set: map[string]string{"LLM__QWEN__1__WEIGHT": "x", "LLM__QWEN__1__RPM": "x"},
		key: "LLM__QWEN__1__RPM"},
}

func TestLoadRejects(t *testing.T) {
	t.Parallel()
	if len(badCases) < 30 {
		t.Fatalf("only %d bad configurations", len(badCases))
	}
	for _, tc := range badCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			scope := tc.scope
			if scope == "" && !strings.HasPrefix(tc.name, "empty scope") {
				scope = "LLM"
			}
			env := tc.env
			if env == nil {
				env = with(tc.set, tc.del...)
			}
			// Run several times: map iteration order must not change the answer.
			for range 5 {
				s, err := Load(scope, env)
				if err == nil {
					t.Fatalf("Load succeeded: %+v", s)
				}
				var ce *Error
				if !errors.As(err, &ce) {
					t.Fatalf("error %T %v is not a *Error", err, err)
				}
				if ce.Key != tc.key {
					t.Fatalf("Key = %q, want %q (problem: %s)", ce.Key, tc.key, ce.Problem)
				}
				for _, w := range tc.want {
					if !strings.Contains(ce.Problem, w) {
						t.Errorf("Problem %q does not contain %q", ce.Problem, w)
					}
				}
				if !errors.Is(err, core.ErrGateway) {
					t.Error("errors.Is(err, core.ErrGateway) is false")
				}
				if want := "polygateway: config: " + tc.key + ": " + ce.Problem; err.Error() != want {
					t.Errorf("Error() = %q, want %q", err.Error(), want)
				}
				if strings.Contains(err.Error(), "SECRET") {
					t.Errorf("error leaks a secret: %s", err)
				}
			}
		})
	}
}
