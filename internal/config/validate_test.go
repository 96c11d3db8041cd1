package config

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// handMade is the smallest valid settings made without Load: every optional
// value left at its zero value.
func handMade() core.GatewaySettings {
	return core.GatewaySettings{
		Scope:          "LLM",
		LimiterBackend: "memory", BreakerBackend: "memory",
		Sources: []core.SourceConfig{{
			Name: "qwen_1", Provider: "qwen", Index: 1,
			BaseURL: "https://api.example.com/v1", APIKey: secretKey, Model: "qwen-plus", Timeout: 120 * time.Second,
		}},
	}
}

// loaded returns what Load gives for base() changed by set.
func loaded(t *testing.T, set map[string]string) core.GatewaySettings {
	t.Helper()
	return mustLoad(t, "LLM", with(set))
}

// withSource returns s with its first source changed by f (s's Sources are
// copied first).
func withSource(s core.GatewaySettings, f func(*core.SourceConfig)) core.GatewaySettings {
	s.Sources = slices.Clone(s.Sources)
	f(&s.Sources[0])
	return s
}

func TestValidateTakesTheZeroValuesOfSettingsMadeByHand(t *testing.T) {
	t.Parallel()
	if err := Validate(handMade()); err != nil {
		t.Fatalf("Validate(minimal settings) = %v", err)
	}
	// Zero values in relations: no cap on the backoff, no doubling, no
	// probe lease, no stall rule, no permit lease cap.
	s := handMade()
	s.Retry.BackoffBase = 2 * time.Second
	s.Breaker.Cooldown = 10 * time.Second
	s.Sources[0].Timeout = time.Hour
	s.Sources[0].TTFTTimeout, s.Sources[0].InterTokenTimeout = 90*time.Second, 10*time.Second
	if err := Validate(s); err != nil {
		t.Fatalf("Validate(zero BackoffMax, MaxCooldown, ProbeTTL, StallWindow, LeaseTTL) = %v", err)
	}
	// A source's own cooldown longer than the scope's cap, without a cap of
	// its own: the cap follows it.
	s.Sources[0].Breaker = core.BreakerOverride{FailThreshold: 1, Cooldown: time.Minute}
	s.Breaker.MaxCooldown = 12 * time.Second
	if err := Validate(s); err != nil {
		t.Fatalf("Validate(source cooldown above the scope's cap) = %v", err)
	}
	// A stall window with the engine's default poll interval.
	s.Backpressure.StallWindow = 120 * time.Second
	if err := Validate(s); err != nil {
		t.Fatalf("Validate(stall window, zero poll interval) = %v", err)
	}
}

