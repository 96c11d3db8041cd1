package redisstore_test

import (
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// BenchmarkPing is one bare Redis round trip: the unit the others compare to.
func BenchmarkPing(b *testing.B) {
	c := newClient(b)
	ctx := b.Context()
	for b.Loop() {
		if err := c.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLimiterAcquireRelease is TryAcquire (all six gates on) plus
// Release: two round trips.
func BenchmarkLimiterAcquireRelease(b *testing.B) {
	c := newClient(b)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(freshPrefix(b, c)))
	ctx := b.Context()
	lim := core.Limits{MaxConcurrency: 100, RPM: 1 << 30, TPM: 1 << 40}
	req := core.PermitRequest{Scope: "BENCH", Source: "a", SourceLimits: lim, GlobalLimits: lim, Tokens: 1, LeaseTTL: time.Minute}
	for b.Loop() {
		g, err := l.TryAcquire(ctx, req)
		if err != nil || !g.OK {
			b.Fatalf("TryAcquire = %+v, %v", g, err)
		}
		if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBreakerAllowRecord is Allow plus Record of a success on a closed
// circuit: two round trips.
func BenchmarkBreakerAllowRecord(b *testing.B) {
	c := newClient(b)
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(freshPrefix(b, c)))
	ctx := b.Context()
	cfg := backendtest.SuiteBreakerConfig()
	for b.Loop() {
		adm, err := br.Allow(ctx, "BENCH", "a", cfg)
		if err != nil || !adm.Allowed {
			b.Fatalf("Allow = %+v, %v", adm, err)
		}
		if _, err := br.Record(ctx, "BENCH", "a", adm, core.OutcomeSuccess, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitFinish is the governed call's Redis work: Admit (breaker
// Allow and all six gates) and Finish (Release and Record), one script each.
// The source's three gates are on and the scope's are off, as in most
// deployments.
func BenchmarkAdmitFinish(b *testing.B) {
	c := newClient(b)
	prefix := freshPrefix(b, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	a := redisstore.NewAdmitter(l, br)
	defer a.Close()
	ctx := b.Context()
	lim := core.Limits{MaxConcurrency: 100, RPM: 1 << 30, TPM: 1 << 40}
	req := core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(),
		Permit: core.PermitRequest{Scope: "BENCH", Source: "a", SourceLimits: lim, Tokens: 100, LeaseTTL: time.Minute}}
	for b.Loop() {
		t, err := a.Admit(ctx, req)
		if err != nil || !t.Admitted() {
			b.Fatalf("Admit = %+v, %v", t, err)
		}
		if ok, err := a.Finish(ctx, t, core.Settlement{Kind: core.SettleActual, Tokens: 80}, core.OutcomeSuccess); err != nil || !ok {
			b.Fatalf("Finish = %v, %v", ok, err)
		}
	}
}

// BenchmarkAdmitBudgets is BenchmarkAdmitFinish without budgets (off) and
// with a scope's and a client's budget (on): still one script each way.
func BenchmarkAdmitBudgets(b *testing.B) {
	budgets := []core.Budget{
		{Key: "scope:BENCH", Limit: 1 << 52, Window: 24 * time.Hour},
		{Key: "client:bench", Limit: 1 << 52, Window: time.Hour},
	}
	c := newClient(b)
	prefix := freshPrefix(b, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	a := redisstore.NewAdmitter(l, br)
	defer a.Close()
	for _, arm := range []struct {
		name    string
		budgets []core.Budget
	}{{"off", nil}, {"on", budgets}} {
		b.Run(arm.name, func(b *testing.B) {
			ctx := b.Context()
			lim := core.Limits{MaxConcurrency: 100, RPM: 1 << 30, TPM: 1 << 40}
			req := core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(),
				Permit: core.PermitRequest{Scope: "BENCH", Source: "a", SourceLimits: lim, Tokens: 100, LeaseTTL: time.Minute,
					Budgets: arm.budgets, Cost: 2500}}
			s := core.Settlement{Kind: core.SettleActual, Tokens: 80, Cost: 2100}
			for b.Loop() {
				t, err := a.Admit(ctx, req)
				if err != nil || !t.Admitted() {
					b.Fatalf("Admit = %+v, %v", t, err)
				}
				if ok, err := a.Finish(ctx, t, s, core.OutcomeSuccess); err != nil || !ok {
					b.Fatalf("Finish = %v, %v", ok, err)
				}
			}
		})
	}
}
