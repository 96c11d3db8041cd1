package configfile_test

import (
	"errors"
	"maps"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/configfile"
)

// vars are the variables the test files name.
var vars = map[string]string{
	"REDIS_URL": "redis://127.0.0.1:6379/0", "OPENAI_API_KEY": "sk-SECRET-openai", "DEEPSEEK_API_KEY": "sk-SECRET-deepseek",
	"GROQ_API_KEY": "sk-SECRET-groq", "CLIENT_KEY_A": "key-SECRET-a", "CLIENT_KEY_B": "key-SECRET-b",
}

// equivalentEnv is testdata/gateway.yaml written as environment keys.
func equivalentEnv() map[string]string {
	return map[string]string{
		"PGW_LIMITER_BACKEND": "redis", "PGW_BREAKER_BACKEND": "redis", "PGW_CACHE_BACKEND": "redis",
		"PGW_CACHE_NAMESPACE": "my-project", "PGW_CACHE_TTL_S": "604800", "PGW_TELEMETRY_BACKEND": "none",
		"PGW_LEASE_TTL_S": "900", "REDIS_URL": "redis://127.0.0.1:6379/0",
		"LLM_MAX_RETRIES": "4", "LLM_TIMEOUT": "90",

		"LLM__SELECTOR": "health_aware", "LLM__PREFERRED_REGION": "eu",
		"LLM__GLOBAL__MAX_CONCURRENCY": "16", "LLM__GLOBAL__TPM": "200000",
		"LLM__RETRY__MAX_ATTEMPTS": "3", "LLM__RETRY__BACKOFF_BASE_S": "0.5", "LLM__RETRY__BACKOFF_MAX_S": "20",
		"LLM__BREAKER__FAIL_THRESHOLD": "5", "LLM__BREAKER__COOLDOWN_S": "30",
		"LLM__OPENAI__1__BASE_URL": "https://api.openai.com/v1", "LLM__OPENAI__1__API_KEY": "sk-SECRET-openai",
		"LLM__OPENAI__1__MODEL": "gpt-4o-mini", "LLM__OPENAI__1__TIMEOUT_S": "60", "LLM__OPENAI__1__EST_TOKENS": "2000",
		"LLM__OPENAI__1__REGION":     "eu",
		"LLM__DEEPSEEK__1__BASE_URL": "https://api.deepseek.com/v1", "LLM__DEEPSEEK__1__API_KEY": "sk-SECRET-deepseek",
		"LLM__DEEPSEEK__1__MODEL": "deepseek-chat", "LLM__DEEPSEEK__1__EST_TOKENS": "2000", "LLM__DEEPSEEK__1__PRIORITY": "1",
		"LLM__DEEPSEEK__1__EXTRA_BODY":              `{"top_k": 20, "temperature": 0.70}`,
		"LLM__DEEPSEEK__1__BREAKER__FAIL_THRESHOLD": "2", "LLM__DEEPSEEK__1__BREAKER__COOLDOWN_S": "60",
		"LLM__OPENAI__2__BASE_URL": "https://eu.openai.example/v1", "LLM__OPENAI__2__API_KEY": "sk-SECRET-openai",
		"LLM__OPENAI__2__MODEL": "gpt-4o-mini", "LLM__OPENAI__2__TIMEOUT_S": "60", "LLM__OPENAI__2__EST_TOKENS": "2000",
		"LLM__OPENAI__2__WEIGHT": "2.5",

		"FAST__QUOTA_FULL": "fail_fast", "FAST__X_TEAM": "search",
		"FAST__GROQ__1__BASE_URL": "https://api.groq.example/v1", "FAST__GROQ__1__API_KEY": "sk-SECRET-groq",
		"FAST__GROQ__1__MODEL": "llama-3.1-8b", "FAST__GROQ__1__TIMEOUT_S": "20",

		"EMBED__BATCH_SIZE": "64", "EMBED__NORMALIZE": "true", "EMBED__ENCODING_FORMAT": "base64",
		"EMBED__OPENAI__1__BASE_URL": "https://api.openai.com/v1", "EMBED__OPENAI__1__API_KEY": "sk-SECRET-openai",
		"EMBED__OPENAI__1__MODEL": "text-embedding-3-small", "EMBED__OPENAI__1__TIMEOUT_S": "30",

		"OCR__MONKEY__1__BASE_URL": "http://10.0.0.5:7861", "OCR__MONKEY__1__API_KEY": "none",
		"OCR__MONKEY__1__MODEL": "monkeyocr", "OCR__MONKEY__1__TIMEOUT_S": "300",

		"PGW_LISTEN_ADDR": ":8400", "PGW_STREAM_COMMIT": "first_token", "PGW_CLIENT_KEYS": "key-SECRET-a,key-SECRET-b",
		"PGW_CLIENT_RATE": "20", "PGW_ROUTES": "gpt-4o-mini=LLM,fast=FAST", "PGW_DEFAULT_SCOPE": "LLM",
		"PGW_EMBED_ROUTES": "text-embedding-3-small=EMBED", "PGW_DRAIN_TIMEOUT_S": "15", "PGW_LOG_FORMAT": "text",
	}
}

