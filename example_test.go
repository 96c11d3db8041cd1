package polygateway_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// A client for the scope LLM with one source, configured from a map (FromEnv
// reads .env and the process environment the same way).
func ExampleFromEnv() {
	upstream := fu.New(fu.WithBehavior(fu.OK().WithTokens(3)))
	defer upstream.Close()

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__OPENAI__1__BASE_URL":  upstream.URL(),
		"LLM__OPENAI__1__API_KEY":   "sk-example",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "none",
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	resp, err := client.Chat(context.Background(), []polygateway.Message{
		polygateway.System("Answer briefly."),
		polygateway.User("Count to three."),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(resp.Content)
	fmt.Println(resp.SourceName, resp.Attempts, resp.UsageSource)
	// Output:
	// tok0 tok1 tok2
	// openai_1 [openai_1] measured
}

// A missing required key is an error at assembly that names it.
func ExampleLoadSettings() {
	_, err := polygateway.LoadSettings("LLM", map[string]string{
		"LLM__OPENAI__1__BASE_URL":  "https://api.example.com/v1",
		"LLM__OPENAI__1__API_KEY":   "sk-example",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "none",
	})
	var cfgErr *polygateway.ConfigError
	if errors.As(err, &cfgErr) {
		fmt.Println(cfgErr.Key)
	}
	// Output:
	// LLM__OPENAI__1__MODEL
}

// When every source is down the caller gets a GatewayUnavailableError with the
// reason per source, and can reschedule the task after RetryAfter.
func ExampleGatewayUnavailableError() {
	upstream := fu.New(fu.WithBehavior(fu.BadKey()))
	defer upstream.Close()

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__OPENAI__1__BASE_URL":  upstream.URL(),
		"LLM__OPENAI__1__API_KEY":   "sk-revoked",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
		"LLM__BREAKER__COOLDOWN_S":  "60",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "none",
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	_, err = client.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")})
	var unavailable *polygateway.GatewayUnavailableError
	if errors.As(err, &unavailable) {
		fmt.Println(unavailable.Reason, unavailable.PerSource["openai_1"])
		fmt.Println(errors.Is(err, polygateway.ErrCircuitOpen), unavailable.RetryAfter > 0)
	}
	// Output:
	// circuit_open source_dead
	// true true
}
