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

// firstWave is an upstream that answers after latency and counts the
// requests that arrived before its first answer left.
type firstWave struct {
	latency time.Duration

	mu       sync.Mutex
	answered bool
	wave     int
}

func (u *firstWave) Do(ctx context.Context, src *core.SourceConfig, _ *core.Call) (*core.LLMResponse, error) {
	u.mu.Lock()
	if !u.answered {
		u.wave++
	}
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.answered = true
		u.mu.Unlock()
	}()
	t := time.NewTimer(u.latency)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-t.C:
	}
	return &core.LLMResponse{Content: "ok", SourceName: src.Name}, nil
}

// Calls that arrive together at a cold source send it no more requests
// before its first answer than its adaptive start limit, however long admission takes: the
// slot is claimed before the backends are asked, so no call can pass the
// check while another that passed it is still being admitted.
func TestACallBurstOnAColdSourceNeverExceedsTheStartLimit(t *testing.T) {
	t.Parallel()
	for _, rtt := range []time.Duration{0, time.Millisecond} {
		for _, callers := range []int{5, 16, 64} {
			t.Run(fmt.Sprintf("admission %v/%d callers", rtt, callers), func(t *testing.T) {
				t.Parallel()
				inBubble(t, func(t *testing.T) {
					up := &firstWave{latency: 100 * time.Millisecond}
					set := testSettings(src("a", 0))
					set.Retry.MaxAttempts = 1
					lim, br := memory.NewLimiter(), memory.NewBreaker()
					adm := core.ComposeAdmitter(lim, br)
					g, err := New(Config{Settings: set, Upstream: up, Limiter: lim, Breaker: br, Admitter: testkit.SlowAdmitter{Admitter: adm, RTT: rtt}})
					if err != nil {
						t.Fatal(err)
					}
					var wg sync.WaitGroup
					errs := make(chan error, callers)
					for range callers {
						wg.Go(func() {
							ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
							defer cancel()
							if _, err := g.Handle(ctx, newCall()); err != nil {
								errs <- err
							}
						})
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						t.Errorf("a call failed: %v", err)
					}
					if up.wave > int(aimdStart) {
						t.Errorf("the cold source got %d requests before its first answer, want at most its start limit %v", up.wave, aimdStart)
					}
					if callers > int(aimdStart) && up.wave < int(aimdStart) {
						t.Errorf("the cold source got %d requests before its first answer, want its start limit %v used", up.wave, aimdStart)
					}
				})
			})
		}
	}
}

// An adaptive limit that is not a whole number admits only its whole
// slots: after a 429 and a success the limit is 2.5, and 2.5 in flight is
// 2, never 3 (Sources would otherwise report more attempts in flight than
// the limit it shows).
func TestAFractionalAdaptiveLimitAdmitsOnlyItsWholeSlots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		limit float64
		slots int
	}{
		{1, 1},
		{1.25, 1},
		{1.999, 1},
		{2, 2},
		{2.5, 2},
		{4, 4},
		{4.99, 4},
		{64, 64},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprint(tc.limit), func(t *testing.T) {
			t.Parallel()
			s := newSourceState(src("a", 0), core.BreakerConfig{}, nil)
			s.aimd = tc.limit
			got := 0
			for s.claimSlot() {
				got++
				if got > 1000 {
					break
				}
			}
			if got != tc.slots {
				t.Errorf("limit %v admitted %d attempts at once, want %d", tc.limit, got, tc.slots)
			}
		})
	}
}

// The same through calls: a source whose limit a 429 and a success left at
// 2.5 gets 2 requests before its first answer, not 3, and Sources never
// reports more attempts in flight than the adaptive limit.
func TestCallsNeverExceedAFractionalAdaptiveLimit(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		var f *fixture
		wave := &firstWave{latency: 100 * time.Millisecond}
		up := upstreamFunc(func(ctx context.Context, src *core.SourceConfig, call *core.Call) (*core.LLMResponse, error) {
			for _, st := range f.g.Sources(context.Background()) {
				if float64(st.InFlight) > st.AdaptiveLimit {
					t.Errorf("Sources: %d in flight on %s, above its adaptive limit %v", st.InFlight, st.Name, st.AdaptiveLimit)
				}
			}
			return wave.Do(ctx, src, call)
		})
		set := testSettings(src("a", 0))
		set.Backpressure.StallWindow = time.Minute
		f = newFixture(t, set, withLiveBreaker, func(c *Config) { c.Upstream = up })
		s := f.g.sourceNamed("a")
		s.settle(time.Now(), healthNeutral, aimdHalve, false, 0)
		s.settle(time.Now(), healthNeutral, aimdGrow, false, time.Second)
		if got := s.aimdLimit(); got != 2.5 {
			t.Fatalf("limit = %v, want 2.5", got)
		}
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if _, err := f.g.Handle(ctx, newCall()); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if wave.wave != 2 {
			t.Errorf("the source got %d requests before its first answer with an adaptive limit of 2.5, want 2", wave.wave)
		}
	})
}