func loadExample(t *testing.T) *configfile.File {
	t.Helper()
	cf, err := configfile.Load("testdata/gateway.yaml", configfile.WithVariables(vars))
	if err != nil {
		t.Fatal(err)
	}
	return cf
}

// TestFileEqualsEnvironment: a file and the environment that says the same
// thing yield equal settings for every scope, embedding and user keys
// included, and the same keys (only EXTRA_BODY's JSON is spelt differently).
func TestFileEqualsEnvironment(t *testing.T) {
	t.Parallel()
	cf := loadExample(t)
	env := equivalentEnv()
	if got := cf.Scopes(); !reflect.DeepEqual(got, []string{"LLM", "FAST", "EMBED", "OCR"}) {
		t.Errorf("Scopes() = %v", got)
	}
	for _, scope := range []string{"LLM", "FAST", "EMBED", "OCR", "llm"} {
		want, err := polygateway.LoadSettings(scope, env)
		if err != nil {
			t.Fatalf("environment %s: %v", scope, err)
		}
		got, err := cf.Settings(scope)
		if err != nil {
			t.Fatalf("file %s: %v", scope, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: file settings differ from the environment's:\nfile %+v\nenv  %+v", scope, got, want)
		}
		fromEnv, err := polygateway.LoadSettings(scope, cf.Env())
		if err != nil || !reflect.DeepEqual(fromEnv, want) {
			t.Errorf("%s: LoadSettings(cf.Env()) = %+v, %v", scope, fromEnv, err)
		}
	}
	got := cf.Env()
	if g, w := got["LLM__DEEPSEEK__1__EXTRA_BODY"], `{"top_k":20,"temperature":0.70}`; g != w {
		t.Errorf("EXTRA_BODY = %s, want %s", g, w)
	}
	delete(got, "LLM__DEEPSEEK__1__EXTRA_BODY")
	delete(env, "LLM__DEEPSEEK__1__EXTRA_BODY")
	if !maps.Equal(got, env) {
		for k := range maps.Keys(got) {
			if got[k] != env[k] {
				t.Errorf("%s: file %q, environment %q", k, got[k], env[k])
			}
		}
		for k := range maps.Keys(env) {
			if _, ok := got[k]; !ok {
				t.Errorf("%s: missing from the file's keys", k)
			}
		}
	}
	// Env is a copy.
	cf.Env()["PGW_LISTEN_ADDR"] = "changed"
	if cf.Env()["PGW_LISTEN_ADDR"] != ":8400" {
		t.Error("Env returned the file's own map")
	}
}

// minimal is a valid file the bad cases change.
const minimal = `
assembly: {limiter_backend: memory, breaker_backend: memory, cache_backend: none, telemetry_backend: none}
scopes:
  LLM:
    sources:
      - {provider: openai, base_url: "https://api.openai.com/v1", api_key: "${OPENAI_API_KEY}", model: m, timeout_s: 60}
      - {provider: openai, base_url: "https://b.example/v1", api_key: none, model: m, timeout_s: 60}
`

// TestBadValuesNamePaths: every bad value, unknown field or bad shape is a
// ConfigError whose Key is the path in the file, with the line.
func TestBadValuesNamePaths(t *testing.T) {
	t.Parallel()
	src := func(extra string) string { return minimal + extra }
	replace := func(old, new string) string {
		if !strings.Contains(minimal, old) {
			t.Fatalf("minimal holds no %q", old)
		}
		return strings.Replace(minimal, old, new, 1)
	}
	cases := []struct {
		name, file, key string
		want            []string
	}{
		{"bad seconds", replace("model: m, timeout_s: 60}\n", "model: m, timeout_s: soon}\n"),
			"scopes.LLM.sources[0].timeout_s", []string{`invalid value "soon"`, "(line 6)"}},
		{"second source", replace("api_key: none, model: m, timeout_s: 60", "api_key: none, model: m, timeout_s: 0"),
			"scopes.LLM.sources[1].timeout_s", []string{"greater than 0"}},
		{"missing model", replace(`api_key: none, model: m,`, `api_key: none,`),
			"scopes.LLM.sources[1].model", []string{"missing"}},
		{"relation names paths", src("    retry: {backoff_base_s: 10, backoff_max_s: 5}\n"),
			"scopes.LLM.retry.backoff_max_s", []string{"scopes.LLM.retry.backoff_base_s"}},
		{"defaults and an empty server", src("defaults: {timeout: 5}\nserver: {}\n"), "", nil}, // valid
		{"timeout over the lease", strings.Replace(minimal, "telemetry_backend: none}", "telemetry_backend: none, lease_ttl_s: 30}", 1),
			"scopes.LLM.sources[0].timeout_s", []string{"assembly.lease_ttl_s"}},
		{"unknown top-level", src("scope: {}\n"), "scope", []string{"unknown field", "did you mean scopes?"}},
		{"unknown scope field", src("    selectr: round_robin\n"), "scopes.LLM.selectr", []string{"did you mean selector?"}},
		{"unknown group", src("    retri: {max_attempts: 2}\n"), "scopes.LLM.retri", []string{"did you mean retry?"}},
		{"unknown group field", src("    retry: {max_attempt: 2}\n"), "scopes.LLM.retry.max_attempt", []string{"did you mean max_attempts?"}},
		{"unknown source field", replace("model: m, timeout_s: 60}\n", "model: m, timeout: 60}\n"),
			"scopes.LLM.sources[0].timeout", []string{"did you mean timeout_s?"}},
		{"unknown assembly field", strings.Replace(minimal, "telemetry_backend: none}", "telemetry_backend: none, lease_ttl: 30}", 1),
			"assembly.lease_ttl", []string{"did you mean lease_ttl_s?"}},
		{"unknown server field", src("server: {listen_adr: ':1'}\n"), "server.listen_adr", []string{"did you mean listen_addr?"}},
		{"unknown defaults field", src("defaults: {timeouts: 5}\n"), "defaults.timeouts", []string{"did you mean timeout?"}},
		{"embedding key misspelt", src("    normalise: true\n"), "scopes.LLM.normalise", []string{"did you mean normalize?"}},
		{"allow_keys is not a file field", strings.Replace(minimal, "telemetry_backend: none}", "telemetry_backend: none, allow_keys: [A]}", 1),
			"assembly.allow_keys", []string{"unknown field"}},
		{"bad enum", src("    selector: fastest\n"), "scopes.LLM.selector", []string{`invalid value "fastest"`}},
		{"bad backend", strings.Replace(minimal, "limiter_backend: memory", "limiter_backend: etcd", 1),
			"assembly.limiter_backend", []string{`"etcd"`}},
		{"missing backend", strings.Replace(minimal, "limiter_backend: memory, ", "", 1),
			"assembly.limiter_backend", []string{"missing"}},
		{"a list for a scalar", replace("timeout_s: 60}\n", "timeout_s: [60]}\n"),
			"scopes.LLM.sources[0].timeout_s", []string{"expected a single value"}},
		{"a scalar for a group", src("    retry: 3\n"), "scopes.LLM.retry", []string{"expected a mapping"}},
		{"sources not a list", "scopes: {LLM: {sources: {provider: openai}}}\n", "scopes.LLM.sources", []string{"expected a list"}},
		{"no provider", replace("{provider: openai, base_url: \"https://b", "{base_url: \"https://b"),
			"scopes.LLM.sources[1]", []string{"missing field provider"}},
		{"bad provider", replace("provider: openai, base_url: \"https://b", "provider: open-ai, base_url: \"https://b"),
			"scopes.LLM.sources[1].provider", []string{"invalid provider"}},
		{"no sources", "assembly: {limiter_backend: memory, breaker_backend: memory, cache_backend: none, telemetry_backend: none}\nscopes: {LLM: {selector: round_robin}}\n",
			"scopes.LLM.sources", []string{"no sources"}},
		{"bad scope name", src("  llm-x: {}\n"), "scopes.llm-x", []string{"invalid scope name"}},
		{"scope twice", src("  llm: {}\n"), "scopes.llm", []string{"also configured"}},
		{"duplicate field", replace("model: m, timeout_s: 60}\n", "model: m, model: n, timeout_s: 60}\n"),
			"scopes.LLM.sources[0].model", []string{"duplicate field"}},
		{"a user's key twice in two cases", src("    x_team: a\n    X_TEAM: b\n"), "scopes.LLM.X_TEAM", []string{"duplicate field", "x_team", "(line 9)"}},
		{"routed model with a comma", src("server: {routes: {'a,b': LLM}}\n"), `server.routes["a,b"]`, []string{"no ','"}},
		{"routes as a list", src("server: {routes: [LLM]}\n"), "server.routes", []string{"mapping of model: SCOPE"}},
		{"a route's scope with a comma", src("server: {routes: {a: 'LLM,b=LLM'}}\n"), "server.routes.a", []string{"no ','", "(line 8)"}},
		{"an embed route's scope with an equals sign", src("server: {embed_routes: {a: '=LLM'}}\n"), "server.embed_routes.a", []string{"no ','"}},
		{"a source's breaker value", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker: {fail_threshold: 0}}"),
			"scopes.LLM.sources[1].breaker.fail_threshold", []string{`invalid value "0"`, "(line 7)"}},
		{"a source's breaker relation names paths", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker: {cooldown_s: 20, max_cooldown_s: 10}}"),
			"scopes.LLM.sources[1].breaker.max_cooldown_s", []string{"from scopes.LLM.sources[1].breaker.cooldown_s"}},
		{"a scope-only breaker field in a source", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker: {min_calls: 3}}"),
			"scopes.LLM.sources[1].breaker.min_calls", []string{"unknown field", "known fields: fail_threshold, cooldown_s, max_cooldown_s"}},
		{"a misspelt source breaker field", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker: {cooldown: 3}}"),
			"scopes.LLM.sources[1].breaker.cooldown", []string{"did you mean cooldown_s?"}},
		{"a source's breaker written flat", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker__cooldown_s: 3}"),
			"scopes.LLM.sources[1].breaker__cooldown_s", []string{"unknown field"}},
		{"a source's breaker as a scalar", replace("api_key: none, model: m, timeout_s: 60}", "api_key: none, model: m, timeout_s: 60, breaker: 3}"),
			"scopes.LLM.sources[1].breaker", []string{"expected a mapping"}},
		{"extra_body infinite", replace("model: m, timeout_s: 60}\n", "model: m, timeout_s: 60, extra_body: {t: .inf}}\n"),
			"scopes.LLM.sources[0].extra_body.t", []string{"JSON cannot hold"}},
		{"extra_body not JSON", replace("model: m, timeout_s: 60}\n", "model: m, timeout_s: 60, extra_body: '[1]'}\n"),
			"scopes.LLM.sources[0].extra_body", []string{"not an object"}},
		{"missing variable", strings.Replace(minimal, "${OPENAI_API_KEY}", "${NOT_SET_ANYWHERE}", 1),
			"scopes.LLM.sources[0].api_key", []string{"environment variable NOT_SET_ANYWHERE is not set", "(line 6)"}},
		{"lone dollar", strings.Replace(minimal, "${OPENAI_API_KEY}", "pa$word", 1),
			"scopes.LLM.sources[0].api_key", []string{"lone $"}},
		{"unterminated variable", strings.Replace(minimal, "${OPENAI_API_KEY}", "${OPENAI", 1),
			"scopes.LLM.sources[0].api_key", []string{"unterminated"}},
		{"bad variable name", strings.Replace(minimal, "${OPENAI_API_KEY}", "${1X}", 1),
			"scopes.LLM.sources[0].api_key", []string{"invalid variable name"}},
		{"merge key", "base: &b {timeout_s: 5}\n" + src(""), "base", []string{"unknown field"}},
		{"merge key in a source", src("      - {<<: {provider: openai}, base_url: \"https://c.example/v1\", api_key: none, model: m, timeout_s: 1}\n"),
			"scopes.LLM.sources[2]", []string{"merge keys"}},
		{"two documents", minimal + "---\nscopes: {}\n", "configuration file", []string{"more than one YAML document"}},
		{"empty", "", "configuration file", []string{"empty"}},
		{"comments only", "# nothing\n", "configuration file", []string{"empty"}},
		{"not a mapping", "- a\n- b\n", "configuration file", []string{"expected a mapping"}},
		{"invalid YAML", "scopes: {LLM: [\n", "configuration file", []string{"invalid YAML"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := configfile.Parse("", []byte(c.file), configfile.WithVariables(map[string]string{"OPENAI_API_KEY": "sk-SECRET"}))
			if c.key == "" {
				if err != nil {
					t.Fatalf("valid file refused: %v", err)
				}
				return
			}
			var ce *polygateway.ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key {
				t.Fatalf("err = %v, want a ConfigError for %s", err, c.key)
			}
			for _, w := range c.want {
				if !strings.Contains(ce.Problem, w) {
					t.Errorf("problem %q lacks %q", ce.Problem, w)
				}
			}
			if strings.Contains(ce.Error(), "SECRET") {
				t.Errorf("error echoes a secret: %v", ce)
			}
		})
	}
}

