package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// throttled is an upstream whose source "a" answers every request 429
// (with retryAfter as its hint) after latency, and whose other sources
// answer. It records when each request to "a" arrived and when its 429 left.
type throttled struct {
	latency    time.Duration
	retryAfter time.Duration

	mu        sync.Mutex
	arrived   []time.Time
	answered  []time.Time
	fallbacks int
}

func (u *throttled) Do(ctx context.Context, src *core.SourceConfig, _ *core.Call) (*core.LLMResponse, error) {
	u.mu.Lock()
	if src.Name != "a" {
		u.fallbacks++
		u.mu.Unlock()
		return &core.LLMResponse{Content: "ok", SourceName: src.Name}, nil
	}
	u.arrived = append(u.arrived, time.Now())
	u.mu.Unlock()
	t := time.NewTimer(u.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	u.mu.Lock()
	u.answered = append(u.answered, time.Now())
	u.mu.Unlock()
	return nil, testkit.RateLimitedErr("a", u.retryAfter)
}

// mostInWindow is the largest number of times within any window of w.
func mostInWindow(times []time.Time, w time.Duration) int {
	best := 0
	for i := range times {
		n := 0
		for j := range times {
			if d := times[j].Sub(times[i]); d >= 0 && d < w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// A primary that answers every request 429 sees at most 4 requests in any
// 3 s from one process, for 1 to 50 calls made one after the other or from
// 16 goroutines, with the library's backoff and with a backoff of
// milliseconds, with admission in the process and across a round trip; every call is answered by the fallback; with Retry-After
// no request comes before the hint has passed since a 429.
func TestAPersistently429ingPrimaryIsNeverHammered(t *testing.T) {
	t.Parallel()
	type backoffs struct {
		name      string
		base, max time.Duration
	}
	for _, bo := range []backoffs{{"library backoff", time.Second, 30 * time.Second}, {"fast backoff", time.Millisecond, 4 * time.Millisecond}} {
		for _, ra := range []time.Duration{0, 2 * time.Second} {
			for _, calls := range []int{1, 2, 10, 50} {
				for _, workers := range []int{1, 16} {
					for _, rtt := range []time.Duration{0, time.Millisecond} {
						name := fmt.Sprintf("%s/retry-after=%v/%d calls/%d callers/admission %v", bo.name, ra, calls, workers, rtt)
						t.Run(name, func(t *testing.T) {
							t.Parallel()
							inBubble(t, func(t *testing.T) {
								set := testSettings(src("a", 0), src("b", 1))
								set.Retry.BackoffBase, set.Retry.BackoffMax = bo.base, bo.max
								set.Retry.TierPatience = 3 * time.Second
								up := &throttled{latency: 20 * time.Millisecond, retryAfter: ra}
								lim, br := memory.NewLimiter(), memory.NewBreaker()
								adm := core.ComposeAdmitter(lim, br)
								g, err := New(Config{Settings: set, Upstream: up, Limiter: lim, Breaker: br, Admitter: testkit.SlowAdmitter{Admitter: adm, RTT: rtt}})
								if err != nil {
									t.Fatal(err)
								}
								var wg sync.WaitGroup
								errs := make(chan error, calls)
								next := make(chan struct{}, calls)
								for range calls {
									next <- struct{}{}
								}
								close(next)
								for range min(workers, calls) {
									wg.Go(func() {
										for range next {
											ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
											resp, err := g.Handle(ctx, newCall())
											cancel()
											if err == nil && resp.SourceName != "b" {
												err = fmt.Errorf("answered by %s", resp.SourceName)
											}
											if err != nil {
												errs <- err
											}
										}
									})
								}
								wg.Wait()
								close(errs)
								for err := range errs {
									t.Errorf("a call was not answered by the fallback: %v", err)
								}
								up.mu.Lock()
								defer up.mu.Unlock()
								if up.fallbacks != calls {
									t.Errorf("the fallback answered %d of %d calls", up.fallbacks, calls)
								}
								if n := mostInWindow(up.arrived, 3*time.Second); n > 4 {
									t.Errorf("the primary saw %d requests within 3 s, want at most 4: %v", n, since(up.arrived))
								}
								if ra > 0 {
									for _, a := range up.arrived {
										for _, r := range up.answered {
											if a.After(r) && a.Sub(r) < ra {
												t.Fatalf("a request %v after a 429 with Retry-After %v: %v", a.Sub(r), ra, since(up.arrived))
											}
										}
									}
								}
							})
						})
					}
				}
			}
		}
	}
}

// since lists times relative to the first, for failure messages.
func since(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(ts[0])
	}
	return out
}

func TestPushbackWaitIsTheLongestOfHintBackoffAndFloor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		hint      time.Duration
		base, max time.Duration
		n         int
		lo, hi    time.Duration
	}{
		{"first 429, fast backoff: the floor", 0, time.Millisecond, 4 * time.Millisecond, 1, time.Second, time.Second},
		{"second 429: the floor doubles", 0, time.Millisecond, 4 * time.Millisecond, 2, 2 * time.Second, 2 * time.Second},
		{"sixth 429: 32 s capped at 30 s", 0, time.Millisecond, 4 * time.Millisecond, 6, 30 * time.Second, 30 * time.Second},
		{"hundredth 429: still 30 s", 0, time.Millisecond, 4 * time.Millisecond, 100, 30 * time.Second, 30 * time.Second},
		{"a longer hint wins", 5 * time.Second, time.Millisecond, 4 * time.Millisecond, 1, 5 * time.Second, 5 * time.Second},
		{"a shorter hint does not shorten the floor", 100 * time.Millisecond, time.Millisecond, 4 * time.Millisecond, 1, time.Second, time.Second},
		{"a longer backoff wins", 0, 10 * time.Second, time.Minute, 1, 5 * time.Second, 10 * time.Second},
		{"n below 1 counts as the first", 0, time.Millisecond, 4 * time.Millisecond, 0, time.Second, time.Second},
	} {
		if got := pushbackWait(tt.hint, tt.base, tt.max, tt.n); got < tt.lo || got > tt.hi {
			t.Errorf("%s: pushbackWait = %v, want within [%v, %v]", tt.name, got, tt.lo, tt.hi)
		}
	}
}

// A call holding to its tier after its own 429 does not go around a longer
// pushback another call set meanwhile: it leaves the tier instead.
func TestTierPatienceHonoursAPushbackAnotherCallSet(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0), src("b", 1))
		set.Retry.BackoffBase, set.Retry.BackoffMax = time.Millisecond, 4*time.Millisecond
		set.Retry.TierPatience = 3 * time.Second
		up := &throttled{latency: 10 * time.Millisecond}
		g, err := New(Config{Settings: set, Upstream: up, Limiter: memory.NewLimiter(), Breaker: memory.NewBreaker()})
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if resp, err := g.Handle(context.Background(), newCall()); err != nil || resp.SourceName != "b" {
					t.Errorf("= (%v, %v), want the fallback", resp, err)
				}
			})
		}
		wg.Wait()
		// Four 429s at once push the source back 8 s: no call holding to
		// the tier asks it again within the patience.
		if len(up.arrived) != 4 {
			t.Fatalf("the primary saw %d requests, want the 4 sent together: %v", len(up.arrived), since(up.arrived))
		}
	})
}

// The tier's patience never waits past the call's deadline: a 429 whose
// spacing (the 1 s floor) does not fit what is left of the call fails over
// at once, and the primary is asked once.
func TestTierPatienceAfterA429NeverOutwaitsTheDeadline(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		set := testSettings(src("a", 0), src("b", 1))
		set.Retry.TierPatience = 3 * time.Second
		up := &throttled{latency: 10 * time.Millisecond}
		g, err := New(Config{Settings: set, Upstream: up, Limiter: memory.NewLimiter(), Breaker: memory.NewBreaker()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 800*time.Millisecond)
		defer cancel()
		start := time.Now()
		resp, err := g.Handle(ctx, newCall())
		if err != nil || resp.SourceName != "b" {
			t.Fatalf("= (%v, %v), want the fallback", resp, err)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("the fallback answered after %v; the patience waited for a spacing that outlasts the deadline", d)
		}
		if len(up.arrived) != 1 {
			t.Errorf("the primary saw %d requests, want 1", len(up.arrived))
		}
	})
}
