package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
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
	mk := func() *redisstore.Admitter {
		return newQueueAdmitter(t, privateClient(t, rs), "qre", redisstore.QueueConfig{})
	}
	holder, waiter := mk(), mk()
	req := core.PermitRequest{Scope: "RE", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, holder, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	done := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, waiter, req, core.Place{})
		if err == nil && !tk.Admitted() {
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
	if err := finish(ctx, holder, hold); err != nil {
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
	hold, err := admitOnce(ctx, live.a, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	if tk, err := admitOnce(ctx, dead.a, req, core.Place{Tenant: "dead"}); err != nil || tk.Queued == nil {
		t.Fatalf("%+v %v", tk, err)
	}
	_ = dead.a.Close() // it no longer renews, nor listens
	done := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, live.a, req, core.Place{Tenant: "live"})
		if err == nil && !tk.Admitted() {
			err = errNotQueued
		}
		done <- err
	}()
	waitDepth(t, ctx, live.a, "LEASE", func(d int) bool { return d == 2 })
	// Five leases long: the dead process's entry lapses (any script
	// drops it), the live one's stays.
	<-time.After(3 * time.Second)
	if tk, err := admitOnce(ctx, live.a, req, core.Place{Tenant: "probe"}); err != nil || tk.Queued == nil {
		t.Fatalf("%+v %v", tk, err)
	} else {
		tk.Queued.Leave(ctx)
	}
	waitDepth(t, ctx, live.a, "LEASE", func(d int) bool { return d == 1 })
	if err := finish(ctx, live.a, hold); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestQueueEntryOfALostAdmitLeavesTheLine: a call's Admit is cut off by a
// black hole while the gate is full; its reply never comes, and the
// command itself reaches Redis late, when the link returns (as after a
// TCP retransmission), so it may queue an entry after its process gave
// the call up. Once Redis answers, the reclaim of that Admit takes the
// entry out of line (or, when it came first, keeps the late Admit from
// queueing): the line is empty, and the slot the holder frees goes to
// the next caller at once instead of to a waiter no one is behind.
func TestQueueEntryOfALostAdmitLeavesTheLine(t *testing.T) {
	rs := startPrivateRedis(t)
	fw := startForwarder(t, fmt.Sprintf("127.0.0.1:%d", rs.port))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	holder := newQueueAdmitter(t, privateClient(t, rs), "qlost", redisstore.QueueConfig{})
	opt, err := redis.ParseURL(fw.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.ContextTimeoutEnabled = true
	far := newQueueAdmitter(t, redis.NewClient(opt), "qlost", redisstore.QueueConfig{})
	req := core.PermitRequest{Scope: "LOST", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, holder, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	// The far process's scripts and connection are in place: a call that
	// queues, then leaves.
	if tk, err := admitOnce(ctx, far, req, core.Place{}); err != nil || tk.Queued == nil {
		t.Fatalf("%+v %v", tk, err)
	} else {
		tk.Queued.Leave(ctx)
	}
	waitDepth(t, ctx, holder, "LOST", func(d int) bool { return d == 0 })

	fw.set(linkBlackhole)
	short, stop := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = far.Admit(short, core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: req})
	stop()
	if err == nil {
		t.Fatal("an Admit through the black hole answered")
	}
	fw.set(linkPass)
	for far.Reclaiming() > 0 {
		select {
		case <-ctx.Done():
			t.Fatal("the reclaim of the lost Admit never landed")
		case <-time.After(5 * time.Millisecond):
		}
	}
	waitDepth(t, ctx, holder, "LOST", func(d int) bool { return d == 0 })
	if err := finish(ctx, holder, hold); err != nil {
		t.Fatal(err)
	}
	next, err := admitOnce(ctx, holder, req, core.Place{})
	if err != nil || !next.Admitted() {
		t.Fatalf("the freed slot did not go to the next caller: %+v %v", next, err)
	}
}

// behindADeadHolder returns a process of a scope whose only slot is held,
// with a 1 s lease, by another process that died without releasing it;
// both run on clk, which the test advances.
func behindADeadHolder(t *testing.T, scope string) (context.Context, *backendtest.FakeClock, *process, core.PermitRequest) {
	t.Helper()
	prefix := freshPrefix(t, newClient(t))
	clk := backendtest.NewFakeClock(time.Now())
	dead := newProcess(t, prefix, redisstore.QueueConfig{}, redisstore.WithClock(clk))
	live := newProcess(t, prefix, redisstore.QueueConfig{}, redisstore.WithClock(clk))
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req := core.PermitRequest{Scope: scope, Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Second}
	if hold, err := admitOnce(ctx, dead.a, req, core.Place{}); err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	_ = dead.a.Close() // it never releases its slot
	return ctx, clk, live, req
}

// queueAndFinish admits req through p's queue in the background, then
// finishes it; the channel says how it went.
func queueAndFinish(ctx context.Context, p *process, req core.PermitRequest) <-chan error {
	done := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, p.a, req, core.Place{})
		if err == nil {
			err = finish(ctx, p.a, tk)
		}
		done <- err
	}()
	return done
}

