package e2e

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// Two hundred concurrent calls over flaky, slow and healthy upstreams, each
// cancelled at a random moment: afterwards no permit, probe or in-flight
// count is left, and (TestMain) no goroutine leaks.
func TestTwoHundredConcurrentCallsWithRandomCancellationLeaveNothingHeld(t *testing.T) {
	t.Parallel()
	flaky := fu.NewServer(t, fu.WithFunc(func(r fu.RequestInfo) fu.Behavior {
		switch r.Index % 5 {
		case 0:
			return fu.ServerError(503)
		case 1:
			return fu.OK().WithFirstTokenDelay(150 * time.Millisecond)
		case 2:
			return fu.CutAfter(3)
		case 3:
			return fu.RateLimited("0.05")
		}
		return fu.OK().WithInterTokenDelay(10 * time.Millisecond)
	}))
	steady := fu.NewServer(t, fu.WithBehavior(fu.OK().WithLatency(20*time.Millisecond)))
	lim, br := memory.NewLimiter(), memory.NewBreaker()
	c := testenv.Base().Source("openai", 1, flaky.URL(), "MAX_CONCURRENCY", "5").Source("qwen", 2, steady.URL(), "MAX_CONCURRENCY", "20").
		Set("LLM__GLOBAL__MAX_CONCURRENCY", "20", "LLM__BREAKER__FAIL_THRESHOLD", "3", "LLM__BREAKER__COOLDOWN_S", "0.1",
			"LLM__RETRY__MAX_ATTEMPTS", "4").Client(t, polygateway.WithLimiter(lim), polygateway.WithBreaker(br))

	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(time.Duration(rand.IntN(400))*time.Millisecond, cancel)
			_, err := c.Chat(ctx, []polygateway.Message{polygateway.User("storm")}, polygateway.WithStream(i%2 == 0))
			kind := "ok"
			switch {
			case errors.Is(err, context.Canceled):
				kind = "cancelled"
			case err != nil:
				kind = "error"
				if !errors.Is(err, polygateway.ErrGateway) {
					t.Errorf("error outside the taxonomy: %v", err)
				}
			}
			mu.Lock()
			outcomes[kind]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	t.Logf("outcomes: %v", outcomes)
	if outcomes["cancelled"] == 0 || outcomes["ok"] == 0 {
		t.Fatalf("the storm did not exercise both cancellations and successes: %v", outcomes)
	}
	ctx := context.Background()
	for _, s := range c.Sources(ctx) {
		if s.InFlight != 0 || s.Usage.InFlight != 0 || s.Breaker.ProbeHeld {
			t.Errorf("%s: in-flight %d, permits %d, probe held %v", s.Name, s.InFlight, s.Usage.InFlight, s.Breaker.ProbeHeld)
		}
	}
	if u, _ := lim.Usage(ctx, "LLM", ""); u.InFlight != 0 {
		t.Errorf("global permits held: %d", u.InFlight)
	}
}
