package memory_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// queueConfig is the queue the conformance suite expects.
var queueConfig = memory.QueueConfig{Share: backendtest.SuiteQueueShare, ClaimTTL: backendtest.SuiteClaimTTL}

func TestAdmitterQueueSuite(t *testing.T) {
	backendtest.RunAdmitterQueueSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l := memory.NewLimiter(memory.WithClock(clk), memory.WithQueue(queueConfig))
		b := memory.NewBreaker(memory.WithClock(clk))
		return backendtest.AdmitterBackend{Admitter: core.ComposeAdmitter(l, b), Limiter: l, Breaker: b}
	})
}

// TestQueuedCallsCostLittle measures 10,000 calls queued behind a full
// gate: the heap they take, and that waiting starts no goroutine beyond
// the waiting callers' own.
func TestQueuedCallsCostLittle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := memory.NewLimiter(memory.WithQueue(queueConfig))
		a := core.ComposeAdmitter(l, memory.NewBreaker())
		req := core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: core.PermitRequest{
			Scope: "s", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1},
		}}
		hold, err := a.Admit(t.Context(), req)
		if err != nil || !hold.Admitted() {
			t.Fatalf("Admit = %+v, %v", hold, err)
		}
		tenants := make([]string, 100)
		for i := range tenants {
			tenants[i] = fmt.Sprintf("tenant-%03d", i)
		}
		const n = 10_000
		ws := make([]core.Waiter, 0, n)
		goroutines := runtime.NumGoroutine()
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for i := range n {
			r := req
			r.Permit.Place = core.Place{Priority: core.PriorityOfRank(i % core.NumPriorities), Tenant: tenants[i%len(tenants)]}
			tk, err := a.Admit(t.Context(), r)
			if err != nil || tk.Queued == nil {
				t.Fatalf("Admit %d = %+v, %v; want queued", i, tk, err)
			}
			ws = append(ws, tk.Queued)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		per := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
		t.Logf("%d queued calls: %.0f bytes each on the heap", n, per)
		if per > 2048 {
			t.Fatalf("%.0f bytes per queued call, want at most 2048", per)
		}
		// (The count is the process's: a goroutine of another test may end
		// meanwhile, none of this test may start.)
		if g := runtime.NumGoroutine(); g > goroutines {
			t.Fatalf("%d goroutines with %d calls queued, %d before", g, n, goroutines)
		}
		// Ten callers wait: ten goroutines, theirs, and no other.
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for _, w := range ws[:10] {
			wg.Go(func() {
				if _, err := w.Wait(ctx); !errors.Is(err, context.Canceled) {
					t.Errorf("Wait = %v, want cancelled", err)
				}
			})
		}
		synctest.Wait()
		if g := runtime.NumGoroutine(); g > goroutines+10 {
			t.Fatalf("%d goroutines with 10 callers waiting, want at most %d", g, goroutines+10)
		}
		cancel()
		wg.Wait()
		for _, w := range ws[10:] {
			w.Leave(t.Context())
		}
		if _, err := a.Finish(t.Context(), hold, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
			t.Fatal(err)
		}
		if u, _ := l.Usage(t.Context(), "s", "a"); u.InFlight != 0 {
			t.Fatalf("usage %+v after every waiter left, want nothing held", u)
		}
	})
}

// TestExpiredSlotHandedOn shows that a slot whose lease ends, its permit
// never released, goes to the next waiter as a released one does: the
// line does not stall behind a permit that is never finished.
func TestExpiredSlotHandedOn(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	l := memory.NewLimiter(memory.WithClock(clk), memory.WithQueue(queueConfig))
	req := core.PermitRequest{Scope: "s", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: 10 * time.Second}
	if g, err := l.TryAcquire(t.Context(), req); err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	g, err := l.TryAcquire(t.Context(), req)
	if err != nil || g.Queued == nil {
		t.Fatalf("TryAcquire with the slot held = %+v, %v; want queued", g, err)
	}
	clk.Advance(10 * time.Second)
	if u, _ := l.Usage(t.Context(), "s", ""); u.InFlight != 1 {
		t.Fatalf("usage %+v after the lease ended, want the slot reserved for the waiter", u)
	}
	ev, err := g.Queued.Wait(t.Context())
	if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "a" {
		t.Fatalf("Wait = %+v, %v; want a claim on a", ev, err)
	}
	w := req
	w.Waiter = g.Queued
	if g, err := l.TryAcquire(t.Context(), w); err != nil || !g.OK {
		t.Fatalf("TryAcquire with the claim = %+v, %v", g, err)
	}
}

// TestWaiterThatNeverFitsPassesItsClaimOn shows that a woken waiter whose
// request no window will ever fit is refused and leaves, and the unit
// handed to it goes to the next waiter.
func TestWaiterThatNeverFitsPassesItsClaimOn(t *testing.T) {
	t.Parallel()
	l := memory.NewLimiter(memory.WithQueue(queueConfig))
	req := core.PermitRequest{Scope: "s", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1, TPM: 100}}
	hold, err := l.TryAcquire(t.Context(), req)
	if err != nil || !hold.OK {
		t.Fatalf("TryAcquire = %+v, %v", hold, err)
	}
	huge := req
	huge.Tokens = 1000 // more than the TPM: refused by the slot first, it queues
	g1, err1 := l.TryAcquire(t.Context(), huge)
	g2, err2 := l.TryAcquire(t.Context(), req)
	if err1 != nil || err2 != nil || g1.Queued == nil || g2.Queued == nil {
		t.Fatalf("TryAcquire with the slot held = %+v, %v / %+v, %v; want both queued", g1, err1, g2, err2)
	}
	if err := l.Release(t.Context(), hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	if ev, err := g1.Queued.Wait(t.Context()); err != nil || ev.Kind != core.WaitClaimed {
		t.Fatalf("first waiter: Wait = %+v, %v; want a claim", ev, err)
	}
	huge.Waiter = g1.Queued
	if g, err := l.TryAcquire(t.Context(), huge); err != nil || g.OK || g.Gate != core.GateSourceTPM || g.Queued != nil {
		t.Fatalf("TryAcquire of a request no window fits, with its claim = %+v, %v; want refused by the TPM, not queued", g, err)
	}
	if ev, err := g2.Queued.Wait(t.Context()); err != nil || ev.Kind != core.WaitClaimed {
		t.Fatalf("second waiter: Wait = %+v, %v; want the claim passed on", ev, err)
	}
	next := req
	next.Waiter = g2.Queued
	if g, err := l.TryAcquire(t.Context(), next); err != nil || !g.OK {
		t.Fatalf("TryAcquire with the claim passed on = %+v, %v", g, err)
	}
	if u, _ := l.Usage(t.Context(), "s", "a"); u.InFlight != 1 {
		t.Fatalf("usage %+v, want the one slot held", u)
	}
}
