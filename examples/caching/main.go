// Command caching is the program of docs/howto-caching.md: the response
// cache against a fake provider on localhost — hits, what changes the key
// (salt, namespace, parameters), what is never stored, and a stale entry
// standing in while the provider is down.
//
//	go run ./examples/caching
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net/http"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	provider := fakellm.New(func(req fakellm.Request) string { return "Answer to: " + req.LastUser() })
	defer provider.Close()

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__OPENAI__1__BASE_URL":   provider.BaseURL(),
		"LLM__OPENAI__1__API_KEY":    "sk-example",
		"LLM__OPENAI__1__MODEL":      "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S":  "30",
		"LLM__RETRY__MAX_ATTEMPTS":   "2",
		"LLM__RETRY__BACKOFF_BASE_S": "0.01",

		"PGW_LIMITER_BACKEND":   "memory",
		"PGW_BREAKER_BACKEND":   "memory",
		"PGW_TELEMETRY_BACKEND": "none",

		"PGW_CACHE_BACKEND":      "memory",    // or redis, shared by every process
		"PGW_CACHE_NAMESPACE":    "docs-demo", // required: keeps projects apart
		"PGW_CACHE_TTL_S":        "1",         // a short TTL, to see it expire
		"LLM__FALLBACK__STALE_S": "3600",      // keep expired answers one more hour, for outages
	}), polygateway.WithPricing(polygateway.PricingTable{
		"gpt-4o-mini": {InputPer1M: 0.15, OutputPer1M: 0.60},
	}))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	question := []polygateway.Message{polygateway.User("What is a circuit breaker?")}

	ask := func(label string, msgs []polygateway.Message, opts ...polygateway.CallOption) {
		resp, err := client.Chat(ctx, msgs, opts...)
		if err != nil {
			fmt.Printf("%-30s error: %v\n", label, err)
			return
		}
		cost := "nil"
		if resp.Cost != nil {
			cost = fmt.Sprintf("%.7f", *resp.Cost)
		}
		fmt.Printf("%-30s hit=%-5t degraded=%-5t cost=%s upstream requests so far=%d\n",
			label, resp.CacheHit, resp.Degraded, cost, provider.Requests())
	}

	ask("first call", question)
	ask("same call again", question)
	ask("new salt", question, polygateway.WithCacheSalt("sample-2"))
	ask("other namespace", question, polygateway.WithCacheNamespace("tenant-b"))
	ask("other parameters", question, polygateway.WithParams(map[string]any{"temperature": 0.9}))

	// A failed call is never stored: the same question asks again later.
	provider.Fail(http.StatusServiceUnavailable, "", "overloaded", nil)
	other := []polygateway.Message{polygateway.User("What is a half-open probe?")}
	ask("other question, provider down", other)
	provider.Recover()
	ask("other question, provider back", other)

	// Past its TTL an entry is no longer a hit: the call goes upstream and,
	// when it fails, the expired entry stands in, marked degraded.
	time.Sleep(1100 * time.Millisecond)
	provider.Fail(http.StatusServiceUnavailable, "", "overloaded", nil)
	ask("expired entry, provider down", question)

	// Without an entry there is nothing to stand in: the error comes back.
	_, err = client.Chat(ctx, []polygateway.Message{polygateway.User("Never asked before")})
	var unavailable *polygateway.GatewayUnavailableError
	if errors.As(err, &unavailable) {
		fmt.Println("no entry at all, provider down: unavailable,", unavailable.Reason)
	}
	return nil
}