// TestVariables: ${NAME} is replaced after parsing (a value cannot change
// the file's structure), $$ is a literal $, and a variable's own $ stays.
func TestVariables(t *testing.T) {
	t.Parallel()
	file := strings.NewReplacer("${OPENAI_API_KEY}", "${A}$${B}${C}").Replace(minimal) + "    preferred_region: \"${INJECT}\"\n"
	cf, err := configfile.Parse("", []byte(file), configfile.WithLookup(func(name string) (string, bool) {
		v, ok := map[string]string{"A": "x", "C": "$y", "INJECT": "eu\n    selector: round_robin"}[name]
		return v, ok
	}))
	if err != nil {
		t.Fatal(err)
	}
	env := cf.Env()
	if got := env["LLM__OPENAI__1__API_KEY"]; got != "x${B}$y" {
		t.Errorf("api_key = %q", got)
	}
	if got := env["LLM__PREFERRED_REGION"]; got != "eu\n    selector: round_robin" {
		t.Errorf("preferred_region = %q", got)
	}
	if _, ok := env["LLM__SELECTOR"]; ok {
		t.Error("a variable's value became YAML")
	}
	// The process environment is the default.
	t.Run("process environment", func(t *testing.T) {
		_, err := configfile.Parse("", []byte(minimal))
		if ok := err == nil; ok != (lookupEnv("OPENAI_API_KEY")) {
			t.Errorf("Parse without variables: %v", err)
		}
	})
}

