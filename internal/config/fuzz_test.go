package config

import (
	"errors"
	"strings"
	"testing"
)

// FuzzLoad: Load never panics on any keys and values; it returns settings
// or one *Error naming a key, and a suggestion never names the key itself.
func FuzzLoad(f *testing.F) {
	for _, s := range [][4]string{
		{"LLM__SELECTR", "round_robin", "PGW_ALLOW_KEYS", "LLM_MODEL,X*"},
		{"PGW_LEASE_TTL", "1", "LLM_TIMEOUTS", "2"},
		{"LLM__QWEN__1__TIMEOUT", "5", "LLM__X_A", "b"},
		{"LLM__RETRI__MAX_ATTEMPTS", "3", "LLM_SELECTOR", "x"},
		{"PGW_ALLOW_KEYS", "*", "LLM__", ""},
		{"LLM__QWEN__1__EXTRA_BODY", `{"a":1}`, "LLM__GLOBAL__POOL", "p"},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		env := with(map[string]string{k1: v1, k2: v2})
		_, err := Load("LLM", env)
		if err == nil {
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || ce.Key == "" {
			t.Fatalf("error %v is not an *Error naming a key", err)
		}
		if strings.Contains(ce.Problem, "did you mean "+ce.Key+"?") {
			t.Fatalf("the suggestion is the key itself: %v", err)
		}
		_ = CheckKeys(env)
	})
}
