package redisstore_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// ExampleNewQueue admits calls through the fair queue of a Limiter's
// gates: a call that finds them full waits in line, by class and tenant,
// and is woken when a slot is handed to it or, at the head, when a rate
// window has room; Release hands the slot it frees to the next waiter.
func ExampleNewQueue() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	queue := redisstore.NewQueue(redisstore.NewLimiter(rdb), redisstore.QueueConfig{})
	defer queue.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "LLM", Source: "openai-1", SourceLimits: core.Limits{MaxConcurrency: 4}, LeaseTTL: time.Minute}
	place := core.Place{Priority: core.PriorityInteractive, Tenant: "team-a"}
	var waiter *redisstore.QueueWaiter
	for {
		grant, w, err := queue.Admit(ctx, req, place, waiter)
		if err != nil { // Redis failed, or the deadline cannot be met (*core.QueueDeadlineError)
			log.Print(err)
			return
		}
		if grant.OK {
			// … the call, then:
			_ = queue.Release(ctx, grant.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 512})
			return
		}
		if w == nil { // refused and not queued: a spend budget
			return
		}
		waiter = w
		ev, err := waiter.Wait(ctx)
		if err != nil { // the context ended; the waiter has left the line
			return
		}
		switch ev.Kind {
		case core.WaitClaimed: // a slot of ev.Source is reserved: ask there
			req.Source = ev.Source
		case core.WaitLapsed: // the place is gone: ask again as a new call
			waiter = nil
		}
	}
}