// TestExplain: errors from elsewhere (an embeddings client built from the
// file's keys) get the file's paths; keys without a place are left alone.
func TestExplain(t *testing.T) {
	t.Parallel()
	cf := loadExample(t)
	err := cf.Explain(&polygateway.ConfigError{Key: "EMBED__BATCH_SIZE", Problem: "invalid value; see EMBED__MAX_INPUTS and LLM__OPENAI__2__MODEL"})
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "scopes.EMBED.batch_size" ||
		ce.Problem != "invalid value; see scopes.EMBED.max_inputs and scopes.LLM.sources[2].model (line 55)" {
		t.Errorf("Explain = %v", err)
	}
	for key, want := range map[string]string{
		"LLM__OPENAI__2__TIMEOUT_S":               "scopes.LLM.sources[2].timeout_s",
		"LLM__DEEPSEEK__1__TIMEOUT_S":             "scopes.LLM.sources[1].timeout_s", // not in the file: defaults.timeout applies
		"LLM__{PROVIDER}__1__BASE_URL":            "scopes.LLM.sources",
		"FAST__X_TEAM":                            "scopes.FAST.x_team",
		"OTHER__BREAKER__WINDOW_S":                "scopes.OTHER.breaker.window_s",
		"LLM__DEEPSEEK__1__BREAKER__COOLDOWN_S":   "scopes.LLM.sources[1].breaker.cooldown_s",
		"LLM__OPENAI__2__BREAKER__MAX_COOLDOWN_S": "scopes.LLM.sources[2].breaker.max_cooldown_s", // not in the file
		"LLM__{PROVIDER}__1__BREAKER__COOLDOWN_S": "scopes.LLM.sources",
		"PGW_LEASE_TTL_S":                         "assembly.lease_ttl_s",
		"REDIS_URL":                               "assembly.redis_url",
		"LLM_TTFT_TIMEOUT":                        "defaults.ttft_timeout",
		"PGW_WRITE_TIMEOUT_S":                     "server.write_timeout_s",
		"PGW_ROUTES":                              "server.routes",
	} {
		if got, ok := cf.Path(key); !ok || got != want {
			t.Errorf("Path(%s) = %q, %v; want %q", key, got, ok, want)
		}
	}
	for _, key := range []string{"scope", "PGW_ALLOW_KEYS", "PGW_TEST_REDIS_URL", "LLM__OPENAI__9__MODEL", "LLM__NOPE", "HOME",
		"LLM__OPENAI__1__BREAKER__MIN_CALLS", "LLM__OPENAI__1__RETRY__MAX_ATTEMPTS", "LLM__OPENAI__1__BREAKER", "LLM__OPENAI__1__COOLDOWN_S"} {
		if got, ok := cf.Path(key); ok {
			t.Errorf("Path(%s) = %q, want none", key, got)
		}
	}
	other := errors.New("not a config error")
	if cf.Explain(other) != other { //nolint:errorlint // identity: another error must come back as it is
		t.Error("Explain changed another error")
	}
}

