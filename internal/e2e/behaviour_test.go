package e2e

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestRateLimitWithRetryAfterWaitsBeforeRetryingTheSameSource(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithScript(fu.RateLimited("2"), fu.OK()))
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)

	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if resp.Content != fu.Tokens(8) {
		t.Fatalf("content = %q", resp.Content)
	}
	arr := srv.Arrivals()
	if len(arr) != 2 {
		t.Fatalf("upstream saw %d requests, want 2", len(arr))
	}
	if gap := arr[1].Sub(arr[0]); gap < 1900*time.Millisecond {
		t.Fatalf("second attempt came %v after the 429, want >= ~2s (Retry-After)", gap)
	}
	if n := srv.MostArrivalsWithin(1500 * time.Millisecond); n > 2 {
		t.Fatalf("%d attempts within 1.5s", n)
	}
}

// A Retry-After beyond the tier patience (3 s by default) is not a blip:
// the call goes to the lower tier at once.
func TestRateLimitWithALongRetryAfterFailsOverAtOnceWhenAnotherSourceExists(t *testing.T) {
	t.Parallel()
	limited := fu.NewServer(t, fu.WithScript(fu.RateLimited("30"), fu.OK()))
	other := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, limited.URL()).Source("qwen", 2, other.URL(), "PRIORITY", "1").Client(t)

	start := time.Now()
	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if resp.SourceName != "qwen_2" || time.Since(start) > time.Second {
		t.Fatalf("answered by %s after %v; want the other source at once", resp.SourceName, time.Since(start))
	}
	if got := strings.Join(resp.Attempts, ","); got != "openai_1,qwen_2" {
		t.Fatalf("attempts = %s", got)
	}
}

func TestRateLimitForeverWithoutRetryAfterDoesNotHammerTheSource(t *testing.T) {
	t.Parallel()
	limited := fu.NewServer(t, fu.WithBehavior(fu.RateLimited("")))
	other := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, limited.URL()).Source("qwen", 2, other.URL()).Client(t)

	deadline := time.Now().Add(3500 * time.Millisecond)
	for time.Now().Before(deadline) {
		resp, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
		if resp.SourceName != "qwen_2" {
			t.Fatalf("answered by %s", resp.SourceName)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := limited.MostArrivalsWithin(3 * time.Second); n > 4 {
		t.Fatalf("the rate-limited source got %d attempts within 3s, want <= 4", n)
	}
}

func TestServerErrorOnceThenRetrySucceeds(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithScript(fu.ServerError(500), fu.OK()))
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)

	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if srv.Requests() != 2 || len(resp.Attempts) != 2 {
		t.Fatalf("requests=%d attempts=%v, want 2", srv.Requests(), resp.Attempts)
	}
}

func TestPrimaryDownServesFromFallbackTierWithItsModelAndUsage(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithBehavior(fu.ServerError(503)))
	fallback := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(5).WithModel("fallback-model")))
	c := testenv.Base().Source("openai", 1, primary.URL()).Source("qwen", 2, fallback.URL(), "PRIORITY", "1").Client(t)

	for i := range 12 {
		resp, err := testenv.Ask(t, c, polygateway.WithStream(i%2 == 0))
		if err != nil {
			t.Fatalf("call %d failed: %v", i, err)
		}
		if resp.Model != "fallback-model" || resp.SourceName != "qwen_2" {
			t.Fatalf("call %d: model=%s source=%s", i, resp.Model, resp.SourceName)
		}
		if resp.CompletionTokens != 5 || resp.UsageSource != "measured" {
			t.Fatalf("call %d: usage %d (%s), want the fallback's 5 measured", i, resp.CompletionTokens, resp.UsageSource)
		}
		// The first 503 looks like a blip of a healthy preferred source:
		// it is retried once in its tier; after that it is failing, and
		// calls go to the fallback at once.
		if i == 0 && strings.Join(resp.Attempts, ",") != "openai_1,openai_1,qwen_2" {
			t.Fatalf("first call attempts = %v", resp.Attempts)
		}
		if i > 0 && len(resp.Attempts) > 2 {
			t.Fatalf("call %d attempts = %v: an outage must not be waited for on every call", i, resp.Attempts)
		}
	}
	if n := primary.Requests(); n > 6 {
		t.Fatalf("primary got %d attempts, want <= 6", n)
	}
}

