package config

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

func ptr[T any](v T) *T { return &v }

func TestLoadDefaults(t *testing.T) {
	t.Parallel()
	got := mustLoad(t, "llm", base()) // the scope is upper-cased
	want := Settings{
		Scope: "LLM",
		Sources: []core.SourceConfig{{
			Name: "qwen_1", Provider: "qwen", Index: 1,
			BaseURL: "https://api.example.com/v1", APIKey: secretKey, Model: "qwen-plus",
			Timeout: 120 * time.Second,
			// The default watchdog: min(TIMEOUT_S/2, 30 s), half of it between tokens.
			TTFTTimeout: 30 * time.Second, InterTokenTimeout: 15 * time.Second,
			MissingDone: core.MissingDoneRetry, TrustEnv: true, Weight: 1,
		}},
		Selector: core.SelectorHealthAware,
		Retry:    core.RetrySettings{MaxAttempts: 3, BackoffBase: time.Second, BackoffMax: 30 * time.Second, TierPatience: 3 * time.Second},
		Breaker: core.BreakerConfig{
			FailThreshold: 5, Cooldown: 5 * time.Second, MaxCooldown: 8 * time.Second,
			ProbeTTL: 120 * time.Second, MinCalls: 20, FailRate: 0.5, Window: 60 * time.Second,
			HalfOpenSuccesses: 1, TimeoutWeight: 1,
		},
		Backpressure: core.BackpressureSettings{StallWindow: 60 * time.Second, PollInterval: 250 * time.Millisecond,
			QueueShare: 9, QueueClaimTTL: 2 * time.Second, QueueLease: 5 * time.Minute},
		QuotaFull:            core.QuotaFullWait,
		LimiterBackend:       "memory",
		BreakerBackend:       "memory",
		CacheBackend:         "none",
		TelemetryBackend:     "none",
		TelemetryContent:     core.TelemetryContentFull,
		StructuredMaxRetries: 2,
		LeaseTTL:             1500 * time.Second,
		Quality:              core.QualitySettings{MinChars: 1},
		Extra:                map[string]string{},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got %+v\nwant %+v", got, want)
	}
}

