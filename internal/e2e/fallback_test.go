package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

func TestQualityGuardFailsOverWithoutChargingTheBreaker(t *testing.T) {
	t.Parallel()
	terse := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(1)))
	good := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, terse.URL()).Source("qwen", 2, good.URL(), "PRIORITY", "1").
		Set("LLM__QUALITY__GUARD", "true", "LLM__QUALITY__MIN_CHARS", "10").Client(t)
	for i := range 6 {
		resp, err := testenv.Ask(t, c)
		if err != nil || resp.SourceName != "qwen_2" || resp.Content != fu.Tokens(8) {
			t.Fatalf("call %d: resp=%+v err=%v", i, resp, err)
		}
	}
	for _, s := range c.Sources(context.Background()) {
		if s.Breaker.State != core.StateClosed || s.Breaker.ConsecutiveFailures != 0 {
			t.Fatalf("%s breaker charged by low-quality answers: %+v", s.Name, s.Breaker)
		}
	}
	// With the guard off the short answer is accepted.
	off := testenv.Base().Source("openai", 1, terse.URL()).Client(t)
	if resp, err := testenv.Ask(t, off); err != nil || resp.Content != "tok0" {
		t.Fatalf("guard off: %+v %v", resp, err)
	}
}

func TestQualityGuardReturnsResultInvalidWhenEverySourceIsBad(t *testing.T) {
	t.Parallel()
	terse := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(1)))
	c := testenv.Base().Source("openai", 1, terse.URL()).Set("LLM__QUALITY__GUARD", "true", "LLM__QUALITY__MIN_CHARS", "10",
		"LLM__RETRY__MAX_ATTEMPTS", "2").Client(t)
	resp, err := testenv.Ask(t, c)
	var invalid *polygateway.ResultInvalidError
	if !errors.As(err, &invalid) || invalid.Raw != "tok0" || resp == nil {
		t.Fatalf("err = %v, want ResultInvalidError with the raw answer", err)
	}
	if n := terse.Requests(); n != 2 {
		t.Fatalf("%d attempts, want the budget of 2", n)
	}
}

func TestStaleCacheEntryServesWhenTheScopeIsUnavailable(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithScript(fu.OK(), fu.BadKey()))
	c := testenv.Base().Source("openai", 1, srv.URL()).Set(
		"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "0.2",
		"LLM__FALLBACK__STALE_S", "60").Client(t)
	first, err := testenv.Ask(t, c)
	if err != nil || first.Degraded {
		t.Fatalf("first call: %+v %v", first, err)
	}
	time.Sleep(300 * time.Millisecond) // past the TTL: no longer a hit
	stale, err := testenv.Ask(t, c)
	if err != nil || !stale.Degraded || !stale.CacheHit || stale.Content != first.Content {
		t.Fatalf("want the stale answer marked degraded, got %+v, %v", stale, err)
	}
	if srv.Requests() != 2 {
		t.Fatalf("requests = %d: the expired entry must not short-circuit the governed call", srv.Requests())
	}

	// Without a stale window the expired entry is gone.
	srv2 := fu.NewServer(t, fu.WithScript(fu.OK(), fu.BadKey()))
	c2 := testenv.Base().Source("openai", 1, srv2.URL()).Set(
		"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "0.2").Client(t)
	_, _ = testenv.Ask(t, c2)
	time.Sleep(300 * time.Millisecond)
	if _, err := testenv.Ask(t, c2); err == nil {
		t.Fatal("without FALLBACK__STALE_S an expired entry was served")
	}
}

func TestCallerFallbackIsTheLastStep(t *testing.T) {
	t.Parallel()
	dead := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	scopeFallback := func(ctx context.Context, msgs []polygateway.Message, cause error) (*polygateway.LLMResponse, error) {
		if !errors.Is(cause, polygateway.ErrGateway) {
			t.Errorf("fallback cause = %v", cause)
		}
		return &polygateway.LLMResponse{Content: "scope fallback"}, nil
	}
	c := testenv.Base().Source("openai", 1, dead.URL()).Client(t, polygateway.WithFallback(scopeFallback))
	resp, err := testenv.Ask(t, c)
	if err != nil || resp.Content != "scope fallback" || !resp.Degraded || resp.CallID == "" {
		t.Fatalf("resp=%+v err=%v", resp, err)
	}
	perCall := polygateway.WithCallFallback(func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{Content: "call fallback"}, nil
	})
	if resp, err := testenv.Ask(t, c, perCall); err != nil || resp.Content != "call fallback" {
		t.Fatalf("per-call fallback: %+v %v", resp, err)
	}

	// A rejected request is the caller's problem: no fallback.
	bad := fu.NewServer(t, fu.WithBehavior(fu.ContextLength()))
	c2 := testenv.Base().Source("openai", 1, bad.URL()).Client(t, polygateway.WithFallback(scopeFallback))
	var re *polygateway.RequestRejectedError
	if _, err := testenv.Ask(t, c2); !errors.As(err, &re) {
		t.Fatalf("rejected request: err = %v, want RequestRejectedError and no fallback", err)
	}
}

