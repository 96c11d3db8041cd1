package config

import (
	"fmt"
	"maps"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// secretKey is the API key of every test config; no error may echo it. Every
// other secret planted in the tests contains "SECRET" too.
const secretKey = "sk-SECRET-0123456789abcdef"

// base is a minimal valid LLM scope.
func base() map[string]string {
	return map[string]string{
		"PGW_LIMITER_BACKEND":     "memory",
		"PGW_BREAKER_BACKEND":     "memory",
		"PGW_CACHE_BACKEND":       "none",
		"PGW_TELEMETRY_BACKEND":   "none",
		"LLM__QWEN__1__BASE_URL":  "https://api.example.com/v1",
		"LLM__QWEN__1__API_KEY":   secretKey,
		"LLM__QWEN__1__MODEL":     "qwen-plus",
		"LLM__QWEN__1__TIMEOUT_S": "120",
	}
}

// with returns base() changed by set (an empty-string key deletes nothing;
// use del for deletions).
func with(set map[string]string, del ...string) map[string]string {
	env := base()
	maps.Copy(env, set)
	for _, k := range del {
		delete(env, k)
	}
	return env
}

// mustLoad loads scope from env and checks that what Load gives passes
// Validate unchanged (so every load test is also a differential test of
// Validate against the loader).
func mustLoad(t *testing.T, scope string, env map[string]string) Settings {
	t.Helper()
	s, err := Load(scope, env)
	if err != nil {
		t.Fatalf("Load(%q): %v", scope, err)
	}
	before := fmt.Sprintf("%#v", s)
	if err := Validate(s); err != nil {
		t.Fatalf("Validate refuses what Load(%q) gives: %v", scope, err)
	}
	if after := fmt.Sprintf("%#v", s); after != before {
		t.Fatalf("Validate changed the settings:\n%s\n%s", before, after)
	}
	return s
}

// Settings shortens the test code.
type Settings = core.GatewaySettings
