// Command multisource is the program of docs/howto-multi-source.md: one
// scope with four sources in two tiers and two regions, against fake
// providers on localhost. It makes calls while the sources fail one group
// after the other and prints, per phase, which sources answered and how
// many attempts the calls took.
//
//	go run ./examples/multisource [-selector health_aware|round_robin|least_inflight|cost_aware]
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	selector := flag.String("selector", "health_aware", "the scope's selector")
	flag.Parse()

	deepseek1, deepseek2 := fakellm.New(nil), fakellm.New(nil)
	qwen3, openai4 := fakellm.New(nil), fakellm.New(nil)
	defer func() {
		for _, s := range []*fakellm.Server{deepseek1, deepseek2, qwen3, openai4} {
			s.Close()
		}
	}()

	env := map[string]string{
		// Tier 0 in the preferred region: two accounts, three quarters of
		// the traffic to the first.
		"LLM__DEEPSEEK__1__BASE_URL":  deepseek1.BaseURL(),
		"LLM__DEEPSEEK__1__API_KEY":   "sk-account-a",
		"LLM__DEEPSEEK__1__MODEL":     "deepseek-chat",
		"LLM__DEEPSEEK__1__TIMEOUT_S": "60",
		"LLM__DEEPSEEK__1__WEIGHT":    "3",
		"LLM__DEEPSEEK__1__REGION":    "cn-east",

		"LLM__DEEPSEEK__2__BASE_URL":  deepseek2.BaseURL(),
		"LLM__DEEPSEEK__2__API_KEY":   "sk-account-b",
		"LLM__DEEPSEEK__2__MODEL":     "deepseek-chat",
		"LLM__DEEPSEEK__2__TIMEOUT_S": "60",
		"LLM__DEEPSEEK__2__WEIGHT":    "1",
		"LLM__DEEPSEEK__2__REGION":    "cn-east",

		// Tier 1 in the preferred region: used when tier 0 has nothing to offer.
		"LLM__QWEN__3__BASE_URL":  qwen3.BaseURL(),
		"LLM__QWEN__3__API_KEY":   "sk-account-c",
		"LLM__QWEN__3__MODEL":     "qwen-plus",
		"LLM__QWEN__3__TIMEOUT_S": "60",
		"LLM__QWEN__3__PRIORITY":  "1",
		"LLM__QWEN__3__REGION":    "cn-east",

		// Another region: after every source of the preferred region.
		"LLM__OPENAI__4__BASE_URL":  openai4.BaseURL(),
		"LLM__OPENAI__4__API_KEY":   "sk-account-d",
		"LLM__OPENAI__4__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__4__TIMEOUT_S": "60",
		"LLM__OPENAI__4__REGION":    "us-west",

		"LLM__PREFERRED_REGION":      "cn-east",
		"LLM__SELECTOR":              *selector,
		"LLM__RETRY__MAX_ATTEMPTS":   "4",
		"LLM__RETRY__BACKOFF_BASE_S": "0.01",
		"LLM__RETRY__BACKOFF_MAX_S":  "0.05",
	}
	maps.Copy(env, map[string]string{
		"PGW_LIMITER_BACKEND":   "memory",
		"PGW_BREAKER_BACKEND":   "memory",
		"PGW_CACHE_BACKEND":     "none",
		"PGW_TELEMETRY_BACKEND": "none",
	})
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	phase(ctx, client, "all healthy", 200)

	deepseek1.Fail(http.StatusServiceUnavailable, "", "overloaded", nil)
	deepseek2.Fail(http.StatusServiceUnavailable, "", "overloaded", nil)
	phase(ctx, client, "tier 0 down (503)", 40)

	qwen3.Fail(http.StatusServiceUnavailable, "", "overloaded", nil)
	phase(ctx, client, "the whole preferred region down", 40)

	fmt.Println("\n== sources")
	for _, s := range client.Sources(ctx) {
		fmt.Printf("%-10s region %-7s tier %d weight %.0f  breaker %-9s health %.2f\n",
			s.Name, s.Region, s.Priority, s.Weight, s.Breaker.State, s.Health)
	}
	return nil
}

// phase makes n calls one after another and prints who answered them and
// how many attempts they took.
func phase(ctx context.Context, client *polygateway.GatewayClient, title string, n int) {
	answered := map[string]int{}
	attempts := map[int]int{}
	failed := 0
	for range n {
		resp, err := client.Chat(ctx, []polygateway.Message{polygateway.User("ping")})
		if err != nil {
			failed++
			continue
		}
		answered[resp.SourceName]++
		attempts[len(resp.Attempts)]++
	}
	fmt.Printf("\n== %s: %d calls, %d failed\n", title, n, failed)
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(answered)) {
		parts = append(parts, fmt.Sprintf("%s=%d", name, answered[name]))
	}
	fmt.Println("answered by:", strings.Join(parts, " "))
	parts = parts[:0]
	for _, k := range slices.Sorted(maps.Keys(attempts)) {
		parts = append(parts, fmt.Sprintf("%d attempt(s)=%d", k, attempts[k]))
	}
	fmt.Println("calls with: ", strings.Join(parts, " "))
}