// A degraded answer is what the caller got: its telemetry row describes
// it — the served content, no error — and names the strategy.
func TestADegradedAnswerWritesOneRowDescribingItAndItsStrategy(t *testing.T) {
	t.Parallel()
	t.Run("stale cache", func(t *testing.T) {
		t.Parallel()
		srv := fu.NewServer(t, fu.WithScript(fu.OK(), fu.BadKey()))
		sink := telemetry.NewMemory()
		clk := backendtest.NewFakeClock(time.Now())
		c := testenv.Base().Source("openai", 1, srv.URL()).Set(
			"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "10",
			"LLM__FALLBACK__STALE_S", "60").Client(t, polygateway.WithTelemetry(sink), polygateway.WithClock(clk))
		first, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(20 * time.Second) // past the TTL, inside the stale window
		stale, err := testenv.Ask(t, c)
		if err != nil || stale.DegradedBy != core.DegradedStaleCache {
			t.Fatalf("= (%+v, %v), want the stale answer", stale, err)
		}
		recs := sink.Records()
		if len(recs) != 2 {
			t.Fatalf("%d rows for two calls, want 2", len(recs))
		}
		row := recs[1]
		if row.CallID != stale.CallID || row.Degraded != "stale_cache" || row.Error != "" ||
			row.Response != first.Content || !row.CacheHit {
			t.Errorf("stale row = %+v, want the served answer with degraded=stale_cache and no error", row)
		}
		if recs[0].Degraded != "" {
			t.Errorf("the fresh answer's row says degraded=%q", recs[0].Degraded)
		}
	})
	t.Run("caller fallback", func(t *testing.T) {
		t.Parallel()
		dead := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
		sink := telemetry.NewMemory()
		c := testenv.Base().Source("openai", 1, dead.URL()).Client(t, polygateway.WithTelemetry(sink),
			polygateway.WithFallback(func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
				return &polygateway.LLMResponse{Content: "from the fallback", Model: "canned"}, nil
			}))
		resp, err := testenv.Ask(t, c)
		if err != nil || resp.DegradedBy != core.DegradedFallback || !resp.Degraded {
			t.Fatalf("= (%+v, %v), want the fallback's answer", resp, err)
		}
		recs := sink.Records()
		if len(recs) != 1 {
			t.Fatalf("%d rows for one call, want 1", len(recs))
		}
		if row := recs[0]; row.Degraded != "fallback" || row.Error != "" || row.Response != "from the fallback" || row.Model != "canned" {
			t.Errorf("row = %+v, want the fallback's answer with degraded=fallback and no error", row)
		}
	})
}

// TestACannedFallbackAnswerServesEveryCallUnchanged: a fallback that returns
// one shared answer to every call (a canned reply) gets it back unchanged;
// each call's answer is its own copy, marked degraded, with its own call
// id — concurrent calls, no data race.
func TestACannedFallbackAnswerServesEveryCallUnchanged(t *testing.T) {
	t.Parallel()
	dead := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	canned := &polygateway.LLMResponse{Content: "try again later"}
	c := testenv.Base().Source("openai", 1, dead.URL()).Client(t, polygateway.WithFallback(
		func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
			return canned, nil
		}))
	const calls = 8
	resps := make([]*polygateway.LLMResponse, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			resp, err := testenv.Ask(t, c)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			resps[i] = resp
		})
	}
	wg.Wait()
	ids := make(map[string]bool)
	for i, resp := range resps {
		if resp == nil || resp == canned || resp.Content != canned.Content || !resp.Degraded || resp.DegradedBy != core.DegradedFallback {
			t.Fatalf("call %d: %+v, want a degraded copy of the canned answer", i, resp)
		}
		ids[resp.CallID] = true
	}
	if len(ids) != calls || canned.Degraded || canned.CallID != "" {
		t.Errorf("%d call ids for %d calls; canned answer now %+v, want it unchanged", len(ids), calls, canned)
	}
}