func TestConnectionResetBeforeHeadersIsRetried(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithScript(fu.Reset(), fu.OK()))
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	if _, err := testenv.Ask(t, c); err != nil {
		t.Fatalf("call failed: %v", err)
	}
}

func TestSilentSourceIsBoundedByTimeoutAndNotRetriedWhileAnotherExists(t *testing.T) {
	t.Parallel()
	silent := fu.NewServer(t, fu.WithBehavior(fu.Hang()))
	healthy := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, silent.URL(), "TIMEOUT_S", "2").
		Source("qwen", 2, healthy.URL(), "TIMEOUT_S", "2", "PRIORITY", "1").Client(t)

	for i := range 3 {
		start := time.Now()
		resp, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatalf("call %d failed: %v", i, err)
		}
		bound := time.Duration(len(resp.Attempts))*2*time.Second + time.Second
		if took := time.Since(start); took > bound {
			t.Fatalf("call %d took %v, bound %v", i, took, bound)
		}
	}
	if n := silent.Requests(); n != 1 {
		t.Fatalf("silent source got %d requests, want 1 (not retried while another exists)", n)
	}
}

func TestSlowFirstTokenFailsOverToFallbackQuickly(t *testing.T) {
	t.Parallel()
	slow := fu.NewServer(t, fu.WithBehavior(fu.OK().WithFirstTokenDelay(3*time.Second)))
	fallback := fu.NewServer(t, fu.WithBehavior(fu.OK().WithModel("fallback-model")))
	c := testenv.Base().Source("openai", 1, slow.URL(), "TTFT_TIMEOUT_S", "1", "INTER_TOKEN_TIMEOUT_S", "0.5").
		Source("qwen", 2, fallback.URL(), "PRIORITY", "1").Client(t)

	start := time.Now()
	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second || resp.SourceName != "qwen_2" {
		t.Fatalf("answered by %s after %v, want the fallback well under 3s", resp.SourceName, took)
	}
}

func TestCutStreamIsNeverATruncatedSuccess(t *testing.T) {
	t.Parallel()
	t.Run("single source fails", func(t *testing.T) {
		t.Parallel()
		srv := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(40).WithTokens(60)))
		c := testenv.Base().Source("openai", 1, srv.URL()).Set("LLM__RETRY__MAX_ATTEMPTS", "2").Client(t)
		resp, err := testenv.Ask(t, c)
		if err == nil || resp != nil {
			t.Fatalf("a cut stream returned success: %v", resp)
		}
		var te *polygateway.TransientError
		if !errors.As(err, &te) {
			t.Fatalf("error %v does not carry a TransientError", err)
		}
	})
	t.Run("fallback answers in full", func(t *testing.T) {
		t.Parallel()
		cut := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(40).WithTokens(60)))
		full := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(60)))
		c := testenv.Base().Source("openai", 1, cut.URL()).Source("qwen", 2, full.URL(), "PRIORITY", "1").Client(t)
		resp, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatalf("call failed: %v", err)
		}
		if resp.Content != fu.Tokens(60) {
			t.Fatalf("content has %d words, want the full 60", len(strings.Fields(resp.Content)))
		}
	})
}

func TestStalledStreamEndsQuicklyAndTheClientStillWorks(t *testing.T) {
	t.Parallel()
	stall := fu.NewServer(t, fu.WithBehavior(fu.StallAfter(20, 10*time.Second).WithTokens(40)))
	fallback := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(40)))
	c := testenv.Base().Source("openai", 1, stall.URL(), "TTFT_TIMEOUT_S", "2", "INTER_TOKEN_TIMEOUT_S", "1").
		Source("qwen", 2, fallback.URL(), "PRIORITY", "1").Client(t)

	start := time.Now()
	resp, err := testenv.Ask(t, c)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("call took %v, want < 3s", took)
	}
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if resp.Content != fu.Tokens(40) {
		t.Fatalf("content is not the fallback's full answer: %q", resp.Content)
	}
	if _, err := testenv.Ask(t, c); err != nil {
		t.Fatalf("the next call failed: %v", err)
	}
}

func TestMalformedEventIsNeverPartialSuccess(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.MalformedAt(5).WithTokens(20)))
	c := testenv.Base().Source("openai", 1, srv.URL()).Set("LLM__RETRY__MAX_ATTEMPTS", "1").Client(t)
	resp, err := testenv.Ask(t, c)
	var te *polygateway.TransientError
	if resp != nil || !errors.As(err, &te) {
		t.Fatalf("resp=%v err=%v, want a TransientError and no content", resp, err)
	}
}

