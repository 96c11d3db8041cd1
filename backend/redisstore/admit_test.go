package redisstore_test

import (
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

func TestNewAdmitterDeclinesAForeignBreaker(t *testing.T) {
	c := newClient(t)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(freshPrefix(t, c)))
	other := newClient(t)
	if a := redisstore.NewAdmitter(l, redisstore.NewBreaker(other)); a != nil {
		t.Fatal("NewAdmitter accepted a breaker on another client")
	}
	if a := redisstore.NewAdmitter(nil, redisstore.NewBreaker(c)); a != nil {
		t.Fatal("NewAdmitter accepted a nil limiter")
	}
}

// TestAdmitterUsesTheBreakersOwnPrefix: a Breaker on the same client under
// another prefix keeps its circuits there, through the Admitter as through
// its own methods.
func TestAdmitterUsesTheBreakersOwnPrefix(t *testing.T) {
	c := newClient(t)
	lp, bp := freshPrefix(t, c), freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(lp))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(bp))
	a := redisstore.NewAdmitter(l, b)
	defer a.Close()
	ctx := t.Context()
	cfg := backendtest.SuiteBreakerConfig()
	req := core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: "P", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 2}, LeaseTTL: time.Minute}}
	for range 2 { // the second time through the Limiter's key cache
		tk, err := a.Admit(ctx, req)
		if err != nil || !tk.Admitted() {
			t.Fatalf("Admit = %+v, %v", tk, err)
		}
		if applied, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleRefund}, core.OutcomeDead); err != nil || !applied {
			t.Fatalf("Finish: applied=%v err=%v", applied, err)
		}
		if snap, err := b.Snapshot(ctx, "P", "a", cfg); err != nil || snap.State != core.StateOpen {
			t.Fatalf("Snapshot = %+v, %v; want the circuit opened under the breaker's prefix", snap, err)
		}
		if n := countKeys(t, c, lp+":brk:*"); n != 0 {
			t.Fatalf("%d circuits under the limiter's prefix", n)
		}
		if err := b.Reset(ctx, "P", "a", cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAdmitterMixedPoolsCompose: a request whose permit and circuit name
// different pools cannot be one script (their keys are in different
// slots); it is admitted and finished all the same.
func TestAdmitterMixedPoolsCompose(t *testing.T) {
	c := newClient(t)
	p := freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(p))
	b := redisstore.NewBreaker(c, redisstore.WithPrefix(p))
	a := redisstore.NewAdmitter(l, b)
	defer a.Close()
	ctx := t.Context()
	cfg := backendtest.SuiteBreakerConfig()
	cfg.Pool = "B"
	req := core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: "M", Source: "a", GlobalLimits: core.Limits{MaxConcurrency: 1}, LeaseTTL: time.Minute, Pool: "L"}}
	tk, err := a.Admit(ctx, req)
	if err != nil || !tk.Admitted() {
		t.Fatalf("Admit = %+v, %v", tk, err)
	}
	if again, err := a.Admit(ctx, req); err != nil || again.Admitted() || again.Grant.Gate != core.GateGlobalConcurrency {
		t.Fatalf("second Admit = %+v, %v; want refused by the pool's global concurrency", again, err)
	}
	if _, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleRefund}, core.OutcomeDead); err != nil {
		t.Fatal(err)
	}
	if snap, err := b.Snapshot(ctx, "M", "a", cfg); err != nil || snap.State != core.StateOpen {
		t.Fatalf("Snapshot = %+v, %v", snap, err)
	}
	if u, err := l.Usage(ctx, "M", ""); err != nil || u.InFlight != 0 {
		t.Fatalf("pool usage = %+v, %v", u, err)
	}
}