// TestLoadFileErrors: the file itself.
func TestLoadFileErrors(t *testing.T) {
	t.Parallel()
	_, err := configfile.Load("testdata/no-such-file.yaml")
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "testdata/no-such-file.yaml" || !strings.Contains(ce.Problem, "cannot read") {
		t.Errorf("missing file: %v", err)
	}
	big := make([]byte, configfile.MaxFileBytes+1)
	if _, err := configfile.Parse("big.yaml", big); !errors.As(err, &ce) || ce.Key != "big.yaml" || !strings.Contains(ce.Problem, "larger than") {
		t.Errorf("large file: %v", err)
	}
	// An alias bomb stops at MaxNodes instead of expanding.
	bomb := "scopes:\n  LLM:\n    sources:\n      - provider: x\n        extra_body:\n          a: &a [x, x, x, x, x, x, x, x, x, x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g"} {
		bomb += "          " + n + ": &" + n + " [" + strings.Repeat("*"+prev+", ", 9) + "*" + prev + "]\n"
		prev = n
	}
	if _, err := configfile.Parse("", []byte(bomb)); !errors.As(err, &ce) || !strings.Contains(ce.Problem, "YAML nodes") {
		t.Errorf("alias bomb: %v", err)
	}
}

func lookupEnv(name string) bool {
	_, ok := os.LookupEnv(name)
	return ok
}