func TestCompleteStreamWithoutDoneIsReturnedPromptlyWithUsage(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(12).WithoutDone()))
	c := testenv.Base().Source("openai", 1, srv.URL(), "TTFT_TIMEOUT_S", "2", "INTER_TOKEN_TIMEOUT_S", "1").Client(t)
	start := time.Now()
	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	if took := time.Since(start); took > 500*time.Millisecond {
		t.Fatalf("took %v", took)
	}
	if resp.Content != fu.Tokens(12) || resp.CompletionTokens != 12 || resp.UsageSource != "measured" || resp.FinishReason != "stop" {
		t.Fatalf("resp = %+v", resp)
	}
	if srv.Requests() != 1 {
		t.Fatalf("requests = %d", srv.Requests())
	}
}

// A request too long for a model is not a wrong request: another model
// may take it. With only sources of that model, it is rejected after one
// attempt.
func TestContextLengthExceededIsRejectedAfterOneAttemptWhenNoOtherModelIsConfigured(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ContextLength()))
	b := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, a.URL()).Source("openai", 2, b.URL(), "PRIORITY", "1").Client(t) // same MODEL
	_, err := testenv.Ask(t, c)
	var re *polygateway.RequestRejectedError
	if !errors.As(err, &re) || re.Code != "context_length_exceeded" || re.Reason != core.ReasonContextLength {
		t.Fatalf("err = %v, want RequestRejectedError with code context_length_exceeded", err)
	}
	if a.Requests()+b.Requests() != 1 {
		t.Fatalf("attempts = %d, want exactly 1: never resent to the same model", a.Requests()+b.Requests())
	}
}

func TestContextLengthExceededRoutesToASourceOfAnotherModel(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ContextLength()))
	a2 := fu.NewServer(t)
	b := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, a.URL()).Source("openai", 2, a2.URL(), "PRIORITY", "1").
		Source("qwen", 1, b.URL(), "PRIORITY", "2").Client(t)
	resp, err := testenv.Ask(t, c)
	if err != nil || resp.SourceName != "qwen_1" {
		t.Fatalf("= (%v, %v), want the answer of the other model's source", resp, err)
	}
	if a.Requests() != 1 || a2.Requests() != 0 || b.Requests() != 1 {
		t.Errorf("requests a=%d a2=%d b=%d, want A once, the other A-model source never, B once", a.Requests(), a2.Requests(), b.Requests())
	}
	for _, s := range c.Sources(context.Background()) {
		if s.Name == "openai_1" && (s.Breaker.State != core.StateClosed || s.Breaker.ConsecutiveFailures != 0) {
			t.Errorf("A's breaker was charged: %+v", s.Breaker)
		}
	}
}

func TestContentFilterIsRejectedWithTheProvidersReason(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ContentFilter()))
	b := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, a.URL()).Source("qwen", 2, b.URL(), "PRIORITY", "1").Client(t)
	_, err := testenv.Ask(t, c)
	var re *polygateway.RequestRejectedError
	if !errors.As(err, &re) || re.Code == "" || re.Message == "" {
		t.Fatalf("err = %v, want RequestRejectedError with the provider's code and message", err)
	}
	if !strings.Contains(err.Error(), re.Message) {
		t.Fatalf("error text %q lacks the provider's message %q", err, re.Message)
	}
	if a.Requests()+b.Requests() != 1 {
		t.Fatalf("attempts = %d, want exactly 1", a.Requests()+b.Requests())
	}
}

func TestUnauthorizedSourceOpensAtOnceAndIsNeverReachedAgain(t *testing.T) {
	t.Parallel()
	bad := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	good := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, bad.URL()).Source("qwen", 2, good.URL(), "PRIORITY", "1").Client(t)
	for i := range 10 {
		resp, err := testenv.Ask(t, c)
		if err != nil || resp.SourceName != "qwen_2" {
			t.Fatalf("call %d: resp=%v err=%v", i, resp, err)
		}
	}
	if n := bad.Requests(); n != 1 {
		t.Fatalf("the 401 source got %d requests, want 1", n)
	}
	for _, s := range c.Sources(context.Background()) {
		if s.Name == "openai_1" && s.Breaker.State != core.StateOpen {
			t.Fatalf("breaker of openai_1 is %s, want open", s.Breaker.State)
		}
	}
}

