package redisstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestQueueHandsASlotOn: one slot held, three callers wait; each Finish
// hands the slot to the next, in class order, at once.
func TestQueueHandsASlotOn(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	a := newQueueAdmitter(t, c, prefix, redisstore.QueueConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "QH", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	first, _, err := queueAdmit(ctx, a, req, core.Place{})
	if err != nil || !first.Admitted() {
		t.Fatalf("first: %+v %v", first, err)
	}
	var mu sync.Mutex
	var order []string
	var wg sync.WaitGroup
	for i, p := range []core.Priority{core.PriorityBatch, core.PriorityNormal, core.PriorityInteractive} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, _, err := queueAdmit(ctx, a, req, core.Place{Priority: p, Tenant: "t"})
			if err != nil || !tk.Admitted() {
				t.Errorf("%s: %+v %v", p, tk, err)
				return
			}
			mu.Lock()
			order = append(order, p.String())
			mu.Unlock()
			if err := finish(ctx, a, tk); err != nil {
				t.Error(err)
			}
		}()
		waitDepth(t, ctx, a, "QH", func(d int) bool { return d == i+1 })
	}
	if err := finish(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("order %v", order)
	if len(order) != 3 || order[0] != "interactive" || order[1] != "normal" || order[2] != "batch" {
		t.Fatalf("order %v", order)
	}
}

// TestQueueRefusedCircuitIsNotQueued: a source whose circuit refuses is
// not queued, even behind waiters; and a waiter woken on a source
// switched off since leaves the line, its claim going on to the next.
func TestQueueRefusedCircuitIsNotQueued(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	a := redisstore.NewAdmitter(l, b, redisstore.WithQueue(redisstore.QueueConfig{}))
	defer a.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "QB", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, a, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("hold: %+v %v", hold, err)
	}
	w1, err := admitOnce(ctx, a, req, core.Place{Tenant: "one"})
	if err != nil || w1.Queued == nil {
		t.Fatalf("first waiter: %+v %v", w1, err)
	}
	w2, err := admitOnce(ctx, a, req, core.Place{Tenant: "two"})
	if err != nil || w2.Queued == nil {
		t.Fatalf("second waiter: %+v %v", w2, err)
	}
	// Source b is switched off: a call on it is refused by its circuit,
	// not queued behind the two waiters.
	if err := b.SetEnabled(ctx, "QB", "b", core.BreakerConfig{}, false); err != nil {
		t.Fatal(err)
	}
	off := req
	off.Source = "b"
	tk, err := admitOnce(ctx, a, off, core.Place{})
	if err != nil || tk.Admission.Allowed || !tk.Admission.Disabled || tk.Queued != nil {
		t.Fatalf("a call on a source switched off: %+v %v", tk, err)
	}
	waitDepth(t, ctx, a, "QB", func(d int) bool { return d == 2 })
	// The slot goes to the first waiter; before it admits, its source is
	// switched off: it leaves, and the claim goes to the second.
	if err := finish(ctx, a, hold); err != nil {
		t.Fatal(err)
	}
	ev, err := w1.Queued.Wait(ctx)
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "a" {
		t.Fatalf("first waiter woken with %+v %v", ev, err)
	}
	if err := b.SetEnabled(ctx, "QB", "a", core.BreakerConfig{}, false); err != nil {
		t.Fatal(err)
	}
	woken := req
	woken.Place, woken.Waiter = core.Place{Tenant: "one"}, w1.Queued
	tk, err = a.Admit(ctx, core.AdmitRequest{Permit: woken})
	if err != nil || tk.Admission.Allowed || tk.Queued != nil {
		t.Fatalf("the holder of a claim on a source switched off: %+v %v", tk, err)
	}
	ev, err = w2.Queued.Wait(ctx)
	if err != nil || ev.Kind != core.WaitClaimed {
		t.Fatalf("second waiter woken with %+v %v", ev, err)
	}
	w2.Queued.Leave(ctx)
	if d, err := a.Depth(ctx, "QB", ""); err != nil || d != [core.NumPriorities]int{} {
		t.Fatalf("depth after: %v %v", d, err)
	}
}

// TestQueueClaimSaysHowLongItHasLeft: the waiter a freed slot is handed
// to learns how long its claim stays its own — at most the claim period,
// and, with a period of a minute, most of it.
func TestQueueClaimSaysHowLongItHasLeft(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	const ttl = time.Minute
	a := newQueueAdmitter(t, c, prefix, redisstore.QueueConfig{ClaimTTL: ttl})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "QL", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	first, err := admitOnce(ctx, a, req, core.Place{})
	if err != nil || !first.Admitted() {
		t.Fatalf("first: %+v %v", first, err)
	}
	second, err := admitOnce(ctx, a, req, core.Place{})
	if err != nil || second.Queued == nil {
		t.Fatalf("second, with the slot held: %+v %v; want queued", second, err)
	}
	if err := finish(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	ev, err := second.Queued.Wait(ctx)
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "a" {
		t.Fatalf("Wait = %+v, %v; want a claim on a", ev, err)
	}
	if ev.ClaimLeft <= ttl/2 || ev.ClaimLeft > ttl {
		t.Fatalf("ClaimLeft = %v, want in (%v, %v]", ev.ClaimLeft, ttl/2, ttl)
	}
	req.Waiter = second.Queued
	tk, err := admitOnce(ctx, a, req, core.Place{})
	if err != nil || !tk.Admitted() {
		t.Fatalf("admission with the claim: %+v %v", tk, err)
	}
	if err := finish(ctx, a, tk); err != nil {
		t.Fatal(err)
	}
}
