package fairqueue_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// serve runs one call through g: it waits for its turn, holds a unit for
// service, and hands it on. It returns when the call was admitted.
func serve(t *testing.T, g *gate, class core.Priority, name string, service time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := g.acquire(t.Context(), class, name); err != nil {
		t.Error(err)
		return 0
	}
	waited := time.Since(start)
	time.Sleep(service)
	g.release("s")
	return waited
}

// TestInteractiveGoesBeforeQueuedBatch: 40 batch calls wait on 2 units
// of 200 ms each; an interactive call made meanwhile is admitted at the
// next free unit, within one service time.
func TestInteractiveGoesBeforeQueuedBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, core.SystemClock{}, fairqueue.Config{}, 2, 0)
		var wg sync.WaitGroup
		for range 40 {
			wg.Go(func() { serve(t, g, core.PriorityBatch, "bulk", 200*time.Millisecond) })
		}
		time.Sleep(450 * time.Millisecond)
		waited := serve(t, g, core.PriorityInteractive, "person", 200*time.Millisecond)
		if waited > 200*time.Millisecond {
			t.Fatalf("the interactive call waited %v behind the batch, want at most one service time", waited)
		}
		wg.Wait()
		t.Logf("interactive call admitted after %v with 40 batch calls queued", waited)
	})
}

// TestTenantsTakeTurns: three tenants queue 30, 10 and 2 calls of one
// class on one unit; they are served in turn (a, b, c, a, b, c, a, b, …)
// until the small ones run out, each in its own arrival order.
func TestTenantsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, core.SystemClock{}, fairqueue.Config{}, 1, 0)
		var mu sync.Mutex
		var served []string
		hold := make(chan struct{})
		go func() { // holds the unit while the others queue
			if _, err := g.acquire(t.Context(), core.PriorityNormal, "x"); err != nil {
				t.Error(err)
			}
			<-hold
			g.release("s")
		}()
		synctest.Wait()
		var wg sync.WaitGroup
		for _, q := range []struct {
			name string
			n    int
		}{{"a", 30}, {"b", 10}, {"c", 2}} {
			for i := range q.n {
				wg.Go(func() {
					if _, err := g.acquire(t.Context(), core.PriorityNormal, q.name); err != nil {
						t.Error(err)
					}
					mu.Lock()
					served = append(served, fmt.Sprint(q.name, i))
					mu.Unlock()
					time.Sleep(10 * time.Millisecond)
					g.release("s")
				})
				synctest.Wait() // arrive in this order
			}
		}
		close(hold)
		wg.Wait()
		want := []string{"a0", "b0", "c0", "a1", "b1", "c1"}
		for i := 2; i < 10; i++ {
			want = append(want, fmt.Sprint("a", i), fmt.Sprint("b", i))
		}
		for i := 10; i < 30; i++ {
			want = append(want, fmt.Sprint("a", i))
		}
		if !slices.Equal(served, want) {
			t.Fatalf("served %v\nwant   %v", served, want)
		}
	})
}

// TestBatchIsNotStarved: under a steady stream of interactive calls that
// alone would keep the units busy, every batch call completes, and no
// more than Share + core.NumPriorities - 2 admissions in a row pass batch over.
func TestBatchIsNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newGate(t, core.SystemClock{}, fairqueue.Config{}, 2, 0)
		ctx, stop := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		for range 8 { // interactive callers, always one more waiting
			wg.Go(func() {
				for ctx.Err() == nil {
					if _, err := g.acquire(ctx, core.PriorityInteractive, "live"); err != nil {
						return
					}
					time.Sleep(100 * time.Millisecond)
					g.release("s")
				}
			})
		}
		time.Sleep(time.Second)
		var batch sync.WaitGroup
		start := time.Now()
		for range 10 {
			batch.Go(func() { serve(t, g, core.PriorityBatch, "bulk", 100*time.Millisecond) })
		}
		batch.Wait()
		took := time.Since(start)
		stop()
		wg.Wait()
		// 10 batch calls, one per 11 admissions of 50 ms each at most.
		if limit := 10 * 11 * 50 * time.Millisecond; took > limit {
			t.Fatalf("10 batch calls took %v under interactive load, want at most %v", took, limit)
		}
		t.Logf("10 batch calls done in %v under a steady interactive load; longest run past a class %d", took, g.w.maxRun)
	})
}

