package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestQueueHandsASlotOn: one slot held, three callers wait; each release
// hands the slot to the next, in class order, at once.
func TestQueueHandsASlotOn(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	q := redisstore.NewQueue(l, redisstore.QueueConfig{})
	defer q.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "QH", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	g, _, err := queueAcquire(ctx, q, req, core.Place{})
	if err != nil || !g.OK {
		t.Fatalf("first: %+v %v", g, err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for _, p := range []struct {
		name  string
		class core.Priority
	}{{"batch", core.PriorityBatch}, {"normal", core.PriorityNormal}, {"interactive", core.PriorityInteractive}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, _, err := queueAcquire(ctx, q, req, core.Place{Priority: p.class, Tenant: "t"})
			if err != nil || !g.OK {
				t.Errorf("%s: %+v %v", p.name, g, err)
				return
			}
			mu.Lock()
			order = append(order, p.name)
			mu.Unlock()
			if err := q.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
				t.Error(err)
			}
		}()
		time.Sleep(50 * time.Millisecond)
	}
	if err := q.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("order %v", order)
	if len(order) != 3 || order[0] != "interactive" || order[1] != "normal" || order[2] != "batch" {
		t.Fatalf("order %v", order)
	}
}