// TestValidateRefusesSettingsMadeByHand: values no environment can hold
// (negative numbers, NaN, sources without a key of their own) and the
// relations Load enforces, each refused with the key its environment form
// has.
func TestValidateRefusesSettingsMadeByHand(t *testing.T) {
	t.Parallel()
	src := func(f func(*core.SourceConfig)) func(*core.GatewaySettings) {
		return func(s *core.GatewaySettings) { *s = withSource(*s, f) }
	}
	cases := []struct {
		name string
		mut  func(*core.GatewaySettings)
		key  string
		want string
	}{
		{"lower-case scope", func(s *core.GatewaySettings) { s.Scope = "llm" }, "scope", "invalid scope name"},
		{"no sources", func(s *core.GatewaySettings) { s.Sources = nil }, "LLM__{PROVIDER}__1__BASE_URL", "no sources"},
		{"unknown limiter backend", func(s *core.GatewaySettings) { s.LimiterBackend = "etcd" }, "PGW_LIMITER_BACKEND", `"etcd"`},
		{"cache without namespace", func(s *core.GatewaySettings) { s.CacheBackend, s.CacheTTL = "memory", time.Minute },
			"PGW_CACHE_NAMESPACE", "PGW_CACHE_BACKEND=memory"},
		{"cache without ttl", func(s *core.GatewaySettings) { s.CacheBackend, s.CacheNamespace = "memory", "p" },
			"PGW_CACHE_TTL_S", "missing"},
		{"negative cache ttl", func(s *core.GatewaySettings) { s.CacheTTL = -time.Second }, "PGW_CACHE_TTL_S", "negative"},
		{"sqlite without path", func(s *core.GatewaySettings) { s.TelemetryBackend = "sqlite" }, "PGW_TELEMETRY_SQLITE_PATH", "missing"},
		{"postgres without dsn", func(s *core.GatewaySettings) { s.TelemetryBackend = "postgres" }, "PGW_TELEMETRY_PG_DSN", "missing"},
		{"negative structured retries", func(s *core.GatewaySettings) { s.StructuredMaxRetries = -1 }, "PGW_STRUCTURED_MAX_RETRIES", "-1"},
		{"negative lease", func(s *core.GatewaySettings) { s.LeaseTTL = -time.Second }, "PGW_LEASE_TTL_S", "negative"},
		{"redis without url", func(s *core.GatewaySettings) { s.BreakerBackend = "redis" }, "REDIS_URL", "PGW_BREAKER_BACKEND=redis"},
		{"redis url of another scheme", func(s *core.GatewaySettings) {
			s.CacheBackend, s.CacheNamespace, s.CacheTTL, s.RedisURL = "redis", "p", time.Minute, "http://SECRET@h"
		},
			"REDIS_URL", `scheme "http"`},
		{"negative global rpm", func(s *core.GatewaySettings) { s.Global.RPM = -1 }, "LLM__GLOBAL__RPM", "negative"},
		{"bad pool name", func(s *core.GatewaySettings) { s.GlobalPool = "a b" }, "LLM__GLOBAL__POOL", "not a pool name"},
		{"negative budget", func(s *core.GatewaySettings) { s.Budget = core.Budget{Limit: -1, Window: time.Hour} }, "LLM__BUDGET__USD", "greater than 0"},
		{"budget without window", func(s *core.GatewaySettings) { s.Budget = core.Budget{Limit: 1} }, "LLM__BUDGET__WINDOW_S", "integer seconds"},
		{"budget window of a fraction", func(s *core.GatewaySettings) { s.Budget = core.Budget{Limit: 1, Window: 1500 * time.Millisecond} },
			"LLM__BUDGET__WINDOW_S", "integer seconds"},
		{"window without budget", func(s *core.GatewaySettings) { s.Budget.Window = time.Hour }, "LLM__BUDGET__WINDOW_S", "without LLM__BUDGET__USD"},
		{"huge budget", func(s *core.GatewaySettings) { s.Budget = core.Budget{Limit: math.MaxInt64, Window: time.Hour} }, "LLM__BUDGET__USD", "out of range"},
		{"unknown selector", func(s *core.GatewaySettings) { s.Selector = "random" }, "LLM__SELECTOR", "health_aware"},
		{"unknown quota policy", func(s *core.GatewaySettings) { s.QuotaFull = "block" }, "LLM__QUOTA_FULL", "fail_fast"},
		{"negative attempts", func(s *core.GatewaySettings) { s.Retry.MaxAttempts = -1 }, "LLM__RETRY__MAX_ATTEMPTS", "negative"},
		{"negative backoff", func(s *core.GatewaySettings) { s.Retry.BackoffBase = -time.Second }, "LLM__RETRY__BACKOFF_BASE_S", "negative"},
		{"backoff cap below base", func(s *core.GatewaySettings) { s.Retry.BackoffBase, s.Retry.BackoffMax = 2*time.Second, time.Second },
			"LLM__RETRY__BACKOFF_MAX_S", "1s must be >= the backoff base (2s from LLM__RETRY__BACKOFF_BASE_S)"},
		{"negative patience", func(s *core.GatewaySettings) { s.Retry.TierPatience = -1 }, "LLM__RETRY__TIER_PATIENCE_S", "negative"},
		{"negative threshold", func(s *core.GatewaySettings) { s.Breaker.FailThreshold = -1 }, "LLM__BREAKER__FAIL_THRESHOLD", "negative"},
		{"max cooldown below cooldown", func(s *core.GatewaySettings) {
			s.Breaker.Cooldown, s.Breaker.MaxCooldown = 10*time.Second, 5*time.Second
		},
			"LLM__BREAKER__MAX_COOLDOWN_S", "5s must be >= the cooldown (10s from LLM__BREAKER__COOLDOWN_S)"},
		{"fail rate NaN", func(s *core.GatewaySettings) { s.Breaker.FailRate = math.NaN() }, "LLM__BREAKER__FAIL_RATE", "out of range"},
		{"fail rate above one", func(s *core.GatewaySettings) { s.Breaker.FailRate = 1.5 }, "LLM__BREAKER__FAIL_RATE", "out of range"},
		{"negative timeout weight", func(s *core.GatewaySettings) { s.Breaker.TimeoutWeight = -0.5 }, "LLM__BREAKER__TIMEOUT_WEIGHT", "out of range"},
		{"negative min chars", func(s *core.GatewaySettings) { s.Quality.MinChars = -1 }, "LLM__QUALITY__MIN_CHARS", "negative"},
		{"source without provider", src(func(c *core.SourceConfig) { c.Provider = "" }), "LLM__{PROVIDER}__{N}__BASE_URL", "make no source key"},
		{"source without index", src(func(c *core.SourceConfig) { c.Index = 0 }), "LLM__{PROVIDER}__{N}__BASE_URL", "index >= 1"},
		{"source named otherwise", src(func(c *core.SourceConfig) { c.Name = "primary" }), "LLM__QWEN__1__BASE_URL", "named qwen_1"},
		{"source twice", func(s *core.GatewaySettings) { s.Sources = append(slices.Clone(s.Sources), s.Sources[0]) },
			"LLM__QWEN__1__BASE_URL", "configured twice"},
		{"no base url", src(func(c *core.SourceConfig) { c.BaseURL = "" }), "LLM__QWEN__1__BASE_URL", "missing"},
		{"base url with a query", src(func(c *core.SourceConfig) { c.BaseURL = "https://h/v1?key=SECRET" }), "LLM__QWEN__1__BASE_URL", "query"},
		{"no api key", src(func(c *core.SourceConfig) { c.APIKey = "" }), "LLM__QWEN__1__API_KEY", "missing"},
		{"api key with a space", src(func(c *core.SourceConfig) { c.APIKey = "sk-SECRET x" }), "LLM__QWEN__1__API_KEY", "whitespace"},
		{"no model", src(func(c *core.SourceConfig) { c.Model = "" }), "LLM__QWEN__1__MODEL", "missing"},
		{"no timeout", src(func(c *core.SourceConfig) { c.Timeout = 0 }), "LLM__QWEN__1__TIMEOUT_S", "missing"},
		{"negative timeout", src(func(c *core.SourceConfig) { c.Timeout = -time.Second }), "LLM__QWEN__1__TIMEOUT_S", "greater than 0"},
		{"timeout beyond the lease", func(s *core.GatewaySettings) { s.LeaseTTL = time.Minute }, "LLM__QWEN__1__TIMEOUT_S",
			"120s (source qwen_1) exceeds the permit lease PGW_LEASE_TTL_S (60s)"},
		{"negative concurrency", src(func(c *core.SourceConfig) { c.Limits.MaxConcurrency = -1 }), "LLM__QWEN__1__MAX_CONCURRENCY", "negative"},
		{"tpm without estimate", src(func(c *core.SourceConfig) { c.Limits.TPM = 1000 }), "LLM__QWEN__1__EST_TOKENS",
			"missing: required because LLM__QWEN__1__TPM is 1000"},
		{"global tpm without estimate", func(s *core.GatewaySettings) { s.Global.TPM = 5000 }, "LLM__QWEN__1__EST_TOKENS",
			"missing: required because LLM__GLOBAL__TPM is 5000"},
		{"estimate above tpm", src(func(c *core.SourceConfig) { c.Limits.TPM, c.EstTokens = 1000, 2000 }), "LLM__QWEN__1__EST_TOKENS", "exceeds LLM__QWEN__1__TPM"},
		{"negative estimate", src(func(c *core.SourceConfig) { c.EstTokens = -1 }), "LLM__QWEN__1__EST_TOKENS", "negative"},
		{"ttft not below timeout", src(func(c *core.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 120*time.Second, time.Second }),
			"LLM__QWEN__1__TTFT_TIMEOUT_S", "must be < TIMEOUT_S (120s from LLM__QWEN__1__TIMEOUT_S)"},
		{"inter not below ttft", src(func(c *core.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 10*time.Second, 10*time.Second }),
			"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", "must be < TTFT_TIMEOUT_S"},
		{"inter without ttft", src(func(c *core.SourceConfig) { c.InterTokenTimeout = time.Second }),
			"LLM__QWEN__1__TTFT_TIMEOUT_S", "only together with INTER_TOKEN_TIMEOUT_S=0"},
		{"ttft without inter", src(func(c *core.SourceConfig) { c.TTFTTimeout = time.Second }),
			"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S", "only together with TTFT_TIMEOUT_S=0"},
		{"negative context window", src(func(c *core.SourceConfig) { c.ContextWindow = -1 }), "LLM__QWEN__1__CONTEXT_WINDOW", "negative"},
		{"unknown continue mode", src(func(c *core.SourceConfig) { c.Continue = "resume" }), "LLM__QWEN__1__CONTINUE", "none, prefill"},
		{"unknown missing-done policy", src(func(c *core.SourceConfig) { c.MissingDone = "ignore" }), "LLM__QWEN__1__MISSING_DONE", "retry, salvage"},
		{"negative weight", src(func(c *core.SourceConfig) { c.Weight = -1 }), "LLM__QWEN__1__WEIGHT", "out of range"},
		{"infinite weight", src(func(c *core.SourceConfig) { c.Weight = math.Inf(1) }), "LLM__QWEN__1__WEIGHT", "out of range"},
		{"negative source threshold", src(func(c *core.SourceConfig) { c.Breaker.FailThreshold = -1 }),
			"LLM__QWEN__1__BREAKER__FAIL_THRESHOLD", "negative"},
		{"negative source cooldown", src(func(c *core.SourceConfig) { c.Breaker.Cooldown = -time.Second }),
			"LLM__QWEN__1__BREAKER__COOLDOWN_S", "negative"},
		{"negative source cap", src(func(c *core.SourceConfig) { c.Breaker.MaxCooldown = -time.Second }),
			"LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", "negative"},
		{"source cap below its cooldown", src(func(c *core.SourceConfig) { c.Breaker.Cooldown, c.Breaker.MaxCooldown = 20*time.Second, 10*time.Second }),
			"LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", "(20s from LLM__QWEN__1__BREAKER__COOLDOWN_S)"},
		{"source cap below the scope's cooldown", func(s *core.GatewaySettings) {
			*s = withSource(*s, func(c *core.SourceConfig) { c.Breaker.MaxCooldown = 10 * time.Second })
			s.Breaker.Cooldown = 30 * time.Second
		}, "LLM__QWEN__1__BREAKER__MAX_COOLDOWN_S", "(30s from LLM__BREAKER__COOLDOWN_S)"},
		{"probe lease below the timeout", func(s *core.GatewaySettings) { s.Breaker.ProbeTTL = time.Minute }, "LLM__BREAKER__PROBE_TTL_S",
			"largest source TIMEOUT_S (120s, source qwen_1)"},
		{"stall window below ttft", func(s *core.GatewaySettings) {
			*s = withSource(*s, func(c *core.SourceConfig) { c.TTFTTimeout, c.InterTokenTimeout = 30*time.Second, 5*time.Second })
			s.Backpressure.StallWindow = 20 * time.Second
		}, "LLM__BACKPRESSURE__STALL_WINDOW_S", "largest source TTFT_TIMEOUT_S (30s"},
		{"stall window below the default poll interval", func(s *core.GatewaySettings) { s.Backpressure.StallWindow = 100 * time.Millisecond },
			"LLM__BACKPRESSURE__STALL_WINDOW_S", "must be > the default LLM__BACKPRESSURE__POLL_INTERVAL_S (0.25s)"},
		{"poll interval not below the stall window", func(s *core.GatewaySettings) {
			s.Backpressure.StallWindow, s.Backpressure.PollInterval = time.Minute, time.Minute
		}, "LLM__BACKPRESSURE__POLL_INTERVAL_S", "must be < the stall window (60s)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := handMade()
			tc.mut(&s)
			err := Validate(s)
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != tc.key {
				t.Fatalf("Validate = %v, want a *Error naming %s", err, tc.key)
			}
			if !strings.Contains(ce.Problem, tc.want) {
				t.Errorf("problem %q lacks %q", ce.Problem, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error shows a secret: %v", err)
			}
		})
	}
}

