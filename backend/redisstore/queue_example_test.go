package redisstore_test

import (
	"context"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// ExampleAdmitter_queue admits a call through the Admitter's fair queue: a
// call that finds the gates full waits in line, by class and tenant, and
// is woken when a slot is handed to it or, at the head, when a rate window
// has room; Finish hands the slot it frees to the next waiter.
func ExampleAdmitter_queue() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	admitter := redisstore.NewAdmitter(redisstore.NewLimiter(rdb), redisstore.NewBreaker(rdb), redisstore.WithQueue(redisstore.QueueConfig{}))
	defer admitter.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := core.AdmitRequest{
		Permit: core.PermitRequest{Scope: "LLM", Source: "openai-1", SourceLimits: core.Limits{MaxConcurrency: 4}, LeaseTTL: time.Minute,
			Place: core.Place{Priority: core.PriorityInteractive, Tenant: "team-a"}},
	}
	for {
		ticket, err := admitter.Admit(ctx, req)
		if err != nil { // Redis failed, or the deadline cannot be met (*core.QueueDeadlineError)
			log.Print(err)
			return
		}
		if ticket.Admitted() {
			// … the call, then:
			_, _ = admitter.Finish(ctx, ticket, core.Settlement{Kind: core.SettleActual, Tokens: 512}, core.OutcomeSuccess)
			return
		}
		if ticket.Queued == nil { // refused and not queued: the circuit, or a spend budget
			return
		}
		req.Permit.Waiter = ticket.Queued
		ev, err := ticket.Queued.Wait(ctx)
		if err != nil { // the context ended; the waiter has left the line
			return
		}
		switch ev.Kind {
		case core.WaitClaimed: // a slot of ev.Source is reserved: ask there
			req.Permit.Source = ev.Source
		case core.WaitLapsed: // the place is gone: ask again as a new call
			req.Permit.Waiter = nil
		}
	}
}
