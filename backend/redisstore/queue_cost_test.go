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

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// The most commands a governed call that does not wait may run inside its
// two scripts: with a source's concurrency gate alone; with its
// concurrency, RPM and TPM gates; and with the global concurrency and RPM
// gates besides.
const (
	maxCommandsConc   = 11
	maxCommandsSource = 15
	maxCommandsGlobal = 23
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
	var as [2]*redisstore.Admitter
	for i := range as {
		as[i] = newQueueAdmitter(t, privateClient(t, rs), prefix, redisstore.QueueConfig{})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	req := core.PermitRequest{Scope: "COST", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	hold, err := admitOnce(ctx, as[0], req, core.Place{})
	if err != nil || !hold.Admitted() {
		t.Fatalf("%+v %v", hold, err)
	}
	// Each process hears its queue's channel from its first wait on: a
	// waiter that comes and goes starts it.
	for _, a := range as {
		tk, err := admitOnce(ctx, a, req, core.Place{Tenant: "warm"})
		if err != nil || tk.Queued == nil {
			t.Fatalf("%+v %v", tk, err)
		}
		tk.Queued.Leave(ctx)
	}
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := as[i%2]
			place := core.Place{Priority: core.Priority(i % core.NumPriorities), Tenant: fmt.Sprint("t", i%5)}
			tk, _, err := queueAdmit(ctx, a, req, place)
			if err != nil || !tk.Admitted() {
				t.Errorf("%+v %v", tk, err)
				return
			}
			if err := finish(ctx, a, tk); err != nil {
				t.Error(err)
			}
		}()
	}
	waitDepth(t, ctx, as[0], "COST", func(d int) bool { return d == n })
	// Everyone waits: nothing runs.
	before := commandStats(t, stats)
	const idle = time.Second
	<-time.After(idle)
	after := commandStats(t, stats)
	c := queueCost{waiters: n}
	c.idle = float64(sum(after, before, func(name string) bool { return name != "info" })) / (float64(n) * idle.Seconds())
	// The slot is released: it goes from waiter to waiter.
	before = after
	if err := finish(ctx, as[0], hold); err != nil {
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

// TestQueueCostWithoutWaiting: a governed call that does not wait (Admit
// and Finish through the Admitter, its queue empty) costs 2 round trips
// and the commands its scripts run inside, counted on a private Redis for
// the gates a scope commonly has: a source's concurrency gate alone; its
// concurrency, RPM and TPM gates; and with the global concurrency and RPM
// gates besides.
func TestQueueCostWithoutWaiting(t *testing.T) {
	rs := startPrivateRedis(t)
	stats := privateClient(t, rs)
	ctx := t.Context()
	a := newQueueAdmitter(t, privateClient(t, rs), "qfree", redisstore.QueueConfig{})
	conc := core.Limits{MaxConcurrency: 10}
	source := core.Limits{MaxConcurrency: 10, RPM: 1 << 20, TPM: 1 << 30}
	arms := []struct {
		name           string
		source, global core.Limits
		most           float64 // commands per call at most
	}{
		{"a source's concurrency gate", conc, core.Limits{}, maxCommandsConc},
		{"a source's concurrency, RPM and TPM gates", source, core.Limits{}, maxCommandsSource},
		{"those and the global concurrency and RPM gates", source, core.Limits{MaxConcurrency: 100, RPM: 1 << 20}, maxCommandsGlobal},
	}
	const calls = 50
	for _, arm := range arms {
		req := core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: core.PermitRequest{Scope: "FREE", Source: "s",
			SourceLimits: arm.source, GlobalLimits: arm.global, Tokens: 10, LeaseTTL: time.Minute}}
		// The first round loads the scripts and makes the keys; of the
		// others, the cheapest counts: a level's log is purged at most
		// once a second whatever the calls (lib/common.lua, PURGE_EVERY),
		// and a round that a loaded machine stretches past a second pays
		// for that purge besides the calls' own commands.
		per := [2]float64{-1, -1}
		for round := range 4 {
			before := commandStats(t, stats)
			for range calls {
				tk, err := a.Admit(ctx, req)
				if err != nil || !tk.Admitted() || tk.Queued != nil {
					t.Fatalf("%+v %v", tk, err)
				}
				if _, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleActual, Tokens: 8}, core.OutcomeSuccess); err != nil {
					t.Fatal(err)
				}
			}
			after := commandStats(t, stats)
			got := [2]float64{
				float64(sum(after, before, func(n string) bool { return strings.HasPrefix(n, "eval") })) / calls,
				float64(sum(after, before, func(n string) bool { return n != "info" && !strings.HasPrefix(n, "eval") })) / calls,
			}
			if round > 0 && (per[1] < 0 || got[1] < per[1]) {
				per = got
				var inside []string
				for name, v := range after {
					if d := v - before[name]; d > 0 && name != "info" && !strings.HasPrefix(name, "eval") {
						inside = append(inside, fmt.Sprintf("%s=%.2f", name, float64(d)/calls))
					}
				}
				slices.Sort(inside)
				t.Logf("%s: a call that does not wait costs %.1f scripts (round trips), %.1f commands inside them (%s)",
					arm.name, per[0], per[1], strings.Join(inside, " "))
			}
		}
		if per[0] != 2 || per[1] > arm.most {
			t.Fatalf("%s: %.1f scripts and %.1f commands per call, want 2 and at most %.0f", arm.name, per[0], per[1], arm.most)
		}
	}
}

// TestQueueWaiterMemory: 10,000 calls waiting in one process cost at most
// 2 KiB each in its memory (their own goroutines aside, which are their
// callers'), measured on the heap.
func TestQueueWaiterMemory(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	a := newQueueAdmitter(t, c, prefix, redisstore.QueueConfig{})
	ctx := t.Context()
	req := core.PermitRequest{Scope: "MEM", Source: "s", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}
	if tk, err := admitOnce(ctx, a, req, core.Place{}); err != nil || !tk.Admitted() {
		t.Fatalf("%+v %v", tk, err)
	}
	const n = 10_000
	ws := make([]core.Waiter, 0, n)
	// Warm up: the subscriber, the script, the client's buffers.
	for range 100 {
		tk, err := admitOnce(ctx, a, req, core.Place{Tenant: "warm"})
		if err != nil || tk.Queued == nil {
			t.Fatal(err)
		}
		ws = append(ws, tk.Queued)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range n {
		tk, err := admitOnce(ctx, a, req, core.Place{Priority: core.Priority(i % 3), Tenant: fmt.Sprint("tenant-", i%100)})
		if err != nil || tk.Queued == nil {
			t.Fatal(err)
		}
		ws = append(ws, tk.Queued)
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