// TestAliasedValuesAreBounded: a long value used through many aliases, far
// fewer than MaxNodes, is refused once the values it makes pass
// MaxFileBytes, before they are built; the same text written once is not.
func TestAliasedValuesAreBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("A", 20_000)
	uses := strings.Repeat("*s, ", 99) + "*s"
	cases := []struct {
		name, file, key string
	}{
		{"client_keys", "assembly: {cache_namespace: &s " + long + "}\nserver: {client_keys: [" + uses + "]}\n", "server.client_keys[51]"},
		{"extra_body", "scopes: {LLM: {sources: [{provider: x, extra_body: {a: &s " + long + ", b: [" + uses + "]}}]}}\n",
			"scopes.LLM.sources[0].extra_body.b[51]"},
		{"once", "scopes: {LLM: {sources: [{provider: x, extra_body: {a: " + long + "}}]}}\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := configfile.Parse("", []byte(c.file), configfile.WithoutScopeCheck())
			if c.key == "" {
				if err != nil {
					t.Fatalf("valid file refused: %v", err)
				}
				return
			}
			var ce *polygateway.ConfigError
			if !errors.As(err, &ce) || ce.Key != c.key || !strings.Contains(ce.Problem, "more than 1048576 bytes") || len(ce.All) > 1 {
				t.Fatalf("err = %v, want one ConfigError for %s about the values' bytes", err, c.key)
			}
		})
	}
}