func TestLoadFull(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"PGW_LIMITER_BACKEND":        "redis",
		"PGW_BREAKER_BACKEND":        " Redis ",
		"PGW_CACHE_BACKEND":          "memory",
		"PGW_CACHE_NAMESPACE":        " proj ",
		"PGW_CACHE_TTL_S":            "604800",
		"PGW_TELEMETRY_BACKEND":      "sqlite",
		"PGW_TELEMETRY_SQLITE_PATH":  "logs/t.db",
		"PGW_TELEMETRY_PG_DSN":       "postgres://u:SECRET@h/db",
		"PGW_PRICING_PATH":           "prices.json",
		"PGW_STRUCTURED_MAX_RETRIES": "0",
		"PGW_LEASE_TTL_S":            "900.5",
		"REDIS_URL":                  "rediss://:SECRET@cache:6380/2",

		"LLM__GLOBAL__MAX_CONCURRENCY":         "16",
		"LLM__GLOBAL__RPM":                     "120",
		"LLM__GLOBAL__TPM":                     "200000",
		"LLM__SELECTOR":                        "least_inflight",
		"LLM__PREFERRED_REGION":                "cn-east",
		"LLM__QUOTA_FULL":                      "FAIL_FAST",
		"LLM__RETRY__MAX_ATTEMPTS":             "5",
		"LLM__RETRY__BACKOFF_BASE_S":           "0.5",
		"LLM__RETRY__BACKOFF_MAX_S":            "8",
		"LLM__BREAKER__FAIL_THRESHOLD":         "7",
		"LLM__BREAKER__COOLDOWN_S":             "15",
		"LLM__BREAKER__PROBE_TTL_S":            "200",
		"LLM__BREAKER__MIN_CALLS":              "10",
		"LLM__BREAKER__FAIL_RATE":              "0.3",
		"LLM__BREAKER__WINDOW_S":               "30",
		"LLM__BREAKER__MAX_COOLDOWN_S":         "120",
		"LLM__BREAKER__HALF_OPEN_SUCCESSES":    "2",
		"LLM__BREAKER__TIMEOUT_WEIGHT":         "0",
		"LLM__BACKPRESSURE__STALL_WINDOW_S":    "90",
		"LLM__BACKPRESSURE__POLL_INTERVAL_S":   "0.1",
		"LLM__BACKPRESSURE__QUEUE_SHARE":       "4",
		"LLM__BACKPRESSURE__QUEUE_CLAIM_TTL_S": "0.5",
		"LLM__BACKPRESSURE__QUEUE_LEASE_S":     "60",
		"LLM__FALLBACK__STALE_S":               "3600",
		"LLM__QUALITY__GUARD":                  "true",
		"LLM__QUALITY__MIN_CHARS":              "3",
		"LLM__BATCH_SIZE":                      " 64 ",

		"LLM__QWEN__1__BASE_URL":              " https://dashscope.example.com/compatible-mode/v1/ ",
		"LLM__QWEN__1__API_KEY":               secretKey,
		"LLM__QWEN__1__MODEL":                 "qwen-plus",
		"LLM__QWEN__1__TIMEOUT_S":             "150",
		"LLM__QWEN__1__MAX_CONCURRENCY":       "8",
		"LLM__QWEN__1__RPM":                   "60",
		"LLM__QWEN__1__TPM":                   "100000",
		"LLM__QWEN__1__EST_TOKENS":            "2000",
		"LLM__QWEN__1__TTFT_TIMEOUT_S":        "30",
		"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "7.5",
		"LLM__QWEN__1__ENABLE_THINKING":       "TRUE",
		"LLM__QWEN__1__MISSING_DONE":          "salvage",
		"LLM__QWEN__1__TRUST_ENV":             "0",
		"LLM__QWEN__1__PRIORITY":              "-1",
		"LLM__QWEN__1__WEIGHT":                "2.5",
		"LLM__QWEN__1__REGION":                "cn-east",
		"LLM__QWEN__1__EXTRA_BODY":            `{"top_k": 20, "seed": 12345678901234567890, "nested": {"a": [true, null]}}`,

		"LLM__QWEN__10__BASE_URL":        "http://10.0.0.1:8000/v1",
		"LLM__QWEN__10__API_KEY":         "NONE",
		"LLM__QWEN__10__MODEL":           "local",
		"LLM__QWEN__10__TIMEOUT_S":       "60",
		"LLM__QWEN__10__ENABLE_THINKING": "false",
		"LLM__QWEN__10__EST_TOKENS":      "100",

		"LLM__QWEN__2__BASE_URL":   "https://b.example.com/v1",
		"LLM__QWEN__2__API_KEY":    "sk-SECRET-2",
		"LLM__QWEN__2__MODEL":      "qwen-max",
		"LLM__QWEN__2__TIMEOUT_S":  "90",
		"LLM__QWEN__2__EST_TOKENS": "500",

		"LLM__DEEPSEEK__3__BASE_URL":   "https://api.deepseek.example/v1",
		"LLM__DEEPSEEK__3__API_KEY":    "sk-SECRET-3",
		"LLM__DEEPSEEK__3__MODEL":      "deepseek-chat",
		"LLM__DEEPSEEK__3__TIMEOUT_S":  "100",
		"LLM__DEEPSEEK__3__EST_TOKENS": "100",
	}
	got := mustLoad(t, "LLM", env)

	// EXTRA_BODY keeps numbers exact.
	body := got.Sources[1].ExtraBody
	if seed, ok := body["seed"].(json.Number); !ok || seed.String() != "12345678901234567890" {
		t.Fatalf("EXTRA_BODY seed = %#v, want the exact json.Number", body["seed"])
	}
	wantBody := map[string]any{
		"top_k":  json.Number("20"),
		"seed":   json.Number("12345678901234567890"),
		"nested": map[string]any{"a": []any{true, nil}},
	}

	want := Settings{
		Scope: "LLM",
		Sources: []core.SourceConfig{
			{
				Name: "deepseek_3", Provider: "deepseek", Index: 3,
				BaseURL: "https://api.deepseek.example/v1", APIKey: "sk-SECRET-3", Model: "deepseek-chat",
				Timeout: 100 * time.Second, EstTokens: 100,
				TTFTTimeout: 30 * time.Second, InterTokenTimeout: 15 * time.Second, // the default watchdog
				MissingDone: core.MissingDoneRetry, TrustEnv: true, Weight: 1,
			},
			{
				Name: "qwen_1", Provider: "qwen", Index: 1,
				BaseURL: "https://dashscope.example.com/compatible-mode/v1", APIKey: secretKey, Model: "qwen-plus",
				Timeout:           150 * time.Second,
				Limits:            core.Limits{MaxConcurrency: 8, RPM: 60, TPM: 100000},
				EstTokens:         2000,
				TTFTTimeout:       30 * time.Second,
				InterTokenTimeout: 7500 * time.Millisecond,
				EnableThinking:    ptr(true),
				MissingDone:       core.MissingDoneSalvage,
				TrustEnv:          false,
				Priority:          -1,
				Weight:            2.5,
				Region:            "cn-east",
				ExtraBody:         wantBody,
			},
			{
				Name: "qwen_2", Provider: "qwen", Index: 2,
				BaseURL: "https://b.example.com/v1", APIKey: "sk-SECRET-2", Model: "qwen-max",
				Timeout: 90 * time.Second, EstTokens: 500,
				TTFTTimeout: 30 * time.Second, InterTokenTimeout: 15 * time.Second,
				MissingDone: core.MissingDoneRetry, TrustEnv: true, Weight: 1,
			},
			{
				Name: "qwen_10", Provider: "qwen", Index: 10,
				BaseURL: "http://10.0.0.1:8000/v1", APIKey: "none", Model: "local",
				Timeout: 60 * time.Second, EstTokens: 100, EnableThinking: ptr(false),
				TTFTTimeout: 30 * time.Second, InterTokenTimeout: 15 * time.Second,
				MissingDone: core.MissingDoneRetry, TrustEnv: true, Weight: 1,
			},
		},
		Global:          core.Limits{MaxConcurrency: 16, RPM: 120, TPM: 200000},
		Selector:        core.SelectorLeastInflight,
		PreferredRegion: "cn-east",
		Retry:           core.RetrySettings{MaxAttempts: 5, BackoffBase: 500 * time.Millisecond, BackoffMax: 8 * time.Second, TierPatience: 3 * time.Second},
		Breaker: core.BreakerConfig{
			FailThreshold: 7, Cooldown: 15 * time.Second, MaxCooldown: 120 * time.Second,
			ProbeTTL: 200 * time.Second, MinCalls: 10, FailRate: 0.3, Window: 30 * time.Second,
			HalfOpenSuccesses: 2, TimeoutWeight: 0,
		},
		Backpressure: core.BackpressureSettings{StallWindow: 90 * time.Second, PollInterval: 100 * time.Millisecond,
			QueueShare: 4, QueueClaimTTL: 500 * time.Millisecond, QueueLease: time.Minute},
		QuotaFull:            core.QuotaFullFailFast,
		LimiterBackend:       "redis",
		BreakerBackend:       "redis",
		CacheBackend:         "memory",
		CacheNamespace:       "proj",
		CacheTTL:             604800 * time.Second,
		TelemetryBackend:     "sqlite",
		TelemetryContent:     core.TelemetryContentFull,
		TelemetrySQLitePath:  "logs/t.db",
		TelemetryPGDSN:       "postgres://u:SECRET@h/db",
		PricingPath:          "prices.json",
		StructuredMaxRetries: 0,
		LeaseTTL:             900500 * time.Millisecond,
		Fallback:             core.FallbackSettings{Stale: time.Hour},
		Quality:              core.QualitySettings{Guard: true, MinChars: 3},
		RedisURL:             "rediss://:SECRET@cache:6380/2",
		Extra:                map[string]string{"BATCH_SIZE": "64"},
	}
	if !reflect.DeepEqual(got, want) {
		gj, _ := json.MarshalIndent(got, "", " ")
		wj, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("full config:\n got %s\nwant %s", gj, wj)
	}
}

