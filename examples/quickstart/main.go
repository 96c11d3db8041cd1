// Command quickstart is the offline demo of PolyGateway: it starts three
// local fake upstreams — one failing (HTTP 503), one slow (its first token
// comes after 3 s, against a 1 s TTFT timeout) and one healthy fallback — and
// makes governed calls against them, printing per call the source that
// answered, the attempts, cache hits and latency; then the breaker state of
// each source and the telemetry rows.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	failing := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.ServerError(503)))
	defer failing.Close()
	slow := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.OK().WithFirstTokenDelay(3 * time.Second)))
	defer slow.Close()
	healthy := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.OK().WithLatency(30 * time.Millisecond).WithModel("fallback-model")))
	defer healthy.Close()

	env := map[string]string{
		// Tier 0: two sources that will misbehave.
		"LLM__OPENAI__1__BASE_URL": failing.URL(), "LLM__OPENAI__1__API_KEY": "sk-demo-1",
		"LLM__OPENAI__1__MODEL": "primary-model", "LLM__OPENAI__1__TIMEOUT_S": "5",
		"LLM__VLLM__2__BASE_URL": slow.URL(), "LLM__VLLM__2__API_KEY": "none",
		"LLM__VLLM__2__MODEL": "primary-model", "LLM__VLLM__2__TIMEOUT_S": "5",
		"LLM__VLLM__2__TTFT_TIMEOUT_S": "1", "LLM__VLLM__2__INTER_TOKEN_TIMEOUT_S": "0.5",
		// Tier 1: the healthy fallback.
		"LLM__DEEPSEEK__3__BASE_URL": healthy.URL(), "LLM__DEEPSEEK__3__API_KEY": "sk-demo-3",
		"LLM__DEEPSEEK__3__MODEL": "fallback-model", "LLM__DEEPSEEK__3__TIMEOUT_S": "5",
		"LLM__DEEPSEEK__3__PRIORITY": "1",

		"LLM__RETRY__MAX_ATTEMPTS": "4", "LLM__RETRY__BACKOFF_BASE_S": "0.05", "LLM__RETRY__BACKOFF_MAX_S": "0.2",
		"LLM__BREAKER__FAIL_THRESHOLD": "2", "LLM__BREAKER__COOLDOWN_S": "30",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "quickstart", "PGW_CACHE_TTL_S": "600",
		"PGW_TELEMETRY_BACKEND": "none",
	}
	sink := telemetry.NewMemory()
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithTelemetry(sink),
		polygateway.WithPricing(polygateway.PricingTable{"fallback-model": {InputPer1M: 0.5, OutputPer1M: 2}}))
	if err != nil {
		return err
	}
	defer client.Close()

	ctx := context.Background()
	prompts := []string{
		"What is a circuit breaker?", "Why jitter a backoff?", "What is a half-open probe?",
		"What does 429 mean?", "Why cache answers?", "What is a circuit breaker?",
	}
	fmt.Println("== governed calls")
	fmt.Printf("%-3s %-28s %-12s %-5s %-9s %s\n", "#", "prompt", "source", "cache", "latency", "attempts")
	for i, p := range prompts {
		resp, err := client.Chat(ctx, []polygateway.Message{polygateway.User(p)})
		if err != nil {
			fmt.Printf("%-3d %-28s error: %v\n", i+1, p, err)
			continue
		}
		fmt.Printf("%-3d %-28s %-12s %-5t %-9s %s\n", i+1, p, resp.SourceName, resp.CacheHit,
			resp.Latency.Round(time.Millisecond), strings.Join(resp.Attempts, " → "))
	}

	fmt.Println("\n== sources")
	fmt.Printf("%-12s %-5s %-10s %-6s %s\n", "source", "tier", "breaker", "health", "requests seen")
	seen := map[string]int{"openai_1": failing.Requests(), "vllm_2": slow.Requests(), "deepseek_3": healthy.Requests()}
	for _, s := range client.Sources(ctx) {
		fmt.Printf("%-12s %-5d %-10s %-6.2f %d\n", s.Name, s.Priority, s.Breaker.State, s.Health, seen[s.Name])
	}

	fmt.Println("\n== telemetry (one row per call)")
	fmt.Printf("%-10s %-12s %-5s %-7s %-9s %s\n", "call_id", "source", "cache", "tokens", "cost", "error")
	for _, r := range sink.Records() {
		cost := "-"
		if r.Cost != nil {
			cost = fmt.Sprintf("%.6f", *r.Cost)
		}
		fmt.Printf("%-10s %-12s %-5t %-7d %-9s %s\n", r.CallID[:8], r.SourceName, r.CacheHit,
			r.PromptTokens+r.CompletionTokens, cost, r.Error)
	}
	return nil
}
