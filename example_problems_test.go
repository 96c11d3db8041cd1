package polygateway_test

import (
	"errors"
	"fmt"

	"github.com/polygateway/polygateway"
)

// One error names every problem of a configuration, each with the key
// meant when a name is close.
func ExampleConfigError_Problems() {
	_, err := polygateway.LoadSettings("LLM", map[string]string{
		"LLM__OPENAI__1__BASE_URL": "https://api.example.com/v1",
		"LLM__OPENAI__1__API_KEY":  "sk-example",
		"LLM__OPENAI__1__MODEL":    "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT":  "30",
		"PGW_LIMITER_BACKEND":      "memroy",
		"PGW_BREAKER_BACKEND":      "memory",
		"PGW_CACHE_BACKEND":        "none",
		"PGW_TELEMETRY_BACKEND":    "none",
	})
	var cfgErr *polygateway.ConfigError
	if errors.As(err, &cfgErr) {
		for _, p := range cfgErr.Problems() {
			fmt.Println(p.Key)
		}
	}
	// Output:
	// LLM__OPENAI__1__TIMEOUT
	// PGW_LIMITER_BACKEND
	// LLM__OPENAI__1__TIMEOUT_S
}