func TestLoadDerivedDefaults(t *testing.T) {
	t.Parallel()
	env := with(map[string]string{
		"LLM__QWEN__1__TTFT_TIMEOUT_S":        "90",
		"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "20",
		"LLM__ZHIPU__1__BASE_URL":             "https://z.example.com/v1",
		"LLM__ZHIPU__1__API_KEY":              "none",
		"LLM__ZHIPU__1__MODEL":                "glm",
		"LLM__ZHIPU__1__TIMEOUT_S":            "300",
	})
	s := mustLoad(t, "LLM", env)
	if s.Breaker.ProbeTTL != 300*time.Second {
		t.Errorf("ProbeTTL = %v, want the largest timeout 300s", s.Breaker.ProbeTTL)
	}
	if s.Backpressure.StallWindow != 90*time.Second {
		t.Errorf("StallWindow = %v, want max(60s, largest TTFT 90s)", s.Backpressure.StallWindow)
	}
	// Equal bounds are accepted.
	env["LLM__BREAKER__PROBE_TTL_S"] = "300"
	env["LLM__BACKPRESSURE__STALL_WINDOW_S"] = "90"
	env["PGW_LEASE_TTL_S"] = "300"
	mustLoad(t, "LLM", env)
}

func TestLoadFlatFallbacks(t *testing.T) {
	t.Parallel()
	flat := map[string]string{
		"LLM_MAX_RETRIES":               "4",
		"LLM_RETRY_BASE_DELAY":          "2.0",
		"LLM_RETRY_MAX_DELAY":           "40",
		"LLM_CIRCUIT_BREAKER_THRESHOLD": "9",
		"LLM_CIRCUIT_BREAKER_COOLDOWN":  "60",
		"LLM_TIMEOUT":                   "45",
		"LLM_TTFT_TIMEOUT":              "20",
		"LLM_INTER_TOKEN_TIMEOUT":       "4",
	}

	t.Run("flat keys fill in", func(t *testing.T) {
		t.Parallel()
		s := mustLoad(t, "LLM", with(flat, "LLM__QWEN__1__TIMEOUT_S"))
		if got := s.Retry; got != (core.RetrySettings{MaxAttempts: 4, BackoffBase: 2 * time.Second, BackoffMax: 40 * time.Second, TierPatience: 3 * time.Second}) {
			t.Errorf("Retry = %+v", got)
		}
		if s.Breaker.FailThreshold != 9 || s.Breaker.Cooldown != 60*time.Second {
			t.Errorf("Breaker threshold/cooldown = %d/%v", s.Breaker.FailThreshold, s.Breaker.Cooldown)
		}
		src := s.Sources[0]
		if src.Timeout != 45*time.Second || src.TTFTTimeout != 20*time.Second || src.InterTokenTimeout != 4*time.Second {
			t.Errorf("source timeouts = %v/%v/%v", src.Timeout, src.TTFTTimeout, src.InterTokenTimeout)
		}
		if s.Breaker.ProbeTTL != 45*time.Second {
			t.Errorf("ProbeTTL = %v, want the flat timeout", s.Breaker.ProbeTTL)
		}
	})

	t.Run("scope and source keys win", func(t *testing.T) {
		t.Parallel()
		env := with(flat)
		for k, v := range map[string]string{
			"LLM__RETRY__MAX_ATTEMPTS":            "2",
			"LLM__RETRY__BACKOFF_BASE_S":          "0.25",
			"LLM__RETRY__BACKOFF_MAX_S":           "3",
			"LLM__BREAKER__FAIL_THRESHOLD":        "3",
			"LLM__BREAKER__COOLDOWN_S":            "10",
			"LLM__QWEN__1__TTFT_TIMEOUT_S":        "50",
			"LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S": "6",
		} {
			env[k] = v
		}
		s := mustLoad(t, "LLM", env)
		if got := s.Retry; got != (core.RetrySettings{MaxAttempts: 2, BackoffBase: 250 * time.Millisecond, BackoffMax: 3 * time.Second, TierPatience: 3 * time.Second}) {
			t.Errorf("Retry = %+v", got)
		}
		if s.Breaker.FailThreshold != 3 || s.Breaker.Cooldown != 10*time.Second {
			t.Errorf("Breaker threshold/cooldown = %d/%v", s.Breaker.FailThreshold, s.Breaker.Cooldown)
		}
		src := s.Sources[0]
		if src.Timeout != 120*time.Second || src.TTFTTimeout != 50*time.Second || src.InterTokenTimeout != 6*time.Second {
			t.Errorf("source timeouts = %v/%v/%v", src.Timeout, src.TTFTTimeout, src.InterTokenTimeout)
		}
	})

	t.Run("source key and flat key mix in the watchdog pair", func(t *testing.T) {
		t.Parallel()
		s := mustLoad(t, "LLM", with(map[string]string{"LLM_INTER_TOKEN_TIMEOUT": "3", "LLM__QWEN__1__TTFT_TIMEOUT_S": "15"}))
		if src := s.Sources[0]; src.TTFTTimeout != 15*time.Second || src.InterTokenTimeout != 3*time.Second {
			t.Errorf("watchdog = %v/%v", src.TTFTTimeout, src.InterTokenTimeout)
		}
	})

	t.Run("flat keys serve every scope", func(t *testing.T) {
		t.Parallel()
		env := with(flat)
		for k, v := range map[string]string{
			"EMBED__QWEN__1__BASE_URL": "https://e.example.com/v1",
			"EMBED__QWEN__1__API_KEY":  secretKey,
			"EMBED__QWEN__1__MODEL":    "text-embedding-v3",
		} {
			env[k] = v
		}
		s := mustLoad(t, "EMBED", env)
		if s.Retry.MaxAttempts != 4 || s.Sources[0].Timeout != 45*time.Second {
			t.Errorf("EMBED did not inherit the flat keys: %+v", s)
		}
	})
}

