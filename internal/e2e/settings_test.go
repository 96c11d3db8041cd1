package e2e

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// settingsEnv is a valid environment of scope LLM with the one source
// qwen_1 (TIMEOUT_S 5, the default watchdog of 2.5 s and 1.25 s).
func settingsEnv(srv *fu.Server) testenv.Env { return testenv.Base().Source("qwen", 1, srv.URL()) }

// cloneSettings copies s deeply enough for a test to change its sources.
func cloneSettings(s polygateway.GatewaySettings) polygateway.GatewaySettings {
	s.Sources = slices.Clone(s.Sources)
	return s
}

// TestFromSettingsRefusesWhatLoadSettingsRefuses: settings made by hand
// that break an invariant LoadSettings enforces are refused by FromSettings
// with the key LoadSettings names for the equivalent environment.
func TestFromSettingsRefusesWhatLoadSettingsRefuses(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	const p = "LLM__QWEN__1__"
	type S = polygateway.GatewaySettings
	src := func(f func(*polygateway.SourceConfig)) func(*S) {
		return func(s *S) { f(&s.Sources[0]) }
	}
	cases := []struct {
		name  string
		scope string // of LoadSettings; default LLM
		set   []string
		del   []string
		mut   func(*S)
	}{
		{name: "tpm without an estimate", set: []string{p + "TPM", "1000"},
			mut: src(func(c *polygateway.SourceConfig) { c.Limits.TPM = 1000 })},
		{name: "global tpm without an estimate", set: []string{"LLM__GLOBAL__TPM", "5000"},
			mut: func(s *S) { s.Global.TPM = 5000 }},
		{name: "estimate above tpm", set: []string{p + "TPM", "1000", p + "EST_TOKENS", "2000"},
			mut: src(func(c *polygateway.SourceConfig) { c.Limits.TPM, c.EstTokens = 1000, 2000 })},
		{name: "timeout beyond the lease", set: []string{"PGW_LEASE_TTL_S", "2"},
			mut: func(s *S) { s.LeaseTTL = 2 * time.Second }},
		{name: "timeout beyond the default lease", set: []string{p + "TIMEOUT_S", "2000"},
			mut: src(func(c *polygateway.SourceConfig) { c.Timeout = 2000 * time.Second })},
		{name: "ttft not below the timeout", set: []string{p + "TTFT_TIMEOUT_S", "5", p + "INTER_TOKEN_TIMEOUT_S", "1"},
			mut: src(func(c *polygateway.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 5*time.Second, time.Second })},
		{name: "inter-token not below ttft", set: []string{p + "TTFT_TIMEOUT_S", "2", p + "INTER_TOKEN_TIMEOUT_S", "2"},
			mut: src(func(c *polygateway.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 2*time.Second, 2*time.Second })},
		{name: "ttft off with an inter-token timeout", set: []string{p + "TTFT_TIMEOUT_S", "0", p + "INTER_TOKEN_TIMEOUT_S", "1"},
			mut: src(func(c *polygateway.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 0, time.Second })},
		{name: "inter-token off with a ttft", set: []string{p + "TTFT_TIMEOUT_S", "2", p + "INTER_TOKEN_TIMEOUT_S", "0"},
			mut: src(func(c *polygateway.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 2*time.Second, 0 })},
		{name: "backoff cap below the base", set: []string{"LLM__RETRY__BACKOFF_BASE_S", "0.5"},
			mut: func(s *S) { s.Retry.BackoffBase = 500 * time.Millisecond }},
		{name: "max cooldown below the cooldown", set: []string{"LLM__BREAKER__MAX_COOLDOWN_S", "3"},
			mut: func(s *S) { s.Breaker.MaxCooldown = 3 * time.Second }},
		{name: "probe lease below the timeout", set: []string{"LLM__BREAKER__PROBE_TTL_S", "1"},
			mut: func(s *S) { s.Breaker.ProbeTTL = time.Second }},
		{name: "stall window below the ttft", set: []string{"LLM__BACKPRESSURE__STALL_WINDOW_S", "2"},
			mut: func(s *S) { s.Backpressure.StallWindow = 2 * time.Second }},
		{name: "poll interval not below the stall window", set: []string{"LLM__BACKPRESSURE__POLL_INTERVAL_S", "60"},
			mut: func(s *S) { s.Backpressure.PollInterval = time.Minute }},
		{name: "cache without a namespace", set: []string{"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_TTL_S", "60"},
			mut: func(s *S) { s.CacheBackend, s.CacheTTL = "memory", time.Minute }},
		{name: "cache without a ttl", set: []string{"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "p"},
			mut: func(s *S) { s.CacheBackend, s.CacheNamespace = "memory", "p" }},
		{name: "sqlite without a path", set: []string{"PGW_TELEMETRY_BACKEND", "sqlite"},
			mut: func(s *S) { s.TelemetryBackend = "sqlite" }},
		{name: "postgres without a dsn", set: []string{"PGW_TELEMETRY_BACKEND", "postgres"},
			mut: func(s *S) { s.TelemetryBackend = "postgres" }},
		{name: "redis without a url", set: []string{"PGW_LIMITER_BACKEND", "redis"},
			mut: func(s *S) { s.LimiterBackend = "redis" }},
		{name: "redis url of another scheme", set: []string{"PGW_BREAKER_BACKEND", "redis", "REDIS_URL", "http://h:6379"},
			mut: func(s *S) { s.BreakerBackend, s.RedisURL = "redis", "http://h:6379" }},
		{name: "unknown limiter backend", set: []string{"PGW_LIMITER_BACKEND", "etcd"},
			mut: func(s *S) { s.LimiterBackend = "etcd" }},
		{name: "budget window without a budget", set: []string{"LLM__BUDGET__WINDOW_S", "60"},
			mut: func(s *S) { s.Budget.Window = time.Minute }},
		{name: "unknown selector", set: []string{"LLM__SELECTOR", "random"},
			mut: func(s *S) { s.Selector = "random" }},
		{name: "unknown quota policy", set: []string{"LLM__QUOTA_FULL", "block"},
			mut: func(s *S) { s.QuotaFull = "block" }},
		{name: "bad pool name", set: []string{"LLM__GLOBAL__POOL", "a b"},
			mut: func(s *S) { s.GlobalPool = "a b" }},
		{name: "negative rpm", set: []string{p + "RPM", "-5"},
			mut: src(func(c *polygateway.SourceConfig) { c.Limits.RPM = -5 })},
		{name: "fail rate above one", set: []string{"LLM__BREAKER__FAIL_RATE", "1.5"},
			mut: func(s *S) { s.Breaker.FailRate = 1.5 }},
		{name: "timeout weight above one", set: []string{"LLM__BREAKER__TIMEOUT_WEIGHT", "1.1"},
			mut: func(s *S) { s.Breaker.TimeoutWeight = 1.1 }},
		{name: "missing model", del: []string{p + "MODEL"},
			mut: src(func(c *polygateway.SourceConfig) { c.Model = "" })},
		{name: "api key with a space", set: []string{p + "API_KEY", "sk-test x"},
			mut: src(func(c *polygateway.SourceConfig) { c.APIKey = "sk-test x" })},
		{name: "base url of another scheme", set: []string{p + "BASE_URL", "ftp://files.example.com/v1"},
			mut: src(func(c *polygateway.SourceConfig) { c.BaseURL = "ftp://files.example.com/v1" })},
		{name: "negative weight", set: []string{p + "WEIGHT", "-1"},
			mut: src(func(c *polygateway.SourceConfig) { c.Weight = -1 })},
		{name: "unknown continue mode", set: []string{p + "CONTINUE", "resume"},
			mut: src(func(c *polygateway.SourceConfig) { c.Continue = "resume" })},
		{name: "unknown missing-done policy", set: []string{p + "MISSING_DONE", "ignore"},
			mut: src(func(c *polygateway.SourceConfig) { c.MissingDone = "ignore" })},
		{name: "negative source threshold", set: []string{p + "BREAKER__FAIL_THRESHOLD", "-1"},
			mut: src(func(c *polygateway.SourceConfig) { c.Breaker.FailThreshold = -1 })},
		{name: "negative source cooldown", set: []string{p + "BREAKER__COOLDOWN_S", "-1"},
			mut: src(func(c *polygateway.SourceConfig) { c.Breaker.Cooldown = -time.Second })},
		{name: "source cap below its cooldown", set: []string{p + "BREAKER__COOLDOWN_S", "20", p + "BREAKER__MAX_COOLDOWN_S", "10"},
			mut: src(func(c *polygateway.SourceConfig) {
				c.Breaker.Cooldown, c.Breaker.MaxCooldown = 20*time.Second, 10*time.Second
			})},
		{name: "source cap below the scope's cooldown", set: []string{p + "BREAKER__MAX_COOLDOWN_S", "3"},
			mut: src(func(c *polygateway.SourceConfig) { c.Breaker.MaxCooldown = 3 * time.Second })},
		{name: "bad scope name", scope: "llm-x",
			mut: func(s *S) { s.Scope = "LLM-X" }},
	}
	valid, err := polygateway.LoadSettings("LLM", settingsEnv(srv))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := settingsEnv(srv).Set(tc.set...)
			for _, k := range tc.del {
				delete(e, k)
			}
			scope := tc.scope
			if scope == "" {
				scope = "LLM"
			}
			_, lerr := polygateway.LoadSettings(scope, e)
			var le *polygateway.ConfigError
			if !errors.As(lerr, &le) {
				t.Fatalf("LoadSettings = %v, want a ConfigError", lerr)
			}
			s := cloneSettings(valid)
			tc.mut(&s)
			c, ferr := polygateway.FromSettings(s)
			if ferr == nil {
				c.Close()
			}
			var fe *polygateway.ConfigError
			if !errors.As(ferr, &fe) {
				t.Fatalf("FromSettings = %v, want the ConfigError LoadSettings gives: %v", ferr, lerr)
			}
			if fe.Key != le.Key {
				t.Errorf("FromSettings names %s (%s); LoadSettings names %s (%s)", fe.Key, fe.Problem, le.Key, le.Problem)
			}
		})
	}
}

