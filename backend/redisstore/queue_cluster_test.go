package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestQueueOnEveryTarget: on the single node and on a Redis Cluster, two
// processes share the queue of a scope and of a pooled scope (its keys in
// the pool's slot; its shard channels there too): the slot held goes, on
// each release, to the next waiter by class, whichever process it is in.
func TestQueueOnEveryTarget(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		var qs [2]*redisstore.Queue
		for i := range qs {
			c := tg.client
			if i == 1 { // a second process: its own connections
				if tg.name == "cluster" {
					c = newClusterClient(t)
				} else {
					c = newClient(t)
				}
			}
			qs[i] = redisstore.NewQueue(redisstore.NewLimiter(c, redisstore.WithPrefix(prefix)), redisstore.QueueConfig{})
			defer qs[i].Close()
		}
		for _, pool := range []string{"", "POOLQ"} {
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			req := core.PermitRequest{Scope: "EVERY", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1},
				GlobalLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute, Pool: pool}
			hold, _, err := qs[0].Admit(ctx, req, core.Place{}, nil)
			if err != nil || !hold.OK {
				t.Fatalf("pool %q: %+v %v", pool, hold, err)
			}
			var led ledger
			var wg sync.WaitGroup
			names := []string{"batch@0", "normal@1", "interactive@0", "normal@0"}
			classes := []core.Priority{core.PriorityBatch, core.PriorityNormal, core.PriorityInteractive, core.PriorityNormal}
			for i, name := range names {
				q := qs[name[len(name)-1]-'0']
				wg.Add(1)
				go func() {
					defer wg.Done()
					g, _, err := queueAcquire(ctx, q, req, core.Place{Priority: classes[i], Tenant: name})
					if err != nil || !g.OK {
						t.Errorf("%s: %+v %v", name, g, err)
						return
					}
					led.add(name)
					if err := q.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
						t.Error(err)
					}
				}()
				for {
					d, err := q.Depth(ctx, "EVERY", pool)
					if err != nil {
						t.Fatal(err)
					}
					if d[0]+d[1]+d[2] == i+1 {
						break
					}
					<-time.After(2 * time.Millisecond)
				}
			}
			if err := qs[0].Release(ctx, hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			cancel()
			// Normal: tenants in turn, then arrival; "normal@1" came first.
			want := []string{"interactive@0", "normal@1", "normal@0", "batch@0"}
			for i := range want {
				if i >= len(led.names) || led.names[i] != want[i] {
					t.Fatalf("pool %q: admitted %v, want %v", pool, led.names, want)
				}
			}
		}
	})
}