func TestLoadExtra(t *testing.T) {
	t.Parallel()
	env := with(map[string]string{
		"LLM__BATCH_SIZE":    "64",
		"LLM__NORMALIZE":     " true ",
		"LLM__EXPECTED_DIM":  "1024",
		"LLM__SELECTOR":      "round_robin", // known: not in Extra
		"LLMX__BATCH_SIZE":   "1",           // another scope
		"EMBED__BATCH_SIZE":  "2",           // another scope
		"LLM__X_MINE":        " mine ",      // the escape for the user's own code
		"PGW_X_OTHER":        "x",           // the escape for other software
		"UNRELATED_VARIABLE": "x",
	})
	s := mustLoad(t, "LLM", env)
	want := map[string]string{"BATCH_SIZE": "64", "NORMALIZE": "true", "EXPECTED_DIM": "1024", "X_MINE": "mine"}
	if !reflect.DeepEqual(s.Extra, want) {
		t.Errorf("Extra = %v, want %v", s.Extra, want)
	}
	if s.Selector != core.SelectorRoundRobin {
		t.Errorf("Selector = %q", s.Selector)
	}
}

func TestLoadTwoScopes(t *testing.T) {
	t.Parallel()
	env := with(map[string]string{
		"LLM__SELECTOR":               "round_robin",
		"LLM__RETRY__MAX_ATTEMPTS":    "6",
		"EMBED__OPENAI__2__BASE_URL":  "https://api.openai.example/v1/",
		"EMBED__OPENAI__2__API_KEY":   "sk-SECRET-embed",
		"EMBED__OPENAI__2__MODEL":     "text-embedding-3-small",
		"EMBED__OPENAI__2__TIMEOUT_S": "30",
		"EMBED__BATCH_SIZE":           "64",
		"EMBED__SELECTOR":             "cost_aware",
		// A broken key of another scope must not disturb either.
		"OCR__MONKEY__1__TIMEOUT_S": "oops",
	})
	llm := mustLoad(t, "LLM", env)
	embed := mustLoad(t, "embed", env)

	if len(llm.Sources) != 1 || llm.Sources[0].Name != "qwen_1" || llm.Selector != core.SelectorRoundRobin ||
		llm.Retry.MaxAttempts != 6 || len(llm.Extra) != 0 {
		t.Errorf("LLM = %+v", llm)
	}
	if embed.Scope != "EMBED" || len(embed.Sources) != 1 || embed.Sources[0].Name != "openai_2" ||
		embed.Sources[0].Index != 2 || embed.Sources[0].BaseURL != "https://api.openai.example/v1" ||
		embed.Selector != core.SelectorCostAware || embed.Retry.MaxAttempts != 3 ||
		!reflect.DeepEqual(embed.Extra, map[string]string{"BATCH_SIZE": "64"}) {
		t.Errorf("EMBED = %+v", embed)
	}
	// Assembly keys are shared.
	if llm.LimiterBackend != "memory" || embed.LimiterBackend != "memory" {
		t.Error("assembly keys not shared")
	}
	// The broken OCR key is reported only when OCR is loaded.
	_, err := Load("OCR", env)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != "OCR__MONKEY__1__BASE_URL" {
		t.Errorf("Load(OCR) = %v, want a missing OCR__MONKEY__1__BASE_URL", err)
	}
}

func TestLoadValueForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key, val string
		check    func(Settings) bool
	}{
		{"LLM__QWEN__1__TIMEOUT_S", ".5", func(s Settings) bool { return s.Sources[0].Timeout == 500*time.Millisecond }},
		{"LLM__QWEN__1__TIMEOUT_S", "+2.", func(s Settings) bool { return s.Sources[0].Timeout == 2*time.Second }},
		{"LLM__QWEN__1__TIMEOUT_S", "\t 7 \n", func(s Settings) bool { return s.Sources[0].Timeout == 7*time.Second }},
		{"LLM__QWEN__1__TRUST_ENV", "False", func(s Settings) bool { return !s.Sources[0].TrustEnv }},
		{"LLM__QWEN__1__TRUST_ENV", "1", func(s Settings) bool { return s.Sources[0].TrustEnv }},
		{"LLM__QWEN__1__ENABLE_THINKING", "0", func(s Settings) bool {
			return s.Sources[0].EnableThinking != nil && !*s.Sources[0].EnableThinking
		}},
		{"LLM__QWEN__1__RPM", "0", func(s Settings) bool { return s.Sources[0].Limits.RPM == 0 }},
		{"LLM__QWEN__1__RPM", "+30", func(s Settings) bool { return s.Sources[0].Limits.RPM == 30 }},
		{"LLM__QWEN__1__BASE_URL", "HTTPS://Host.example:8443/v1///", func(s Settings) bool {
			return s.Sources[0].BaseURL == "HTTPS://Host.example:8443/v1"
		}},
		{"LLM__QWEN__1__API_KEY", "None", func(s Settings) bool { return s.Sources[0].APIKey == "none" }},
		{"LLM__QWEN__1__REGION", "  ", func(s Settings) bool { return s.Sources[0].Region == "" }},
		{"LLM__QWEN__1__EXTRA_BODY", " {} ", func(s Settings) bool {
			return s.Sources[0].ExtraBody != nil && len(s.Sources[0].ExtraBody) == 0
		}},
		{"LLM__SELECTOR", "Health_Aware", func(s Settings) bool { return s.Selector == core.SelectorHealthAware }},
		{"LLM__BREAKER__FAIL_RATE", "1", func(s Settings) bool { return s.Breaker.FailRate == 1 }},
		{"LLM__BREAKER__TIMEOUT_WEIGHT", "0.25", func(s Settings) bool { return s.Breaker.TimeoutWeight == 0.25 }},
		{"LLM__RETRY__BACKOFF_BASE_S", "0", func(s Settings) bool { return s.Retry.BackoffBase == 0 }},
		{"REDIS_URL", "not a url at all", func(s Settings) bool { return s.RedisURL == "not a url at all" }}, // unused: not validated
		{"PGW_PRICING_PATH", " ", func(s Settings) bool { return s.PricingPath == "" }},
	}
	for _, tc := range cases {
		t.Run(tc.key+"="+tc.val, func(t *testing.T) {
			t.Parallel()
			s := mustLoad(t, "LLM", with(map[string]string{tc.key: tc.val}))
			if !tc.check(s) {
				t.Errorf("%s=%q parsed wrongly: %+v", tc.key, tc.val, s)
			}
		})
	}

	t.Run("redis url forms", func(t *testing.T) {
		t.Parallel()
		for _, u := range []string{"redis://localhost:6379/0", "rediss://:pw@host:6380", "unix:///run/redis.sock"} {
			s := mustLoad(t, "LLM", with(map[string]string{"PGW_LIMITER_BACKEND": "redis", "REDIS_URL": u}))
			if s.RedisURL != u {
				t.Errorf("RedisURL = %q, want %q", s.RedisURL, u)
			}
		}
	})
}

