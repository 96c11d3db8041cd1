package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// process is one process of a test: its own client (its own connections)
// and its own Admitter (its own subscriber).
type process struct {
	c *redis.Client
	a *redisstore.Admitter
}

func newProcess(t *testing.T, prefix string, cfg redisstore.QueueConfig, opts ...redisstore.Option) *process {
	t.Helper()
	c := newClient(t)
	return &process{c: c, a: newQueueAdmitter(t, c, prefix, cfg, opts...)}
}

// ledger records admissions in order.
type ledger struct {
	mu    sync.Mutex
	names []string
}

func (l *ledger) add(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.names = append(l.names, name)
	return len(l.names)
}

func (l *ledger) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.names)
}

func (l *ledger) index(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, n := range l.names {
		if n == name {
			return i
		}
	}
	return -1
}

// TestQueueAcrossTwoProcesses: 40 batch calls of one process wait on 2
// slots; an interactive call of another process, sharing the queue, is
// admitted at the next slot that frees: at most the 2 calls already
// handed a slot go before it. Every call completes.
func TestQueueAcrossTwoProcesses(t *testing.T) {
	prefix := freshPrefix(t, newClient(t))
	a := newProcess(t, prefix, redisstore.QueueConfig{})
	b := newProcess(t, prefix, redisstore.QueueConfig{})
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "TWO", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 2}, LeaseTTL: time.Minute}
	var led ledger
	var wg sync.WaitGroup
	before := -1
	run := func(p *process, name string, place core.Place, service time.Duration) {
		defer wg.Done()
		noteArrival := func() {}
		if place.Priority == core.PriorityInteractive {
			noteArrival = func() { before = led.len() }
		}
		tk, _, err := queueAdmitNoting(ctx, p.a, req, place, noteArrival)
		if err != nil || !tk.Admitted() {
			t.Errorf("%s: %+v %v", name, tk, err)
			return
		}
		led.add(name)
		<-time.After(service)
		if err := finish(ctx, p.a, tk); err != nil {
			t.Error(err)
		}
	}
	for i := range 40 {
		wg.Add(1)
		go run(a, "batch", core.Place{Priority: core.PriorityBatch, Tenant: "bulk"}, 30*time.Millisecond)
		_ = i
	}
	// Wait until batch calls are in line, then arrive.
	for {
		d, err := a.a.Depth(ctx, "TWO", "")
		if err != nil {
			t.Fatal(err)
		}
		if d[core.PriorityBatch] >= 30 {
			break
		}
		<-time.After(5 * time.Millisecond)
	}
	// The interactive call is in line once its first Admit has answered
	// (counting from before the request would count the batch calls
	// admitted while it travelled, a number a slow machine makes large).
	// The batch calls recorded after that and before it can only be those
	// that held or were handed one of the 2 slots when it queued.
	wg.Add(1)
	run(b, "interactive", core.Place{Priority: core.PriorityInteractive, Tenant: "person"}, 0)
	at := led.index("interactive")
	wg.Wait()
	if len(led.names) != 41 {
		t.Fatalf("%d calls admitted, want 41", len(led.names))
	}
	if ahead := at - before; ahead > 2 {
		t.Fatalf("%d batch calls were admitted after the interactive call arrived and before it, want at most 2", ahead)
	}
	t.Logf("the interactive call of the second process was admitted after %d batch calls of the first (of 40)", at-before)
}

