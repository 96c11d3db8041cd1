package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestReclaimHandsTheSlotToTheNextWaiter: a process's Finish fails (its
// link to Redis refused); the reclaim that gives its slot back once the
// link returns hands the slot to the waiter of another process, which is
// admitted long before the permit's lease (10 minutes) would free it.
func TestReclaimHandsTheSlotToTheNextWaiter(t *testing.T) {
	t.Parallel()
	rs := startPrivateRedis(t)
	fw := startForwarder(t, fmt.Sprintf("127.0.0.1:%d", rs.port))
	ca, err := redisstore.NewClientFromURL(fw.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ca.Close() })
	a := newQueueAdmitter(t, ca, "pgw", redisstore.QueueConfig{})
	b := newQueueAdmitter(t, privateClient(t, rs), "pgw", redisstore.QueueConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "RC", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: 10 * time.Minute}
	held, _, err := queueAdmit(ctx, a, req, core.Place{})
	if err != nil || !held.Admitted() {
		t.Fatalf("first admission: %+v %v", held, err)
	}
	admitted := make(chan error, 1)
	go func() {
		tk, _, err := queueAdmit(ctx, b, req, core.Place{})
		if err == nil && !tk.Admitted() {
			err = fmt.Errorf("not admitted: %+v", tk)
		}
		if err == nil {
			err = finish(ctx, b, tk)
		}
		admitted <- err
	}()
	for {
		d, err := b.Depth(ctx, "RC", "")
		if err != nil {
			t.Fatal(err)
		}
		if d[core.PriorityNormal] == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the second call never waited in line")
		case <-time.After(5 * time.Millisecond):
		}
	}
	fw.set(linkRefuse)
	if err := finish(ctx, a, held); err == nil {
		t.Fatal("Finish succeeded through a refused link")
	}
	fw.set(linkPass)
	if err := <-admitted; err != nil {
		t.Fatalf("the waiter of the other process: %v (its slot was not handed on by the reclaim)", err)
	}
}

// TestWaiterThatLeftDuringAnOutageLeavesTheLine: a waiter gives up while
// its process cannot reach Redis, so its leave fails; once the link
// returns its process takes the entry out of line, long before the entry's
// lease (10 minutes) would.
func TestWaiterThatLeftDuringAnOutageLeavesTheLine(t *testing.T) {
	t.Parallel()
	rs := startPrivateRedis(t)
	fw := startForwarder(t, fmt.Sprintf("127.0.0.1:%d", rs.port))
	ca, err := redisstore.NewClientFromURL(fw.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ca.Close() })
	a := newQueueAdmitter(t, ca, "pgw", redisstore.QueueConfig{Lease: 10 * time.Minute})
	b := newQueueAdmitter(t, privateClient(t, rs), "pgw", redisstore.QueueConfig{Lease: 10 * time.Minute})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "AB", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: 10 * time.Minute}
	held, _, err := queueAdmit(ctx, b, req, core.Place{})
	if err != nil || !held.Admitted() {
		t.Fatalf("first admission: %+v %v", held, err)
	}
	tk, err := admitOnce(ctx, a, req, core.Place{})
	if err != nil || tk.Admitted() || tk.Queued == nil {
		t.Fatalf("second admission: %+v %v, want it queued", tk, err)
	}
	wctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	done := make(chan error, 1)
	go func() {
		_, err := tk.Queued.Wait(wctx)
		done <- err
	}()
	depth := func() int {
		d, err := b.Depth(ctx, "AB", "")
		if err != nil {
			t.Fatal(err)
		}
		return d[core.PriorityNormal]
	}
	waitFor := func(what string, ok func() bool) {
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatal(what)
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	waitFor("the call never waited in line", func() bool { return depth() == 1 })
	fw.set(linkRefuse)
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("the waiter was woken, want it to give up")
	}
	if depth() != 1 {
		t.Fatal("the entry left the line through a refused link")
	}
	fw.set(linkPass)
	waitFor("the entry of the waiter that gave up stays in line after the link returned", func() bool { return depth() == 0 })
	if err := finish(ctx, b, held); err != nil {
		t.Fatal(err)
	}
}