func TestLoadDoesNotMutateInput(t *testing.T) {
	t.Parallel()
	env := base()
	before := len(env)
	mustLoad(t, "LLM", env)
	if len(env) != before {
		t.Error("Load changed its input map")
	}
}

func TestLoadMaxCooldownFollowsALongerCooldown(t *testing.T) {
	t.Parallel()
	e := base()
	e["LLM_CIRCUIT_BREAKER_COOLDOWN"] = "600"
	s := mustLoad(t, "LLM", e)
	if s.Breaker.Cooldown != 600*time.Second || s.Breaker.MaxCooldown != 600*time.Second {
		t.Errorf("breaker = %+v, want a 600 s cooldown capped at 600 s (no doubling)", s.Breaker)
	}
}

func TestLoadWatchdogDefaultsAndSwitchOff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		timeout, ttft, inter string
		want                 [2]time.Duration
	}{
		{"120", "", "", [2]time.Duration{30 * time.Second, 15 * time.Second}},
		{"20", "", "", [2]time.Duration{10 * time.Second, 5 * time.Second}},
		{"1", "", "", [2]time.Duration{500 * time.Millisecond, 250 * time.Millisecond}},
		{"20", "0", "0", [2]time.Duration{0, 0}},
		{"20", "8", "2", [2]time.Duration{8 * time.Second, 2 * time.Second}},
	}
	for _, tc := range tests {
		e := base()
		e["LLM__QWEN__1__TIMEOUT_S"] = tc.timeout
		if tc.ttft != "" {
			e["LLM__QWEN__1__TTFT_TIMEOUT_S"], e["LLM__QWEN__1__INTER_TOKEN_TIMEOUT_S"] = tc.ttft, tc.inter
		}
		src := mustLoad(t, "LLM", e).Sources[0]
		if got := [2]time.Duration{src.TTFTTimeout, src.InterTokenTimeout}; got != tc.want {
			t.Errorf("TIMEOUT_S=%s TTFT=%q INTER=%q: watchdog %v, want %v", tc.timeout, tc.ttft, tc.inter, got, tc.want)
		}
	}
}

func TestLoadBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		set        map[string]string
		want       core.Budget
		wantErrKey string
	}{
		{name: "none", set: nil},
		{name: "daily by default", set: map[string]string{"LLM__BUDGET__USD": "50"},
			want: core.Budget{Key: "scope:LLM", Limit: 50_000_000, Window: 24 * time.Hour}},
		{name: "hourly, cents", set: map[string]string{"LLM__BUDGET__USD": "0.25", "LLM__BUDGET__WINDOW_S": "3600"},
			want: core.Budget{Key: "scope:LLM", Limit: 250_000, Window: time.Hour}},
		{name: "window without budget", set: map[string]string{"LLM__BUDGET__WINDOW_S": "60"}, wantErrKey: "LLM__BUDGET__WINDOW_S"},
		{name: "zero", set: map[string]string{"LLM__BUDGET__USD": "0"}, wantErrKey: "LLM__BUDGET__USD"},
		{name: "negative", set: map[string]string{"LLM__BUDGET__USD": "-1"}, wantErrKey: "LLM__BUDGET__USD"},
		{name: "below a micro-USD", set: map[string]string{"LLM__BUDGET__USD": "0.0000001"}, wantErrKey: "LLM__BUDGET__USD"},
		{name: "not a number", set: map[string]string{"LLM__BUDGET__USD": "ten"}, wantErrKey: "LLM__BUDGET__USD"},
		{name: "huge", set: map[string]string{"LLM__BUDGET__USD": "1e13"}, wantErrKey: "LLM__BUDGET__USD"},
		// The backends keep at most 2^53 micro-USD (about 9.007 billion USD).
		{name: "the largest", set: map[string]string{"LLM__BUDGET__USD": "9000000000"},
			want: core.Budget{Key: "scope:LLM", Limit: 9e15, Window: 24 * time.Hour}},
		{name: "beyond what a limiter keeps", set: map[string]string{"LLM__BUDGET__USD": "10000000000"}, wantErrKey: "LLM__BUDGET__USD"},
		{name: "window zero", set: map[string]string{"LLM__BUDGET__USD": "1", "LLM__BUDGET__WINDOW_S": "0"}, wantErrKey: "LLM__BUDGET__WINDOW_S"},
		{name: "window fraction", set: map[string]string{"LLM__BUDGET__USD": "1", "LLM__BUDGET__WINDOW_S": "1.5"}, wantErrKey: "LLM__BUDGET__WINDOW_S"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Load("LLM", with(tt.set))
			if tt.wantErrKey != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.Key != tt.wantErrKey {
					t.Fatalf("Load = %v, want an error naming %s", err, tt.wantErrKey)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Budget != tt.want {
				t.Fatalf("Budget = %+v, want %+v", s.Budget, tt.want)
			}
		})
	}
}