// TestQueueOutlivesAKilledProcess: a process dies with waiters in line
// and a claim it was handed but never took. Its entries are dropped when
// they come up (its subscriber is gone), its claim lapses when the
// process that granted it checks it, and the live process's waiters are
// admitted; no entry of the dead process is left.
func TestQueueOutlivesAKilledProcess(t *testing.T) {
	prefix := freshPrefix(t, newClient(t))
	cfg := redisstore.QueueConfig{ClaimTTL: 300 * time.Millisecond}
	holder := newProcess(t, prefix, cfg)
	dying := newProcess(t, prefix, cfg)
	live := newProcess(t, prefix, cfg)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "KILL", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, _, err := queueAdmit(ctx, holder.a, req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("holder: %+v %v", hold, err)
	}
	// The dying process queues first: three waiters it never waits on.
	for range 3 {
		if tk, err := admitOnce(ctx, dying.a, req, core.Place{Tenant: "d"}); err != nil || tk.Admitted() || tk.Queued == nil {
			t.Fatalf("dying: %+v %v", tk, err)
		}
	}
	var led ledger
	var wg sync.WaitGroup
	for i, name := range []string{"live1", "live2"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, _, err := queueAdmit(ctx, live.a, req, core.Place{Tenant: "l"})
			if err != nil || !tk.Admitted() {
				t.Errorf("%s: %+v %v", name, tk, err)
				return
			}
			led.add(name)
			if err := finish(ctx, live.a, tk); err != nil {
				t.Error(err)
			}
		}()
		waitDepth(t, ctx, live.a, "KILL", func(d int) bool { return d >= 4+i })
	}
	// The slot goes to the dying process's first waiter, which it never
	// takes; then the process dies.
	if err := finish(ctx, holder.a, hold); err != nil {
		t.Fatal(err)
	}
	waitDepth(t, ctx, live.a, "KILL", func(d int) bool { return d == 4 })
	_ = dying.c.Close()
	wg.Wait()
	if len(led.names) != 2 {
		t.Fatalf("admitted %v", led.names)
	}
	d, err := live.a.Depth(ctx, "KILL", "")
	if err != nil || d != [core.NumPriorities]int{} {
		t.Fatalf("depth after: %v %v", d, err)
	}
	if n := countKeys(t, live.c, prefix+":lim:{KILL}:q:x"); n != 0 {
		t.Fatalf("%d lapse keys left", n)
	}
}

// waitDepth waits until the scope's line holds what ok accepts.
func waitDepth(t *testing.T, ctx context.Context, a *redisstore.Admitter, scope string, ok func(int) bool) {
	t.Helper()
	for {
		d, err := a.Depth(ctx, scope, "")
		if err != nil {
			t.Fatal(err)
		}
		if ok(d[0] + d[1] + d[2]) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the line holds %v", d)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestQueueHeadWaitsForTheWindow: behind a source of 2 requests a
// minute, on a fake clock, six waiters queue. Two timers wait, whatever
// the number of waiters: the head's, for when the window lets one more
// through, and the process's one for its renewals. As the clock moves
// past each such time, the head is admitted and the next takes over.
func TestQueueHeadWaitsForTheWindow(t *testing.T) {
	prefix := freshPrefix(t, newClient(t))
	clk := backendtest.NewFakeClock(clockEpoch)
	p := newProcess(t, prefix, redisstore.QueueConfig{}, redisstore.WithClock(clk))
	// No deadline: one would be on the real clock, and this queue's time
	// (the fake clock) jumps past it; a timer ends the test instead.
	ctx, cancel := context.WithCancel(t.Context())
	defer time.AfterFunc(20*time.Second, cancel).Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	req := core.PermitRequest{Scope: "RPM", Source: "s", SourceLimits: core.Limits{RPM: 2}, LeaseTTL: time.Minute}
	// Two grants, at 0 s and 10 s: they leave the window at 60 s and 70 s.
	for range 2 {
		if tk, err := admitOnce(ctx, p.a, req, core.Place{}); err != nil || !tk.Admitted() {
			t.Fatalf("%+v %v", tk, err)
		}
		clk.Advance(10 * time.Second)
	}
	var led ledger
	names := []string{"w1", "w2", "w3", "w4", "w5", "w6"}
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tk, _, err := queueAdmit(ctx, p.a, req, core.Place{}); err != nil || !tk.Admitted() {
				if ctx.Err() == nil {
					t.Errorf("%s: %+v %v", name, tk, err)
				}
				return
			}
			led.add(name)
		}()
		waitDepth(t, ctx, p.a, "RPM", func(d int) bool { return d >= i+1 })
	}
	// Each grant leaves the window 60 s after it was made: the waiters
	// are admitted at 60 s, 70 s, 120 s, 130 s, 180 s, 190 s.
	for i, at := range []time.Duration{60, 70, 120, 130, 180, 190} {
		waitTimers(t, ctx, clk, 2)
		clk.Set(clockEpoch.Add(at * time.Second))
		for led.len() < i+1 {
			select {
			case <-ctx.Done():
				t.Fatalf("admitted %v by %v", led.names, at)
			case <-time.After(2 * time.Millisecond):
			}
		}
	}
	wg.Wait()
	if !slices.Equal(led.names, names) {
		t.Fatalf("admitted %v", led.names)
	}
}

// waitTimers waits until n timers wait on clk.
func waitTimers(t *testing.T, ctx context.Context, clk *backendtest.FakeClock, n int) {
	t.Helper()
	for clk.Timers() != n {
		select {
		case <-ctx.Done():
			t.Fatalf("%d timers wait, want %d", clk.Timers(), n)
		case <-time.After(2 * time.Millisecond):
		}
	}
}
