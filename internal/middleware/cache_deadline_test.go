package middleware

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/core"
)

// stuckSetCache answers every Get with a miss and holds every Set until
// its context ends (a Redis that turned slow during the upstream call).
type stuckSetCache struct{}

func (stuckSetCache) Get(context.Context, string) ([]byte, bool, error) { return nil, false, nil }

func (stuckSetCache) Set(ctx context.Context, _ string, _ []byte, _ time.Duration) error {
	<-ctx.Done()
	return ctx.Err()
}

var _ core.Cache = stuckSetCache{}

// TestASlowCacheWriteNeverHoldsACallPastItsDeadline: the answer is stored
// after the upstream answered, within the call's deadline; a backend that
// does not answer by then leaves the entry unwritten, and the caller gets
// the answer at its deadline, not when the backend gives up. No warning:
// the backend did not fail, the call ran out of time.
func TestASlowCacheWriteNeverHoldsACallPastItsDeadline(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		h := core.Chain((&stubHandler{resp: answer()}).handle, Cache(cacheConfig(stuckSetCache{})))
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		resp, err := h(ctx, callWithID("c"))
		if err != nil || resp.Content != "the answer" {
			t.Fatalf("call = (%+v, %v), want the answer", resp, err)
		}
		if waited := time.Since(start); waited > 2*time.Second {
			t.Errorf("the call returned after %v, past its 2s deadline", waited)
		}
	})
}
