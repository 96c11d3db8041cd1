package redisstore

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// twoSources is a scope of two sources s1 and s2 of one slot each, both
// held, on an Admitter whose claims last 10 s: long enough that a slot
// left reserved for a claim no one takes shows as a refusal.
type twoSources struct {
	t     *testing.T
	ctx   context.Context
	a     *Admitter
	scope string
	h2    core.Ticket // the holder of s2's slot
}

func newTwoSources(t *testing.T, scope string) *twoSources {
	t.Helper()
	c, prefix := internalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b, WithQueue(QueueConfig{ClaimTTL: 10 * time.Second}))
	t.Cleanup(func() { _ = a.Close() })
	f := &twoSources{t: t, ctx: ctx, a: a, scope: scope}
	if tk := f.admit(f.on("s1", nil)); !tk.Admitted() {
		t.Fatalf("%+v", tk)
	}
	f.h2 = f.admit(f.on("s2", nil))
	return f
}

func (f *twoSources) on(source string, w core.Waiter) core.AdmitRequest {
	return core.AdmitRequest{Permit: core.PermitRequest{Scope: f.scope, Source: source,
		SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute, Waiter: w}}
}

func (f *twoSources) admit(r core.AdmitRequest) core.Ticket {
	f.t.Helper()
	tk, err := f.a.Admit(f.ctx, r)
	if err != nil {
		f.t.Fatal(err)
	}
	return tk
}

// queue adds a waiter for s1.
func (f *twoSources) queue() core.Waiter {
	f.t.Helper()
	tk := f.admit(f.on("s1", nil))
	if tk.Queued == nil {
		f.t.Fatalf("not queued: %+v", tk)
	}
	return tk.Queued
}

// finishS2 ends s2's holder: its slot is handed, as a claim on s2, to the
// head of the line.
func (f *twoSources) finishS2() {
	f.t.Helper()
	if _, err := f.a.Finish(f.ctx, f.h2, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		f.t.Fatal(err)
	}
}

// admittedOnS2 checks that w, next in line, gets the claim on s2 and is
// admitted on it at once.
func (f *twoSources) admittedOnS2(w core.Waiter) {
	f.t.Helper()
	ev, err := w.Wait(f.ctx)
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "s2" {
		f.t.Fatalf("Wait = %+v, %v; want the claim on s2", ev, err)
	}
	if tk := f.admit(f.on("s2", w)); !tk.Admitted() {
		f.t.Fatalf("the next waiter was not admitted on s2 (%+v): the slot reserved for the first claim stayed with it", tk)
	}
}

// TestALeaveNamingAnotherLabelPassesTheReservedSlotOn: a waiter of source
// s1 is handed a claim on s2 (s2's holder finished) and leaves before its
// process hears of it, naming its own source. The leave runs again with
// s2's keys, so the slot reserved on s2 goes on with the claim: the next
// waiter is admitted on s2 at once, instead of finding the slot held by
// the first claim's reservation until that claim's end (10 s here).
func TestALeaveNamingAnotherLabelPassesTheReservedSlotOn(t *testing.T) {
	f := newTwoSources(t, "LV")
	first, next := f.queue().(*qwaiter), f.queue()
	f.finishS2()
	if _, err := f.a.leave(f.ctx, first.k, first.id, "s1"); err != nil {
		t.Fatal(err)
	}
	f.admittedOnS2(next)
}

// TestAReclaimOfAClaimOfAnotherLabelPassesTheReservedSlotOn: an Admit of a
// call on s1 queues it and its reply is lost; the entry is then handed a
// claim on s2 (s2's holder finished). The reclaim of that Admit, which
// holds only s1's keys, takes the entry out with a leave of s2, so the
// slot reserved on s2 goes on with the claim: the next waiter is admitted
// on s2 at once instead of after the first claim's end (10 s here).
func TestAReclaimOfAClaimOfAnotherLabelPassesTheReservedSlotOn(t *testing.T) {
	f := newTwoSources(t, "RC")
	lost := f.on("s1", nil)
	lease := newLease(&lost.Permit)
	if res := rawAdmit(t, f.a, lost, lease); res[allowReply+5] != 1 {
		t.Fatalf("the lost Admit did not queue: %v", res)
	}
	next := f.queue()
	f.finishS2()
	j := &reclaim{permit: core.Permit{Scope: f.scope, Source: "s1", Lease: lease}, settle: core.Settlement{Kind: core.SettleRefund},
		probe: true, lost: true}
	if err := f.a.reclaim(f.ctx, j); err != nil {
		t.Fatal(err)
	}
	f.admittedOnS2(next)
}
