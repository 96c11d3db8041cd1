package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/internal/core"
)

func TestAdmitGivesTheProbeBackWhenTheLimiterRefuses(t *testing.T) {
	c := newClient(t)
	prefix := freshPrefix(t, c)
	clk := backendtest.NewFakeClock(time.Unix(1_700_000_000, 0))
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
	ctx := context.Background()
	cfg := backendtest.SuiteBreakerConfig()
	full := core.PermitRequest{Scope: "S", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute}

	// Closed: admitted and granted in one script.
	adm, g, ok, err := l.Admit(ctx, b, "S", "a", cfg, full)
	if err != nil || !ok || !adm.Allowed || !g.OK {
		t.Fatalf("closed: adm=%+v grant=%+v ok=%v err=%v", adm, g, ok, err)
	}
	// The breaker opens (source dead); the cooldown passes.
	if applied, _, err := l.Finish(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}, b, "S", "a", adm, core.OutcomeDead, cfg); err != nil || !applied {
		t.Fatalf("finish: applied=%v err=%v", applied, err)
	}
	// Open: refused by the breaker, nothing taken from the limiter.
	adm, g, _, _ = l.Admit(ctx, b, "S", "a", cfg, full)
	if adm.Allowed || g.OK {
		t.Fatalf("open: adm=%+v grant=%+v", adm, g)
	}
	if u, _ := l.Usage(ctx, "S", "a"); u.InFlight != 0 {
		t.Fatalf("a breaker refusal took a slot: %+v", u)
	}
	clk.Advance(cfg.Cooldown + time.Second)
	// Fill the only slot, then ask: the probe is granted but the limiter refuses.
	hold, err := l.TryAcquire(ctx, full)
	if err != nil || !hold.OK {
		t.Fatal(err)
	}
	adm, g, _, _ = l.Admit(ctx, b, "S", "a", cfg, full)
	if !adm.Allowed || !adm.Probe || g.OK || g.Gate != core.GateSourceConcurrency {
		t.Fatalf("half-open with a full gate: adm=%+v grant=%+v", adm, g)
	}
	if snap, _ := b.Snapshot(ctx, "S", "a", cfg); snap.ProbeHeld {
		t.Fatal("the probe was not given back after the limiter refused")
	}
	// The slot frees: the next caller gets the probe and the permit.
	if err := l.Release(ctx, hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	adm, g, _, _ = l.Admit(ctx, b, "S", "a", cfg, full)
	if !adm.Probe || !g.OK {
		t.Fatalf("after the slot freed: adm=%+v grant=%+v", adm, g)
	}
	// A successful probe closes the circuit, in the same one-script finish.
	if applied, _, err := l.Finish(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 1}, b, "S", "a", adm, core.OutcomeSuccess, cfg); err != nil || !applied {
		t.Fatalf("probe finish: applied=%v err=%v", applied, err)
	}
	if snap, _ := b.Snapshot(ctx, "S", "a", cfg); snap.State != core.StateClosed {
		t.Fatalf("state after a successful probe = %s", snap.State)
	}
	if u, _ := l.Usage(ctx, "S", "a"); u.InFlight != 0 {
		t.Fatalf("slots left after finish: %+v", u)
	}
}

func TestAdmitAndFinishDeclineAForeignBreaker(t *testing.T) {
	c := newClient(t)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(freshPrefix(t, c)))
	other := newClient(t)
	foreign := redisstore.NewBreaker(other)
	if _, _, ok, err := l.Admit(context.Background(), foreign, "S", "a", backendtest.SuiteBreakerConfig(), core.PermitRequest{Scope: "S", Source: "a"}); ok || err != nil {
		t.Fatalf("Admit with a breaker on another client: ok=%v err=%v, want declined", ok, err)
	}
	if _, ok, err := l.Finish(context.Background(), core.Permit{Lease: 1}, core.Settlement{}, foreign, "S", "a", core.Admission{Allowed: true}, core.OutcomeSuccess, backendtest.SuiteBreakerConfig()); ok || err != nil {
		t.Fatalf("Finish with a breaker on another client: ok=%v err=%v, want declined", ok, err)
	}
}

// TestAdmitAndFinishUseTheBreakersOwnPrefix: a Breaker on the same client
// under another prefix keeps its circuits there, through Admit and Finish
// as through its own methods.
func TestAdmitAndFinishUseTheBreakersOwnPrefix(t *testing.T) {
	c := newClient(t)
	lp, bp := freshPrefix(t, c), freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(lp))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(bp))
	ctx := t.Context()
	cfg := backendtest.SuiteBreakerConfig()
	req := core.PermitRequest{Scope: "P", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 2}, LeaseTTL: time.Minute}
	for range 2 { // the second time through the Limiter's key cache
		adm, g, ok, err := l.Admit(ctx, b, "P", "a", cfg, req)
		if err != nil || !ok || !adm.Allowed || !g.OK {
			t.Fatalf("Admit = %+v, %+v, %v, %v", adm, g, ok, err)
		}
		if applied, _, err := l.Finish(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}, b, "P", "a", adm, core.OutcomeDead, cfg); err != nil || !applied {
			t.Fatalf("Finish: applied=%v err=%v", applied, err)
		}
		if snap, err := b.Snapshot(ctx, "P", "a", cfg); err != nil || snap.State != core.StateOpen {
			t.Fatalf("Snapshot = %+v, %v; want the circuit opened under the breaker's prefix", snap, err)
		}
		if n := countKeys(t, c, lp+":brk:*"); n != 0 {
			t.Fatalf("%d circuits under the limiter's prefix", n)
		}
		if err := b.Reset(ctx, "P", "a", core.BreakerConfig{}); err != nil {
			t.Fatal(err)
		}
	}
}
