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
