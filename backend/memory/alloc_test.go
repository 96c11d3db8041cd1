package memory_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

var allocEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestLimiterAcquireReleaseAllocFree shows that TryAcquire and Release
// allocate nothing once the sliding-window logs have grown to the traffic:
// grants, settlements, refusals by every kind of gate and by a budget,
// budgets reserved and settled across window rollovers, slot expiry.
func TestLimiterAcquireReleaseAllocFree(t *testing.T) {
	ctx := context.Background()
	clk := backendtest.NewFakeClock(allocEpoch)
	l := memory.NewLimiter(memory.WithClock(clk))
	req := core.PermitRequest{
		Scope: "scope", Source: "a",
		SourceLimits: core.Limits{MaxConcurrency: 8, RPM: 1000, TPM: 1_000_000},
		GlobalLimits: core.Limits{MaxConcurrency: 16, RPM: 2000, TPM: 2_000_000},
		Tokens:       100, LeaseTTL: time.Minute,
	}
	full := req
	full.Source = "full"
	full.SourceLimits = core.Limits{MaxConcurrency: 1, RPM: 1, TPM: 100}
	tooBig := req
	tooBig.Tokens = 3_000_000
	leaky := req // permits of a dead process: never released, freed by their lease
	leaky.Source, leaky.LeaseTTL = "leaky", time.Second
	leaky.SourceLimits = core.Limits{MaxConcurrency: 4}
	// Budgets: a roomy scope's and client's on every grant (a minute's
	// window, so that windows roll over), and one always full.
	req.Budgets = []core.Budget{
		{Key: "scope:alloc", Limit: 1 << 50, Window: time.Minute},
		{Key: "client:alloc", Limit: 1 << 50, Window: time.Hour},
	}
	req.Cost = 700
	broke := req
	broke.Source, broke.Cost = "broke", 10
	broke.Budgets = []core.Budget{req.Budgets[0], {Key: "client:broke", Limit: 5, Window: time.Hour}}
	settlements := []core.Settlement{
		{Kind: core.SettleActual, Tokens: 40, Cost: 300},
		{Kind: core.SettleEstimate},
		{Kind: core.SettleRefund},
		{Kind: core.SettleActual, Tokens: 250, Cost: 900},
	}
	var i int
	op := func() {
		i++
		g, err := l.TryAcquire(ctx, req)
		if err != nil || !g.OK {
			t.Fatalf("TryAcquire = %+v, %v", g, err)
		}
		if g2, _ := l.TryAcquire(ctx, full); g2.OK && i > 1 {
			// The full source frees only as its minute passes.
			_ = l.Release(ctx, g2.Permit, settlements[i%4])
		}
		if g3, _ := l.TryAcquire(ctx, tooBig); g3.OK {
			t.Fatal("a request above TPM was granted")
		}
		_, _ = l.TryAcquire(ctx, leaky)
		if g4, _ := l.TryAcquire(ctx, broke); g4.OK || g4.Gate != core.GateBudget {
			t.Fatalf("TryAcquire over a full budget = %+v", g4)
		}
		if err := l.Release(ctx, g.Permit, settlements[i%4]); err != nil {
			t.Fatal(err)
		}
		_ = l.Release(ctx, g.Permit, settlements[i%4]) // double release: no-op
		clk.Advance(100 * time.Millisecond)
	}
	for range 3000 { // five simulated minutes: every window has turned over
		op()
	}
	if n := totalAllocs(2000, op); n != 0 {
		t.Fatalf("TryAcquire+Release: %d allocations in 2000 ops, want 0", n)
	}
	if avg := testing.AllocsPerRun(2000, op); avg != 0 {
		t.Fatalf("TryAcquire+Release: %v allocations per op, want 0", avg)
	}
}

// TestBreakerAllowRecordAllocFree shows that Allow and Record allocate
// nothing once the circuit exists, through opens, probes and closes.
func TestBreakerAllowRecordAllocFree(t *testing.T) {
	ctx := context.Background()
	clk := backendtest.NewFakeClock(allocEpoch)
	b := memory.NewBreaker(memory.WithClock(clk))
	cfg := backendtest.SuiteBreakerConfig()
	cfg.Cooldown = 2 * time.Second
	cfg.MaxCooldown = 8 * time.Second
	outcomes := []core.Outcome{
		core.OutcomeSuccess, core.OutcomeFailure, core.OutcomeTimeout, core.OutcomeFailure,
		core.OutcomeRateLimited, core.OutcomeFailure, core.OutcomeFailure, core.OutcomeFailure,
		core.OutcomeAbandoned, core.OutcomeDead, core.OutcomeSuccess,
	}
	var i int
	opens := func() int {
		s, _ := b.Snapshot(ctx, "scope", "a", cfg)
		return s.Opens
	}
	op := func() {
		i++
		adm, err := b.Allow(ctx, "scope", "a", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if adm.Allowed {
			if _, err := b.Record(ctx, "scope", "a", adm, outcomes[i%len(outcomes)], cfg); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(300 * time.Millisecond)
	}
	for range 1000 {
		op()
	}
	before := opens()
	if n := totalAllocs(2000, op); n != 0 {
		t.Fatalf("Allow+Record: %d allocations in 2000 ops, want 0", n)
	}
	if avg := testing.AllocsPerRun(2000, op); avg != 0 {
		t.Fatalf("Allow+Record: %v allocations per op, want 0", avg)
	}
	if opens() == before {
		t.Fatal("the measured ops never opened the circuit; the test does not cover the state changes")
	}
}

// totalAllocs runs f n times and returns the heap allocations they made in
// all. testing.AllocsPerRun rounds the average down, so it would hide an
// occasional allocation such as a buffer growing; this does not.
func totalAllocs(n int, f func()) uint64 {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		f()
	}
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs
}