// TestExtraBodyNumbers: a number of extra_body keeps its value: as written
// when JSON takes it, an integer in another YAML spelling exactly, and a
// leading zero, octal to YAML 1.1 and decimal to YAML 1.2, is refused.
func TestExtraBodyNumbers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		yaml, want, problem string
	}{
		{"20", "20", ""},
		{"0.70", "0.70", ""},
		{"-1e3", "-1e3", ""},
		{"0", "0", ""},
		{".5", "0.5", ""},
		{"+7", "7", ""},
		{"0x1F", "31", ""},
		{"0o17", "15", ""},
		{"1_000", "1000", ""},
		{"0x7FFFFFFFFFFFFFFF", "9223372036854775807", ""},
		{"0xFFFFFFFFFFFFFFFF", "18446744073709551615", ""},
		{"9007199254740993_0", "90071992547409930", ""},
		{"010", "", "leading zero"},
		{"-010", "", "leading zero"},
		{"09", "", "leading zero"},
		{"00.5", "", "leading zero"},
		{".inf", "", "JSON cannot hold"},
	}
	for _, c := range cases {
		t.Run(c.yaml, func(t *testing.T) {
			t.Parallel()
			file := "scopes: {LLM: {sources: [{provider: x, extra_body: {n: " + c.yaml + "}}]}}\n"
			cf, err := configfile.Parse("", []byte(file), configfile.WithoutScopeCheck())
			if c.problem != "" {
				var ce *polygateway.ConfigError
				if !errors.As(err, &ce) || ce.Key != "scopes.LLM.sources[0].extra_body.n" || !strings.Contains(ce.Problem, c.problem) {
					t.Fatalf("err = %v, want a ConfigError for scopes.LLM.sources[0].extra_body.n about %q", err, c.problem)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cf.Env()["LLM__X__1__EXTRA_BODY"], `{"n":`+c.want+`}`; got != want {
				t.Errorf("EXTRA_BODY = %s, want %s", got, want)
			}
		})
	}
}
