package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// breakers returns the breaker snapshot of every source of c by name.
func breakers(c *polygateway.GatewayClient) map[string]polygateway.BreakerSnapshot {
	out := map[string]polygateway.BreakerSnapshot{}
	for _, s := range c.Sources(context.Background()) {
		out[s.Name] = s.Breaker
	}
	return out
}

// TestAPerSourceBreakerThresholdOpensThatSourceAlone: openai_1 has
// BREAKER__FAIL_THRESHOLD=1, qwen_1 the scope's default of 5. After one
// failure each, openai_1 is open and qwen_1 closed; qwen_1 opens at its
// fifth failure.
func TestAPerSourceBreakerThresholdOpensThatSourceAlone(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	b := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	c := testenv.Base().
		Source("openai", 1, a.URL(), "BREAKER__FAIL_THRESHOLD", "1").
		Source("qwen", 1, b.URL()).
		Set("LLM__RETRY__MAX_ATTEMPTS", "2", "LLM__RETRY__TIER_PATIENCE_S", "0").Client(t)

	if _, err := testenv.Ask(t, c); err == nil {
		t.Fatal("the call succeeded against two failing sources")
	}
	if a.Requests() != 1 || b.Requests() != 1 {
		t.Fatalf("requests a=%d b=%d, want one failure each", a.Requests(), b.Requests())
	}
	br := breakers(c)
	if s := br["openai_1"]; s.State != core.StateOpen || s.Opens != 1 {
		t.Errorf("openai_1 (threshold 1) after one failure: %+v, want open", s)
	}
	if s := br["qwen_1"]; s.State != core.StateClosed || s.ConsecutiveFailures != 1 {
		t.Errorf("qwen_1 (the scope's threshold 5) after one failure: %+v, want closed with one failure counted", s)
	}

	// openai_1 stays out; qwen_1 takes the failures until its fifth.
	for b.Requests() < 5 {
		if _, err := testenv.Ask(t, c); err == nil {
			t.Fatal("the call succeeded against two failing sources")
		}
		br = breakers(c)
		if n := b.Requests(); n < 5 && (br["qwen_1"].State != core.StateClosed || br["qwen_1"].ConsecutiveFailures != float64(n)) {
			t.Fatalf("qwen_1 after %d failures: %+v, want closed", n, br["qwen_1"])
		}
	}
	if a.Requests() != 1 {
		t.Errorf("openai_1 got %d requests while open, want 1", a.Requests())
	}
	if n, s := b.Requests(), br["qwen_1"]; n != 5 || s.State != core.StateOpen || s.Opens != 1 {
		t.Errorf("qwen_1 after %d failures: %+v, want open at the fifth", n, s)
	}
}

// TestAPerSourceBreakerCooldownAndCapApplyToThatSource: with a fake clock,
// openai_1 (BREAKER__COOLDOWN_S=10, BREAKER__MAX_COOLDOWN_S=15) opens for
// 10 s and, after a failed probe, for 15 s; qwen_1 keeps the scope's 5 s,
// doubled to the scope's cap of 8 s.
func TestAPerSourceBreakerCooldownAndCapApplyToThatSource(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	b := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	clk := backendtest.NewFakeClock(time.Now())
	c := testenv.Base().
		Source("openai", 1, a.URL(), "BREAKER__COOLDOWN_S", "10", "BREAKER__MAX_COOLDOWN_S", "15").
		Source("qwen", 1, b.URL()).
		Set("LLM__BREAKER__FAIL_THRESHOLD", "1", "LLM__RETRY__MAX_ATTEMPTS", "2", "LLM__RETRY__TIER_PATIENCE_S", "0").
		Client(t, polygateway.WithClock(clk))

	check := func(when string, wantA, wantB time.Duration) {
		t.Helper()
		br := breakers(c)
		if s := br["openai_1"]; s.State != core.StateOpen || s.RetryAfter != wantA {
			t.Errorf("%s: openai_1 %+v, want open for %v", when, s, wantA)
		}
		if s := br["qwen_1"]; s.State != core.StateOpen || s.RetryAfter != wantB {
			t.Errorf("%s: qwen_1 %+v, want open for %v", when, s, wantB)
		}
	}
	if _, err := testenv.Ask(t, c); err == nil {
		t.Fatal("the call succeeded against two failing sources")
	}
	check("after the first failures", 10*time.Second, 5*time.Second)

	clk.Advance(10 * time.Second) // both half-open
	if _, err := testenv.Ask(t, c); err == nil {
		t.Fatal("the probes succeeded against two failing sources")
	}
	if a.Requests() != 2 || b.Requests() != 2 {
		t.Fatalf("requests a=%d b=%d, want one probe each", a.Requests(), b.Requests())
	}
	check("after the failed probes", 15*time.Second, 8*time.Second)
}
