package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// testEnv returns the assembly keys of a test client: memory backends, a
// memory cache, no telemetry, fast retries.
func testEnv() map[string]string {
	return map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "metrics-test", "PGW_CACHE_TTL_S": "60",
		"PGW_TELEMETRY_BACKEND":      "none",
		"LLM__RETRY__BACKOFF_BASE_S": "0.01", "LLM__RETRY__BACKOFF_MAX_S": "0.05",
	}
}

// addSource adds source openai_{n} pointing at srv with the given model and
// PRIORITY (lower is tried first).
func addSource(env map[string]string, n int, srv *fakeupstream.Server, model string, priority int) {
	p := fmt.Sprintf("LLM__OPENAI__%d__", n)
	env[p+"BASE_URL"] = srv.URL()
	env[p+"API_KEY"] = "sk-test"
	env[p+"MODEL"] = model
	env[p+"TIMEOUT_S"] = "5"
	env[p+"PRIORITY"] = fmt.Sprint(priority)
}

// newCollector returns a Collector on its own registry.
func newCollector(t testing.TB, opts ...Option) *Collector {
	t.Helper()
	col, err := New(nil, opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return col
}

// newClient assembles a client from env wired to col (observer, middleware
// and watch), closed when the test ends.
func newClient(t testing.TB, col *Collector, env map[string]string, opts ...polygateway.Option) *polygateway.GatewayClient {
	t.Helper()
	all := append([]polygateway.Option{
		polygateway.WithEnv(env),
		polygateway.WithObserver(col),
		polygateway.WithMiddleware(col.Middleware()),
	}, opts...)
	gc, err := polygateway.FromEnv("LLM", all...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = gc.Close() })
	col.WatchClient(gc)
	return gc
}

// chat makes one call with prompt.
func chat(t testing.TB, gc *polygateway.GatewayClient, prompt string, opts ...polygateway.CallOption) *polygateway.LLMResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := gc.Chat(ctx, []polygateway.Message{polygateway.User(prompt)}, opts...)
	if err != nil {
		t.Fatalf("Chat: %v", err)
	}
	return resp
}

// want fails the test when got != want.
func want(t testing.TB, what string, got, want float64) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// attempts returns the attempts_total value of (LLM, source, outcome).
func (c *Collector) attemptCount(source, outcome string) float64 {
	return testutil.ToFloat64(c.attempts.WithLabelValues("LLM", source, outcome))
}

// totalAttempts sums attempts_total over every label set.
func totalAttempts(t testing.TB, c *Collector) float64 {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == "polygateway_attempts_total" {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// gauge returns the value of the scrape-time gauge name{scope=LLM,source}.
func gauge(t testing.TB, c *Collector, name, source string) (float64, bool) {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			var scope, src string
			for _, lp := range m.GetLabel() {
				switch lp.GetName() {
				case "scope":
					scope = lp.GetValue()
				case "source":
					src = lp.GetValue()
				}
			}
			if scope == "LLM" && src == source {
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// lines keeps the lines of an exposition text that start with prefix.
func lines(text, prefix string) string {
	var b strings.Builder
	for l := range strings.SplitSeq(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
