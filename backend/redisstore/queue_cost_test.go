package redisstore_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// queueCost is what one run of TestQueueCost counted on the server.
type queueCost struct {
	waiters int
	// per admission through the queue: scripts (round trips), the
	// commands they ran, and the messages they published
	scripts, commands, publishes float64
	// while every waiter waited, per waiter-second
	idle   float64
	inside string
}

// TestQueueCost counts, on a private Redis (INFO commandstats), what the
// queue costs: N waiters of two processes (N = 10, then 100) queue behind
// one slot, wait, then are admitted one by one, each releasing at once.
// The commands per admission are the same for 10 and for 100 waiters,
// and waiting costs nothing: no command runs while they all wait. Every
// key the queue writes is under its prefix.
func TestQueueCost(t *testing.T) {
	rs := startPrivateRedis(t)
	stats := privateClient(t, rs)
	var costs []queueCost
	for _, n := range []int{2, 10, 100} { // the first loads the scripts
		costs = append(costs, measureQueue(t, rs, stats, n))
	}
	costs = costs[1:]
	for _, c := range costs {
		t.Logf("%d waiters: per admission %.2f scripts (round trips), %.1f commands inside them, %.2f messages; %.3f commands per waiter-second of waiting; inside: %s",
			c.waiters, c.scripts, c.commands, c.publishes, c.idle, c.inside)
	}
	// The slot's holder releases once per run: 1/N of a script and of its
	// commands.
	a, b := costs[0], costs[1]
	if b.scripts > a.scripts+0.1 || b.scripts < a.scripts-0.1 || b.commands > a.commands+1 || b.commands < a.commands-1 || b.publishes > a.publishes+0.5 {
		t.Fatalf("the cost of an admission grows with the waiters: %+v, then %+v", a, b)
	}
	if a.idle != 0 || b.idle != 0 {
		t.Fatalf("waiting ran commands: %v and %v per waiter-second", a.idle, b.idle)
	}
	keys, err := stats.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if !strings.HasPrefix(k, "qcost") {
			t.Fatalf("a key outside the prefix: %q", k)
		}
	}
}

func measureQueue(t *testing.T, rs *privateRedis, stats *redis.Client, n int) queueCost {
	t.Helper()
	prefix := fmt.Sprintf("qcost%d", n)
	var qs [2]*redisstore.Queue
	for i := range qs {
		l := redisstore.NewLimiter(privateClient(t, rs), redisstore.WithPrefix(prefix))
		qs[i] = redisstore.NewQueue(l, redisstore.QueueConfig{})
		defer qs[i].Close()
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "COST", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, _, err := qs[0].Admit(ctx, req, core.Place{}, nil)
	if err != nil || !hold.OK {
		t.Fatalf("%+v %v", hold, err)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := qs[i%2]
			place := core.Place{Priority: core.PriorityOfRank(i % core.NumPriorities), Tenant: fmt.Sprint("t", i%5)}
			g, _, err := queueAcquire(ctx, q, req, place)
			if err != nil || !g.OK {
				t.Errorf("%+v %v", g, err)
				return
			}
			if err := q.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
				t.Error(err)
			}
		}()
	}
	waitDepth(t, ctx, qs[0], "COST", func(d int) bool { return d == n })
	// Everyone waits: nothing runs.
	before := commandStats(t, stats)
	const idle = time.Second
	<-time.After(idle)
	after := commandStats(t, stats)
	c := queueCost{waiters: n}
	c.idle = float64(sum(after, before, func(name string) bool { return name != "info" })) / (float64(n) * idle.Seconds())
	// The slot is released: it goes from waiter to waiter.
	before = after
	if err := qs[0].Release(ctx, hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	after = commandStats(t, stats)
	per := func(v int) float64 { return float64(v) / float64(n) }
	c.scripts = per(sum(after, before, func(name string) bool { return strings.HasPrefix(name, "eval") }))
	c.commands = per(sum(after, before, func(name string) bool { return name != "info" && !strings.HasPrefix(name, "eval") }))
	c.publishes = per(sum(after, before, func(name string) bool { return name == "spublish" }))
	var inside []string
	for name, v := range after {
		if d := v - before[name]; d > 0 && name != "info" && !strings.HasPrefix(name, "eval") {
			inside = append(inside, fmt.Sprintf("%s=%.2f", name, per(d)))
		}
	}
	slices.Sort(inside)
	c.inside = strings.Join(inside, " ")
	return c
}