// drive advances clk in steps of 50 ms, up to 3 s past the dead holder's
// lease start, until every channel of done has answered, and returns
// their answers. A step waits a moment of real time, so that a message
// the scripts sent (a turn, relative to when it was sent) is applied
// before the clock moves past it; 3 s stays within every lease of the
// queue's entries, so no waiter gets in by its place lapsing.
func drive(ctx context.Context, clk *backendtest.FakeClock, done ...<-chan error) []error {
	var errs []error
	for step := 0; len(done) > 0; step++ {
		select {
		case err := <-done[0]:
			errs, done = append(errs, err), done[1:]
			continue
		case <-ctx.Done():
			return append(errs, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
		if step < 60 {
			clk.Advance(50 * time.Millisecond)
		}
	}
	return errs
}

// TestQueueTakesASlotThatLapsesUnreleased: a process holds the only slot
// and dies without releasing it (its lease is 1 s), while four callers
// queue for the slot. No release will hand the slot on: once the lease
// ends, the head of the line takes it (it holds a timer for the end of
// the lease), and the line moves again, every caller admitted, instead of
// the line waiting for a release that never comes (with every new call
// queueing behind it) until the callers' deadlines.
func TestQueueTakesASlotThatLapsesUnreleased(t *testing.T) {
	t.Parallel()
	ctx, clk, live, req := behindADeadHolder(t, "LAPSE")
	var done []<-chan error
	for range 4 {
		done = append(done, queueAndFinish(ctx, live, req))
	}
	waitDepth(t, ctx, live.a, "LAPSE", func(d int) bool { return d == 4 })
	for _, err := range drive(ctx, clk, done...) {
		if err != nil {
			t.Fatalf("a caller behind a slot that lapsed unreleased was not admitted: %v", err)
		}
	}
}

// TestQueueTimerForALapsingSlotPassesToTheNextHead: the head of the line
// holds the timer for the end of a slot that will lapse unreleased (its
// holder died); it leaves before that end. The next waiter becomes the
// head, is told when the slot ends, and takes it then, though nothing
// else happens in the queue meanwhile.
func TestQueueTimerForALapsingSlotPassesToTheNextHead(t *testing.T) {
	t.Parallel()
	ctx, clk, live, req := behindADeadHolder(t, "LAPSE2")
	head, err := admitOnce(ctx, live.a, req, core.Place{})
	if err != nil || head.Queued == nil {
		t.Fatalf("%+v %v", head, err)
	}
	next := queueAndFinish(ctx, live, req)
	waitDepth(t, ctx, live.a, "LAPSE2", func(d int) bool { return d == 2 })
	head.Queued.Leave(ctx)
	if err := drive(ctx, clk, next)[0]; err != nil {
		t.Fatalf("the waiter behind a head that left was not admitted when the slot lapsed: %v", err)
	}
}