// TestValidateNamesTheKeysLoadNames: the settings Load gives, changed so
// that a relation breaks, are refused naming the key the environment
// would have named for the same change.
func TestValidateNamesTheKeysLoadNames(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		mut  func(*core.GatewaySettings)
	}{
		{"tpm without estimate", map[string]string{"LLM__QWEN__1__TPM": "1000"},
			func(s *core.GatewaySettings) { s.Sources[0].Limits.TPM = 1000 }},
		{"timeout beyond the lease", map[string]string{"PGW_LEASE_TTL_S": "100"},
			func(s *core.GatewaySettings) { s.LeaseTTL = 100 * time.Second }},
		{"ttft not below timeout", map[string]string{"LLM__QWEN__1__TTFT_TIMEOUT_S": "120", "LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "10"},
			func(s *core.GatewaySettings) {
				s.Sources[0].TTFTTimeout, s.Sources[0].InterTokenTimeout = 120*time.Second, 10*time.Second
			}},
		{"backoff cap below the default base", map[string]string{"LLM__RETRY__BACKOFF_MAX_S": "0.5"},
			func(s *core.GatewaySettings) { s.Retry.BackoffMax = 500 * time.Millisecond }},
		{"max cooldown below the default cooldown", map[string]string{"LLM__BREAKER__MAX_COOLDOWN_S": "3"},
			func(s *core.GatewaySettings) { s.Breaker.MaxCooldown = 3 * time.Second }},
		{"probe lease", map[string]string{"LLM__BREAKER__PROBE_TTL_S": "60"},
			func(s *core.GatewaySettings) { s.Breaker.ProbeTTL = time.Minute }},
		{"poll interval", map[string]string{"LLM__BACKPRESSURE__POLL_INTERVAL_S": "60"},
			func(s *core.GatewaySettings) { s.Backpressure.PollInterval = time.Minute }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, lerr := Load("LLM", with(tc.env))
			s := loaded(t, nil)
			s.Sources = slices.Clone(s.Sources)
			tc.mut(&s)
			verr := Validate(s)
			var le, ve *Error
			if !errors.As(lerr, &le) || !errors.As(verr, &ve) {
				t.Fatalf("Load = %v, Validate = %v: want both refused", lerr, verr)
			}
			if le.Key != ve.Key {
				t.Errorf("Load names %s (%s), Validate names %s (%s)", le.Key, le.Problem, ve.Key, ve.Problem)
			}
		})
	}
}