// TestCancelledWaiterLeavesAtOnce: a waiter whose context ends leaves the
// queue at that moment; one cancelled while holding a claim passes the
// unit to the next waiter.
func TestCancelledWaiterLeavesAtOnce(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(epoch)
	var mu sync.Mutex
	var freed []string
	q := fairqueue.New(fairqueue.Config{}, clk, &mu, func(l string) { freed = append(freed, l) })
	mu.Lock()
	a, _ := q.Enqueue(core.PriorityNormal, "t", time.Time{}, 0)
	b, _ := q.Enqueue(core.PriorityNormal, "t", time.Time{}, 0)
	mu.Unlock()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := a.Wait(ctx); done <- err }()
	cancel()
	if err := <-done; err == nil {
		t.Fatal("Wait returned no error for a cancelled context")
	}
	mu.Lock()
	if q.Len() != 1 || q.Head() != b {
		t.Fatalf("after a left: %d waiting, head %v", q.Len(), q.Head())
	}
	// b is handed a unit, then cancelled: the claim comes back to no one.
	if w := q.Hand("s0"); w != b {
		t.Fatalf("hand went to %v", w)
	}
	mu.Unlock()
	go func() { _, err := b.Wait(ctx); done <- err }()
	if err := <-done; err != nil {
		t.Fatalf("a claim is reported before the context: %v", err)
	}
	mu.Lock()
	q.Leave(b)
	if q.Len() != 0 || !slices.Equal(freed, []string{"s0"}) {
		t.Fatalf("after b left with its claim: %d waiting, freed %v", q.Len(), freed)
	}
	mu.Unlock()
}

// TestDeadlineRefusedWithEstimate: once the queue knows its interval, a
// call whose deadline falls before its estimated turn is refused at
// once, with the estimate.
func TestDeadlineRefusedWithEstimate(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(epoch)
	var mu sync.Mutex
	q := fairqueue.New(fairqueue.Config{}, clk, &mu, nil)
	for range 5 {
		if _, err := q.Enqueue(core.PriorityNormal, "t", time.Time{}, 0); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // two admissions 100 ms apart: the interval is 100 ms
		clk.Advance(100 * time.Millisecond)
		q.Hand("s")
	}
	if got := q.Interval(); got != 100*time.Millisecond {
		t.Fatalf("interval %v", got)
	}
	// Tenant t has 3 in line: a fourth of t's is admitted in about 400 ms.
	_, err := q.Enqueue(core.PriorityNormal, "t", clk.Now().Add(300*time.Millisecond), 0)
	var de *core.QueueDeadlineError
	if !errors.As(err, &de) || de.Ahead != 3 || de.Estimate != 400*time.Millisecond {
		t.Fatalf("Enqueue = %v, want a DeadlineError of 3 ahead, 400ms", err)
	}
	// Another tenant takes its turn after one of t's: 1 ahead, 200 ms.
	_, err = q.Enqueue(core.PriorityNormal, "u", clk.Now().Add(150*time.Millisecond), 0)
	if !errors.As(err, &de) || de.Ahead != 1 || de.Estimate != 200*time.Millisecond {
		t.Fatalf("Enqueue = %v, want a DeadlineError of 1 ahead, 200ms", err)
	}
	if _, err := q.Enqueue(core.PriorityNormal, "u", clk.Now().Add(250*time.Millisecond), 0); err != nil {
		t.Fatalf("a deadline after the estimate is refused: %v", err)
	}
	// An interactive call has no one ahead: 100 ms.
	if _, err := q.Enqueue(core.PriorityInteractive, "v", clk.Now().Add(150*time.Millisecond), 0); err != nil {
		t.Fatalf("an interactive call is refused: %v", err)
	}
	// A deadline already past is refused whatever the queue.
	if _, err := q.Enqueue(core.PriorityInteractive, "v", clk.Now(), 0); !errors.As(err, &de) {
		t.Fatalf("Enqueue with no time left = %v", err)
	}
}

// TestWaiterMemory: 10,000 waiters in one queue cost at most 2 KiB each,
// measured on the heap.
func TestWaiterMemory(t *testing.T) {
	var mu sync.Mutex
	q := fairqueue.New(fairqueue.Config{}, core.SystemClock{}, &mu, nil)
	tenants := make([]string, 100)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%03d", i)
	}
	const n = 10_000
	ws := make([]*fairqueue.Waiter, 0, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	mu.Lock()
	for i := range n {
		w, err := q.Enqueue(core.PriorityOfRank(i%core.NumPriorities), tenants[i%len(tenants)], time.Time{}, 0)
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	mu.Unlock()
	runtime.GC()
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d waiters: %.0f bytes each on the heap", n, per)
	if per > 2048 {
		t.Fatalf("%.0f bytes per waiter, want at most 2048", per)
	}
	runtime.KeepAlive(ws)
}
