package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// TestNoWaitOutlastsTheStallWindow holds every kind of wait to the stall
// window: a call whose only source is held back for longer than the window
// (a Retry-After of 30 s or 10 min, a backoff of a minute), with no answer
// anywhere in the scope, ends stalled when the window ends — never after
// the hold — and a second call caught by the same hold too.
func TestNoWaitOutlastsTheStallWindow(t *testing.T) {
	t.Parallel()
	const window = 2 * time.Second
	cases := []struct {
		name    string
		err     error
		backoff time.Duration
	}{
		{"a Retry-After of 30 s", testkit.RateLimitedErr("a", 30*time.Second), time.Millisecond},
		{"a Retry-After of 10 min", testkit.RateLimitedErr("a", 10*time.Minute), time.Millisecond},
		{"a backoff of a minute after a 5xx", &core.TransientError{Source: "a", Reason: core.ReasonServerError, StatusCode: 503}, time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			inBubble(t, func(t *testing.T) {
				set := testSettings(src("a", 0))
				set.Retry = core.RetrySettings{MaxAttempts: 5, BackoffBase: tc.backoff, BackoffMax: tc.backoff}
				set.Backpressure.StallWindow = window
				f := newFixture(t, set, withLiveBreaker)
				f.up.script("a", failStep(tc.err), failStep(tc.err), failStep(tc.err))
				start := time.Now()
				var wg sync.WaitGroup
				errs := make([]error, 2)
				ended := make([]time.Duration, 2)
				for i := range errs {
					wg.Go(func() {
						time.Sleep(time.Duration(i) * 500 * time.Millisecond)
						_, errs[i] = f.g.Handle(context.Background(), newCall())
						ended[i] = time.Since(start)
					})
				}
				wg.Wait()
				for i, err := range errs {
					ue := asUnavailable(t, err)
					if ue.Reason != core.ReasonStalled {
						t.Errorf("call %d: reason %s, want stalled", i, ue.Reason)
					}
					if limit := time.Duration(i)*500*time.Millisecond + window; ended[i] > limit {
						t.Errorf("call %d ended after %v, want within the %v stall window of its start", i, ended[i], window)
					}
				}
			})
		})
	}
}

// TestAWaitNeverOutlastsTheDeadline ends a call whose source is held back
// beyond the call's deadline at once, with the hold as its RetryAfter.
func TestAWaitNeverOutlastsTheDeadline(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.StallWindow = time.Hour
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", failStep(testkit.RateLimitedErr("a", 30*time.Second)))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		_, err := f.g.Handle(ctx, newCall())
		if d := time.Since(start); d > 0 {
			t.Errorf("ended after %v, want at once", d)
		}
		ue := asUnavailable(t, err)
		if ue.Reason != core.ReasonRateLimited || ue.RetryAfter < 29*time.Second {
			t.Errorf("err = %v (RetryAfter %v), want rate_limited with the 30 s hold", err, ue.RetryAfter)
		}
	})
}

// TestAThrottledScopeTellsItsCallerWhenToComeBack: a call that does not
// wait out pushback (a server whose clients retry 429 themselves) ends as
// soon as every source is held back by its upstream's 429, with the
// upstream's Retry-After; a second call asks the upstream nothing.
func TestAThrottledScopeTellsItsCallerWhenToComeBack(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0), src("b", 0))
		set.Backpressure.StallWindow = time.Minute
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", failStep(testkit.RateLimitedErr("a", 7*time.Second)))
		f.up.script("b", failStep(testkit.RateLimitedErr("b", 9*time.Second)))
		for i := range 2 {
			call := newCall()
			call.NoPushbackWait = true
			start := time.Now()
			_, err := f.g.Handle(context.Background(), call)
			if d := time.Since(start); d > 0 {
				t.Errorf("call %d ended after %v, want at once", i, d)
			}
			ue := asUnavailable(t, err)
			if ue.Reason != core.ReasonRateLimited || ue.RetryAfter < 6*time.Second || ue.RetryAfter > 7*time.Second {
				t.Errorf("call %d: err = %v (RetryAfter %v), want rate_limited after a's 7 s", i, err, ue.RetryAfter)
			}
		}
		if got := f.up.callLog(); len(got) != 2 {
			t.Errorf("upstream asked %v, want a and b once each", got)
		}
	})
}

// TestAThrottledSourceIsWaitedForByDefault keeps the library's default: a
// call waits out a pushback shorter than its window and is answered.
func TestAThrottledSourceIsWaitedForByDefault(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.StallWindow = time.Minute
		f := newFixture(t, set, withLiveBreaker)
		f.up.script("a", failStep(testkit.RateLimitedErr("a", 2*time.Second)), okStep())
		start := time.Now()
		resp, err := f.g.Handle(context.Background(), newCall())
		if err != nil || resp == nil {
			t.Fatalf("err = %v, want the answer after the pushback", err)
		}
		if d := time.Since(start); d < 2*time.Second || d > 3*time.Second {
			t.Errorf("answered after %v, want after the 2 s Retry-After", d)
		}
	})
}

// TestTheLastAttemptIsLoggedAsTheLast: an attempt after which the call
// gives up is logged as the call's end, never as "trying again"; one that
// is followed by another attempt is logged as tried again.
func TestTheLastAttemptIsLoggedAsTheLast(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0))
		set.Backpressure.StallWindow = 2 * time.Second
		h := &testkit.Logs{}
		f := newFixture(t, set, withLiveBreaker, func(c *Config) { c.Logger = slog.New(h) })
		f.up.script("a", failStep(testkit.RateLimitedErr("a", 1500*time.Millisecond)), failStep(testkit.RateLimitedErr("a", time.Minute)))
		_, err := f.g.Handle(context.Background(), newCall())
		var ue *core.GatewayUnavailableError
		if !errors.As(err, &ue) || ue.Reason != core.ReasonStalled {
			t.Fatalf("err = %v, want stalled", err)
		}
		want := []string{"polygateway: attempt failed, trying again", "polygateway: attempt failed, the call ends"}
		got := h.Messages(slog.LevelInfo)
		if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
			t.Errorf("logged %q, want %q", got, want)
		}
	})
}