// sum adds the increase of the commands that count.
func sum(after, before map[string]int, counts func(string) bool) int {
	n := 0
	for name, v := range after {
		if counts(name) {
			n += v - before[name]
		}
	}
	return n
}

// TestQueueCostWithoutWaiting: a call that does not wait costs, through
// the queue, the round trips of the limiter alone (one script to admit,
// one to release) and one command more in each: the read of the queue's
// state. Counted on a private Redis, against the limiter's own
// TryAcquire and Release in the same run.
func TestQueueCostWithoutWaiting(t *testing.T) {
	rs := startPrivateRedis(t)
	stats := privateClient(t, rs)
	ctx := t.Context()
	l := redisstore.NewLimiter(privateClient(t, rs), redisstore.WithPrefix("qfree"))
	q := redisstore.NewQueue(l, redisstore.QueueConfig{})
	defer q.Close()
	req := core.PermitRequest{Scope: "FREE", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 10, RPM: 1 << 20, TPM: 1 << 30},
		GlobalLimits: core.Limits{MaxConcurrency: 100}, Tokens: 10, LeaseTTL: time.Minute}
	const calls = 50
	arms := []struct {
		name string
		call func() error
	}{
		{"limiter", func() error {
			g, err := l.TryAcquire(ctx, req)
			if err != nil || !g.OK {
				return fmt.Errorf("%+v %v", g, err)
			}
			return l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 8})
		}},
		{"queue", func() error {
			g, w, err := q.Admit(ctx, req, core.Place{}, nil)
			if err != nil || !g.OK || w != nil {
				return fmt.Errorf("%+v %v %v", g, w, err)
			}
			return q.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 8})
		}},
	}
	per := map[string][2]float64{}
	for round := range 2 { // the first round loads the scripts and makes the keys
		for _, arm := range arms {
			before := commandStats(t, stats)
			for range calls {
				if err := arm.call(); err != nil {
					t.Fatal(err)
				}
			}
			after := commandStats(t, stats)
			if round == 1 {
				per[arm.name] = [2]float64{
					float64(sum(after, before, func(n string) bool { return strings.HasPrefix(n, "eval") })) / calls,
					float64(sum(after, before, func(n string) bool { return n != "info" && !strings.HasPrefix(n, "eval") })) / calls,
				}
			}
		}
	}
	lim, qu := per["limiter"], per["queue"]
	t.Logf("a call that does not wait: limiter %.1f scripts, %.1f commands inside; through the queue %.1f scripts, %.1f commands inside",
		lim[0], lim[1], qu[0], qu[1])
	if qu[0] != lim[0] || qu[1] > lim[1]+2 {
		t.Fatalf("the queue adds to a call that does not wait: %v against %v", qu, lim)
	}
}

// TestQueueWaiterMemory: 10,000 calls waiting in one process cost at most
// 2 KiB each in its memory (their own goroutines aside, which are their
// callers'), measured on the heap.
func TestQueueWaiterMemory(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	q := redisstore.NewQueue(redisstore.NewLimiter(c, redisstore.WithPrefix(prefix)), redisstore.QueueConfig{})
	defer q.Close()
	ctx := t.Context()
	req := core.PermitRequest{Scope: "MEM", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	if g, _, err := q.Admit(ctx, req, core.Place{}, nil); err != nil || !g.OK {
		t.Fatalf("%+v %v", g, err)
	}
	const n = 10_000
	ws := make([]*redisstore.QueueWaiter, 0, n)
	// Warm up: the subscriber, the script, the client's buffers.
	for range 100 {
		_, w, err := q.Admit(ctx, req, core.Place{Tenant: "warm"}, nil)
		if err != nil || w == nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		_, w, err := q.Admit(ctx, req, core.Place{Priority: core.PriorityOfRank(i % 3), Tenant: fmt.Sprint("tenant-", i%100)}, nil)
		if err != nil || w == nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	each := float64(after.HeapAlloc-before.HeapAlloc) / n
	t.Logf("%d waiters: %.0f bytes each on the heap of their process", n, each)
	if each > 2048 {
		t.Fatalf("%.0f bytes per waiter, want at most 2048", each)
	}
	runtime.KeepAlive(ws)
}
