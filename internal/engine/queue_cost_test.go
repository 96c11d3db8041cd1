package engine

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// maxWaitingHeap bounds the heap one call waiting in the admission queue
// may cost the process beyond its caller's own goroutine and call: its
// engine state, its context and stall watch, and its place in the queue.
const maxWaitingHeap = 2048

// TestWaitingCallsCostNoGoroutineAndLittleHeap: 10,000 calls waiting in
// one process's in-process admission queue (the memory limiter's), with
// the stall watch on, start no goroutine beyond the callers' own and cost
// at most 2 KiB of heap each beyond what the same callers cost holding
// their calls without making them. Nothing is timed: goroutines and heap
// are counted once every goroutine of the bubble blocks.
func TestWaitingCallsCostNoGoroutineAndLittleHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 waiting calls: not in -short")
	}
	const waiting = 10_000
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		s := src("a", 0)
		s.Limits.MaxConcurrency = 1
		up := newScriptedUpstream().script("a", step{block: true})
		g, err := New(Config{Settings: testSettings(s), Upstream: up,
			Limiter: memory.NewLimiter(memory.WithQueue(memory.QueueConfig{})), Breaker: memory.NewBreaker()})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = g.Handle(ctx, newCall()) }() // holds the only slot
		<-up.started

		// The callers' own cost: as many goroutines holding a call each.
		held := make([]*core.Call, waiting)
		var next atomic.Int64
		idle := heapOf(t, waiting, func(release <-chan struct{}) {
			held[next.Add(1)-1] = newCall()
			<-release
		})
		clear(held)
		goroutines := runtime.NumGoroutine()
		var extra int
		queued := heapOf(t, waiting, func(<-chan struct{}) {
			_, _ = g.Handle(ctx, newCall())
		}, func() {
			extra = runtime.NumGoroutine() - goroutines - waiting
			if d := g.QueueDepth()[core.PriorityNormal]; d != waiting {
				t.Fatalf("%d calls wait in the queue, want %d", d, waiting)
			}
		}, cancel)
		heap := (queued - idle) / waiting
		t.Logf("%d waiting calls: %.0f B of heap each beyond their callers' %.0f B; %d goroutines beyond the callers'",
			waiting, heap, idle/waiting, extra)
		// Fewer (a goroutine of the bubble that ended meanwhile) costs
		// nothing; any more is a goroutine a waiting call started.
		if extra > 0 {
			t.Errorf("%d goroutines beyond the %d callers' own while they wait", extra, waiting)
		}
		if heap > maxWaitingHeap {
			t.Errorf("a waiting call costs %.0f B of heap, more than %d", heap, maxWaitingHeap)
		}
	})
}

// heapOf starts n goroutines running f, and returns how much the heap grew
// once they all block (in a synctest bubble); then it runs check, closes
// f's release channel, runs end, and waits for the goroutines.
func heapOf(t *testing.T, n int, f func(release <-chan struct{}), then ...func()) float64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { f(release) })
	}
	synctest.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	for _, fn := range then {
		fn()
	}
	close(release)
	wg.Wait()
	return float64(int64(after.HeapAlloc) - int64(before.HeapAlloc))
}