// TestLoadSourceBreaker: a source's own breaker keys land in its
// SourceConfig.Breaker; unset, they are zero (the scope's values).
func TestLoadSourceBreaker(t *testing.T) {
	t.Parallel()
	const p = "LLM__QWEN__1__BREAKER__"
	tests := []struct {
		name string
		set  map[string]string
		want core.BreakerOverride
	}{
		{name: "unset", want: core.BreakerOverride{}},
		{name: "threshold", set: map[string]string{p + "FAIL_THRESHOLD": "1"}, want: core.BreakerOverride{FailThreshold: 1}},
		{name: "cooldown longer than the scope's cap", set: map[string]string{p + "COOLDOWN_S": "40"},
			want: core.BreakerOverride{Cooldown: 40 * time.Second}},
		{name: "cap only, above the scope's cooldown", set: map[string]string{p + "MAX_COOLDOWN_S": "5"},
			want: core.BreakerOverride{MaxCooldown: 5 * time.Second}},
		{name: "all three", set: map[string]string{p + "FAIL_THRESHOLD": " 12 ", p + "COOLDOWN_S": "0.5", p + "MAX_COOLDOWN_S": "0.5"},
			want: core.BreakerOverride{FailThreshold: 12, Cooldown: 500 * time.Millisecond, MaxCooldown: 500 * time.Millisecond}},
		{name: "cap above a longer scope cooldown", set: map[string]string{"LLM__BREAKER__COOLDOWN_S": "20", p + "COOLDOWN_S": "1", p + "MAX_COOLDOWN_S": "2"},
			want: core.BreakerOverride{Cooldown: time.Second, MaxCooldown: 2 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustLoad(t, "LLM", with(tt.set))
			if got := s.Sources[0].Breaker; got != tt.want {
				t.Errorf("Breaker = %+v, want %+v", got, tt.want)
			}
		})
	}
	// The scope's breaker and the other sources are untouched.
	env := with(map[string]string{p + "FAIL_THRESHOLD": "1", p + "COOLDOWN_S": "40",
		"LLM__ZHIPU__1__BASE_URL": "https://z.example.com/v1", "LLM__ZHIPU__1__API_KEY": "none",
		"LLM__ZHIPU__1__MODEL": "glm", "LLM__ZHIPU__1__TIMEOUT_S": "60"})
	s := mustLoad(t, "LLM", env)
	if s.Breaker.FailThreshold != 5 || s.Breaker.Cooldown != 5*time.Second || s.Breaker.MaxCooldown != 8*time.Second {
		t.Errorf("scope breaker = %+v, want the defaults", s.Breaker)
	}
	if s.Sources[1].Name != "zhipu_1" || s.Sources[1].Breaker != (core.BreakerOverride{}) {
		t.Errorf("zhipu_1 = %+v, want no overrides", s.Sources[1])
	}
}
