package fairqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// TestWaitersInABubble runs callers as goroutines in a synctest bubble
// against a gate of a few units: random arrival times, classes and
// skewed tenants, service times, deadlines (some too short for the queue
// ahead), cancellations. The watch holds every choice to the rules; every
// caller ends exactly once (admitted, refused at once for its deadline,
// or cancelled / out of time, by then and no later); no unit is ever
// idle while a waiter is in line; the queue ends empty with every unit
// back.
func TestWaitersInABubble(t *testing.T) {
	for seed := range uint64(12) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { bubble(t, seed) })
		})
	}
}

func bubble(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	units := 1 + rng.IntN(4)
	g := newGate(t, core.SystemClock{}, fairqueue.Config{Share: 1 + rng.IntN(6)}, units, 0)
	tenants := []string{"big", "big", "big", "big", "mid", "mid", "small"}
	const callers = 150
	var admitted, refused, ended atomic.Int64
	var wg sync.WaitGroup
	for i := range callers {
		arrive := time.Duration(rng.IntN(3000)) * time.Millisecond
		class := core.PriorityOfRank(rng.IntN(core.NumPriorities))
		name := tenants[rng.IntN(len(tenants))]
		service := time.Duration(20+rng.IntN(200)) * time.Millisecond
		var deadline, cancelAfter time.Duration
		switch rng.IntN(6) {
		case 0:
			deadline = time.Duration(50+rng.IntN(3000)) * time.Millisecond
		case 1:
			cancelAfter = time.Duration(rng.IntN(2000)) * time.Millisecond
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(arrive)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if deadline > 0 {
				ctx, cancel = context.WithTimeout(ctx, deadline)
				defer cancel()
			}
			if cancelAfter > 0 {
				time.AfterFunc(cancelAfter, cancel)
			}
			start := time.Now()
			_, err := g.acquire(ctx, class, name)
			waited := time.Since(start)
			switch {
			case err == nil:
				admitted.Add(1)
				time.Sleep(service)
				g.release(fmt.Sprint("s", i%2))
			case errors.Is(err, errRefused):
				var de *core.QueueDeadlineError
				if !errors.As(err, &de) || waited != 0 {
					t.Errorf("caller %d refused with %v after %v", i, err, waited)
				}
				refused.Add(1)
			default:
				var ce *core.CanceledError
				if !errors.As(err, &ce) {
					t.Errorf("caller %d ended with %v", i, err)
				}
				if deadline > 0 && waited > deadline {
					t.Errorf("caller %d waited %v, past its deadline %v", i, waited, deadline)
				}
				ended.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load() + refused.Load() + ended.Load(); n != callers {
		t.Fatalf("%d callers ended, want %d", n, callers)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.q.Len() != 0 || g.held != 0 {
		t.Fatalf("the queue ends with %d waiters and %d units held", g.q.Len(), g.held)
	}
	for l, n := range g.reserved {
		if n != 0 {
			t.Fatalf("%d units still reserved for %s", n, l)
		}
	}
	if g.idle {
		t.Fatal("a unit was free while a waiter was in line")
	}
	seen := map[uint64]bool{}
	for _, id := range g.order {
		if seen[id] {
			t.Fatalf("waiter %d admitted twice", id)
		}
		seen[id] = true
	}
	t.Logf("%d units, share %d: %d admitted (%d after waiting), %d refused for their deadline, %d cancelled or out of time; longest run past a class %d",
		units, g.w.share, admitted.Load(), len(g.order), refused.Load(), ended.Load(), g.w.maxRun)
}

// countingClock counts the timers made on it.
type countingClock struct {
	core.SystemClock
	timers atomic.Int64
}

func (c *countingClock) NewTimer(d time.Duration) core.Timer {
	c.timers.Add(1)
	return c.SystemClock.NewTimer(d)
}

// TestOnlyTheHeadWaitsForTheWindow: behind a rate gate (one admission
// per 100 ms), 50 waiters are admitted one per 100 ms exactly, by class
// and then in arrival order, and the timers made stay a small multiple of
// the admissions — only the head waits on one — where a poll every 250 ms
// would have made one per waiter per poll.
func TestOnlyTheHeadWaitsForTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &countingClock{}
		g := newGate(t, clk, fairqueue.Config{}, 1000, 100*time.Millisecond)
		const n = 50
		start := time.Now()
		at := make([]time.Duration, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * time.Microsecond) // arrive in order
				if _, err := g.acquire(t.Context(), core.PriorityNormal, "t"); err != nil {
					t.Error(err)
				}
				at[i] = time.Since(start)
				g.release("x")
			}()
		}
		wg.Wait()
		for i := range n {
			if want := time.Duration(i) * 100 * time.Millisecond; at[i] != want {
				t.Fatalf("caller %d admitted at %v, want %v", i, at[i], want)
			}
		}
		if got := clk.timers.Load(); got > 3*n {
			t.Fatalf("%d timers for %d admissions", got, n)
		}
		t.Logf("%d admissions, %d timers", n, clk.timers.Load())
	})
}

// TestAClaimSaysHowLongItHasLeft: the WaitClaimed event of a waiter
// handed a unit carries the time its claim has left — the claim period
// less the time since it was handed, on the queue's clock.
func TestAClaimSaysHowLongItHasLeft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ttl, after, want time.Duration
	}{
		{0, 0, fairqueue.DefaultClaimTTL},
		{0, 500 * time.Millisecond, fairqueue.DefaultClaimTTL - 500*time.Millisecond},
		{time.Minute, 59 * time.Second, time.Second},
		{time.Second, 999 * time.Millisecond, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("ttl=%v,after=%v", tt.ttl, tt.after), func(t *testing.T) {
			t.Parallel()
			clk := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			var mu sync.Mutex
			q := fairqueue.New(fairqueue.Config{ClaimTTL: tt.ttl}, clk, &mu, nil)
			mu.Lock()
			w, err := q.Enqueue(core.PriorityNormal, "t", time.Time{}, 0)
			if err == nil && q.Hand("a") != w {
				err = errors.New("the unit went to another waiter")
			}
			mu.Unlock()
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.after)
			ev, err := w.Wait(t.Context())
			if err != nil || ev.Kind != core.WaitClaimed || ev.Source != "a" {
				t.Fatalf("Wait = %+v, %v; want a claim on a", ev, err)
			}
			if ev.ClaimLeft != tt.want {
				t.Fatalf("ClaimLeft = %v, want %v", ev.ClaimLeft, tt.want)
			}
		})
	}
}