// TestFromSettingsTakesWhatLoadSettingsGives: the settings of valid
// environments assemble unchanged.
func TestFromSettingsTakesWhatLoadSettingsGives(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	const p = "LLM__QWEN__1__"
	for name, set := range map[string][]string{
		"minimal":       nil,
		"watchdog off":  {p + "TTFT_TIMEOUT_S", "0", p + "INTER_TOKEN_TIMEOUT_S", "0"},
		"token gates":   {p + "TPM", "1000", p + "EST_TOKENS", "100", "LLM__GLOBAL__TPM", "5000", "LLM__GLOBAL__MAX_CONCURRENCY", "4"},
		"cache":         {"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "p", "PGW_CACHE_TTL_S", "60", "LLM__FALLBACK__STALE_S", "30"},
		"equal bounds":  {"PGW_LEASE_TTL_S", "5", "LLM__BREAKER__PROBE_TTL_S", "5", "LLM__BREAKER__MAX_COOLDOWN_S", "5", "LLM__RETRY__BACKOFF_BASE_S", "0.2"},
		"flat keys":     {"LLM_TIMEOUT", "7", "LLM_CIRCUIT_BREAKER_COOLDOWN", "20", "LLM_MAX_RETRIES", "5"},
		"no backoff":    {"LLM__RETRY__BACKOFF_BASE_S", "0", "LLM__RETRY__BACKOFF_MAX_S", "0"},
		"own breaker":   {p + "BREAKER__FAIL_THRESHOLD", "1", p + "BREAKER__COOLDOWN_S", "60", p + "BREAKER__MAX_COOLDOWN_S", "60"},
		"stall and all": {"LLM__BACKPRESSURE__STALL_WINDOW_S", "3", "LLM__BACKPRESSURE__POLL_INTERVAL_S", "0.5", "LLM__SELECTOR", "round_robin", "LLM__QUOTA_FULL", "fail_fast"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := settingsEnv(srv).Set(set...)
			if name == "flat keys" {
				delete(e, p+"TIMEOUT_S")
			}
			s, err := polygateway.LoadSettings("LLM", e)
			if err != nil {
				t.Fatal(err)
			}
			before := fmt.Sprintf("%#v", s)
			c, err := polygateway.FromSettings(s)
			if err != nil {
				t.Fatalf("FromSettings refuses what LoadSettings gives: %v", err)
			}
			c.Close()
			if after := fmt.Sprintf("%#v", s); after != before {
				t.Errorf("FromSettings changed its argument")
			}
		})
	}
}

// TestFromSettingsTakesTheZeroValuesOfOptionalSettings: settings made by
// hand with only the required values assemble and answer.
func TestFromSettingsTakesTheZeroValuesOfOptionalSettings(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	c, err := polygateway.FromSettings(polygateway.GatewaySettings{
		Scope:          "LLM",
		LimiterBackend: "memory", BreakerBackend: "memory",
		Sources: []polygateway.SourceConfig{{
			Name: "openai_1", Provider: "openai", Index: 1,
			BaseURL: srv.URL(), APIKey: "sk-test", Model: "gpt-test", Timeout: 5 * time.Second,
		}},
	})
	if err != nil {
		t.Fatalf("FromSettings: %v", err)
	}
	defer c.Close()
	if resp, err := testenv.Ask(t, c); err != nil || resp.SourceName != "openai_1" {
		t.Fatalf("= (%v, %v), want the answer of openai_1", resp, err)
	}
}
