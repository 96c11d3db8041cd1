package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// TestALeaveNamingAnotherLabelPassesTheReservedSlotOn: a waiter of source
// s1 is handed a claim on s2 (s2's holder finished) and leaves before its
// process hears of it, naming its own source. The leave runs again with
// s2's keys, so the slot reserved on s2 goes on with the claim: the next
// waiter is admitted on s2 at once, instead of finding the slot held by
// the first claim's reservation until that claim's end (10 s here).
func TestALeaveNamingAnotherLabelPassesTheReservedSlotOn(t *testing.T) {
	c, prefix := internalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b, WithQueue(QueueConfig{ClaimTTL: 10 * time.Second}))
	defer a.Close()
	one := core.Limits{MaxConcurrency: 1}
	on := func(source string, w core.Waiter) core.AdmitRequest {
		return core.AdmitRequest{Permit: core.PermitRequest{Scope: "LV", Source: source, SourceLimits: one, LeaseTTL: time.Minute, Waiter: w}}
	}
	admit := func(r core.AdmitRequest) core.Ticket {
		t.Helper()
		tk, err := a.Admit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	if tk := admit(on("s1", nil)); !tk.Admitted() {
		t.Fatalf("%+v", tk)
	}
	h2 := admit(on("s2", nil))
	w1, w2 := admit(on("s1", nil)), admit(on("s1", nil))
	if w1.Queued == nil || w2.Queued == nil {
		t.Fatalf("not queued: %+v %+v", w1, w2)
	}
	if _, err := a.Finish(ctx, h2, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		t.Fatal(err)
	}
	first := w1.Queued.(*qwaiter)
	if _, err := a.leave(ctx, first.k, first.id, "s1"); err != nil {
		t.Fatal(err)
	}
	ev, err := w2.Queued.Wait(ctx)
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "s2" {
		t.Fatalf("Wait = %+v, %v; want the claim on s2", ev, err)
	}
	if tk := admit(on("s2", w2.Queued)); !tk.Admitted() {
		t.Fatalf("the next waiter was not admitted on s2 (%+v): the slot reserved for the claim stayed with the one who left", tk)
	}
}

// TestAReclaimOfAClaimOfAnotherLabelPassesTheReservedSlotOn: an Admit of a
// call on s1 queues it and its reply is lost; the entry is then handed a
// claim on s2 (s2's holder finished). The reclaim of that Admit, which
// holds only s1's keys, takes the entry out with a leave of s2, so the
// slot reserved on s2 goes on with the claim: the next waiter is admitted
// on s2 at once instead of after the first claim's end (10 s here).
func TestAReclaimOfAClaimOfAnotherLabelPassesTheReservedSlotOn(t *testing.T) {
	c, prefix := internalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b, WithQueue(QueueConfig{ClaimTTL: 10 * time.Second}))
	defer a.Close()
	one := core.Limits{MaxConcurrency: 1}
	on := func(source string, w core.Waiter) core.AdmitRequest {
		return core.AdmitRequest{Permit: core.PermitRequest{Scope: "RC", Source: source, SourceLimits: one, LeaseTTL: time.Minute, Waiter: w}}
	}
	admit := func(r core.AdmitRequest) core.Ticket {
		t.Helper()
		tk, err := a.Admit(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	if tk := admit(on("s1", nil)); !tk.Admitted() {
		t.Fatalf("%+v", tk)
	}
	h2 := admit(on("s2", nil))
	lostReq := on("s1", nil)
	lease := newLease(&lostReq.Permit)
	if res := rawAdmit(t, a, lostReq, lease); res[allowReply+5] != 1 {
		t.Fatalf("the lost Admit did not queue: %v", res)
	}
	w2 := admit(on("s1", nil))
	if w2.Queued == nil {
		t.Fatalf("not queued: %+v", w2)
	}
	if _, err := a.Finish(ctx, h2, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		t.Fatal(err)
	}
	j := &reclaim{permit: core.Permit{Scope: "RC", Source: "s1", Lease: lease}, settle: core.Settlement{Kind: core.SettleRefund},
		probe: true, lost: true}
	if err := a.reclaim(ctx, j); err != nil {
		t.Fatal(err)
	}
	ev, err := w2.Queued.Wait(ctx)
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "s2" {
		t.Fatalf("Wait = %+v, %v; want the claim on s2", ev, err)
	}
	if tk := admit(on("s2", w2.Queued)); !tk.Admitted() {
		t.Fatalf("the next waiter was not admitted on s2 (%+v): the slot reserved for the lost Admit's claim stayed", tk)
	}
}
