package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestQueueWaiterSurvivesASubscriberReconnect: a waiter's process loses
// its subscriber connection (the server kills it) while the slot it waits
// for is released: the script finds no one listening and drops its entry.
// When the subscriber is back, the process asks for its waiters' state,
// learns the entry is gone, and the waiter asks again and is admitted.
func TestQueueWaiterSurvivesASubscriberReconnect(t *testing.T) {
	rs := startPrivateRedis(t)
	admin := privateClient(t, rs)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	mk := func() *redisstore.Queue {
		q := redisstore.NewQueue(redisstore.NewLimiter(privateClient(t, rs), redisstore.WithPrefix("qre")), redisstore.QueueConfig{})
		t.Cleanup(func() { _ = q.Close() })
		return q
	}
	holder, waiter := mk(), mk()
	req := core.PermitRequest{Scope: "RE", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, _, err := holder.Admit(ctx, req, core.Place{}, nil)
	if err != nil || !hold.OK {
		t.Fatalf("%+v %v", hold, err)
	}
	done := make(chan error, 1)
	go func() {
		g, _, err := queueAcquire(ctx, waiter, req, core.Place{})
		if err == nil && !g.OK {
			err = errNotQueued
		}
		done <- err
	}()
	waitDepth(t, ctx, holder, "RE", func(d int) bool { return d == 1 })
	// Both processes' subscribers go; the waiter's comes back after the
	// release, which reaches no one.
	if err := admin.Do(ctx, "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	if err := holder.Release(ctx, hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the waiter was never admitted after its subscriber reconnected")
	}
}

// TestQueueLeasesAreRenewed: with a lease of 600 ms, a waiter without a
// deadline keeps its place for seconds (its process renews the lease),
// while the entry of a process that stopped renewing lapses.
func TestQueueLeasesAreRenewed(t *testing.T) {
	prefix := freshPrefix(t, newClient(t))
	cfg := redisstore.QueueConfig{Lease: 600 * time.Millisecond}
	live := newProcess(t, prefix, cfg)
	dead := newProcess(t, prefix, cfg)
	ctx, cancel := context.WithCancel(t.Context())
	defer time.AfterFunc(20*time.Second, cancel).Stop()
	defer cancel()
	req := core.PermitRequest{Scope: "LEASE", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, _, err := live.q.Admit(ctx, req, core.Place{}, nil)
	if err != nil || !hold.OK {
		t.Fatalf("%+v %v", hold, err)
	}
	if _, w, err := dead.q.Admit(ctx, req, core.Place{Tenant: "dead"}, nil); err != nil || w == nil {
		t.Fatalf("%v %v", w, err)
	}
	_ = dead.q.Close() // it no longer renews, nor listens
	done := make(chan error, 1)
	go func() {
		g, _, err := queueAcquire(ctx, live.q, req, core.Place{Tenant: "live"})
		if err == nil && !g.OK {
			err = errNotQueued
		}
		done <- err
	}()
	waitDepth(t, ctx, live.q, "LEASE", func(d int) bool { return d == 2 })
	// Five leases long: the dead process's entry lapses (any script
	// drops it), the live one's stays.
	<-time.After(3 * time.Second)
	if _, w, err := live.q.Admit(ctx, req, core.Place{Tenant: "probe"}, nil); err != nil || w == nil {
		t.Fatalf("%v %v", w, err)
	} else {
		w.Leave(ctx)
	}
	waitDepth(t, ctx, live.q, "LEASE", func(d int) bool { return d == 1 })
	if err := live.q.Release(ctx, hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
