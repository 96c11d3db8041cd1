package engine

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// BenchmarkWaitingCallMemory reports the heap and stack a call waiting in
// the admission queue costs the engine (the fake queue's waiter included),
// with its stall watch (one clock timer), over 10,000 waiting calls.
// StallWindow 0 runs no watch: the difference is the watch's cost.
func BenchmarkWaitingCallMemory(b *testing.B) {
	for _, window := range []time.Duration{time.Hour, 0} {
		b.Run("stall_window="+window.String(), func(b *testing.B) { waitingCallMemory(b, window) })
	}
}

func waitingCallMemory(b *testing.B, window time.Duration) {
	const waiting = 10_000
	for range b.N {
		q := newQueueAdmitter(1)
		q.full = map[string]bool{"a": true}
		set := testSettings(src("a", 0))
		set.Backpressure.StallWindow = window
		g, err := New(Config{Settings: set, Upstream: newScriptedUpstream(), Limiter: failingLimiter{}, Breaker: failingBreaker{}, Admitter: q})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var wg sync.WaitGroup
		for range waiting {
			wg.Go(func() { _, _ = g.Handle(ctx, newCall()) })
		}
		for g.QueueDepth()[core.PriorityNormal] < waiting {
			runtime.Gosched()
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/waiting, "heap-B/waiting-call")
		b.ReportMetric(float64(after.StackInuse-before.StackInuse)/waiting, "stack-B/waiting-call")
		cancel()
		wg.Wait()
	}
}