func TestFlappingPrimaryIsProbedOncePerCooldownAndTrafficReturns(t *testing.T) {
	t.Parallel()
	const outage, cooldown = 3 * time.Second, time.Second
	primary := fu.NewServer(t, fu.WithFlap(outage, time.Hour, fu.ServerError(503)))
	fallback := fu.NewServer(t)
	start := time.Now()
	c := testenv.Base().Source("openai", 1, primary.URL()).Source("qwen", 2, fallback.URL(), "PRIORITY", "1").
		Set("LLM__BREAKER__FAIL_THRESHOLD", "2", "LLM__BREAKER__COOLDOWN_S", "1", "LLM__BREAKER__MAX_COOLDOWN_S", "1").Client(t)

	var backOnPrimary time.Time
	for time.Since(start) < outage+3*cooldown {
		resp, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatalf("call at %v failed: %v", time.Since(start), err)
		}
		if time.Since(start) < outage && resp.SourceName != "qwen_2" {
			t.Fatalf("during the outage a call was answered by %s", resp.SourceName)
		}
		if backOnPrimary.IsZero() && time.Since(start) > outage && resp.SourceName == "openai_1" {
			backOnPrimary = time.Now()
		}
		time.Sleep(200 * time.Millisecond)
	}
	var duringOutage []time.Time
	for _, at := range primary.Arrivals() {
		if at.Before(start.Add(outage)) {
			duringOutage = append(duringOutage, at)
		}
	}
	// Two failures open the breaker; after that, at most one probe per cooldown.
	if max := 2 + int(outage/cooldown) + 1; len(duringOutage) > max {
		t.Fatalf("primary got %d requests during the outage, want <= %d", len(duringOutage), max)
	}
	if backOnPrimary.IsZero() || backOnPrimary.Sub(start.Add(outage)) > cooldown+400*time.Millisecond {
		t.Fatalf("traffic returned to the primary %v after recovery, want within one cooldown", backOnPrimary.Sub(start.Add(outage)))
	}
}

func TestCancellationReturnsAtOnceAndLeavesNothingHeld(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		setup  func(t *testing.T) (testenv.Env, func())
		cancel time.Duration
	}{
		{"during a stream", func(t *testing.T) (testenv.Env, func()) {
			srv := fu.NewServer(t, fu.WithBehavior(fu.StallAfter(5, 10*time.Second)))
			return testenv.Base().Source("openai", 1, srv.URL()), nil
		}, 300 * time.Millisecond},
		{"during backoff", func(t *testing.T) (testenv.Env, func()) {
			srv := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
			return testenv.Base().Source("openai", 1, srv.URL()).Set("LLM__RETRY__BACKOFF_BASE_S", "10", "LLM__RETRY__BACKOFF_MAX_S", "10"), nil
		}, 300 * time.Millisecond},
		{"while waiting for a permit", func(t *testing.T) (testenv.Env, func()) {
			srv := fu.NewServer(t, fu.WithBehavior(fu.Hang()))
			return testenv.Base().Source("openai", 1, srv.URL(), "MAX_CONCURRENCY", "1"), nil
		}, 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, _ := tc.setup(t)
			lim, br := memory.NewLimiter(), memory.NewBreaker()
			c := e.Client(t, polygateway.WithLimiter(lim), polygateway.WithBreaker(br))

			// For the permit case, a first call holds the only slot.
			holdCtx, releaseHold := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			if strings.Contains(tc.name, "permit") {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = c.Chat(holdCtx, []polygateway.Message{polygateway.User("hold")})
				}()
				waitUntil(t, func() bool { return c.Sources(context.Background())[0].InFlight == 1 })
			}

			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(tc.cancel, cancel)
			start := time.Now()
			_, err := c.Chat(ctx, []polygateway.Message{polygateway.User("cancel me")})
			took := time.Since(start)
			releaseHold()
			wg.Wait()
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if took > tc.cancel+250*time.Millisecond {
				t.Fatalf("returned %v after start, cancel at %v", took, tc.cancel)
			}
			ctx0 := context.Background()
			for _, s := range c.Sources(ctx0) {
				if s.InFlight != 0 || s.Usage.InFlight != 0 || s.Breaker.ProbeHeld {
					t.Fatalf("after cancellation %s holds inflight=%d permits=%d probe=%v", s.Name, s.InFlight, s.Usage.InFlight, s.Breaker.ProbeHeld)
				}
			}
			if u, _ := lim.Usage(ctx0, "LLM", ""); u.InFlight != 0 {
				t.Fatalf("global permits held: %d", u.InFlight)
			}
		})
	}
}

func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
