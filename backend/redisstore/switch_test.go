package redisstore_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestSwitchAcrossProcesses: a source one process switches off is refused
// at once by another (its Breaker and its Admitter), a Reset from the
// other keeps it off, and switching it on admits it again; the circuit's
// state (open here) is the same before, during and after.
func TestSwitchAcrossProcesses(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg target) {
		var other redis.UniversalClient = newClient(t)
		if tg.name == "cluster" {
			other = newClusterClient(t)
		}
		prefix := freshPrefix(t, tg.client)
		clk := backendtest.NewFakeClock(clockEpoch)
		opts := []redisstore.Option{redisstore.WithPrefix(prefix), redisstore.WithClock(clk)}
		ops, obs := redisstore.NewBreaker(tg.client, opts...), redisstore.NewBreaker(other, opts...)
		ol := redisstore.NewLimiter(other, opts...)
		oa := redisstore.NewAdmitter(ol, obs)
		defer oa.Close()
		cfg := backendtest.SuiteBreakerConfig()
		cfg.Pool = "SWPOOL"
		ctx := t.Context()
		const scope = "SW"
		admit := func(source string) core.Ticket {
			t.Helper()
			tk, err := oa.Admit(ctx, core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: scope, Source: source,
				Pool: cfg.Pool, SourceLimits: core.Limits{MaxConcurrency: 5}, LeaseTTL: time.Minute}})
			if err != nil {
				t.Fatal(err)
			}
			return tk
		}
		snap := func(source string) core.BreakerSnapshot {
			t.Helper()
			s, err := obs.Snapshot(ctx, scope, source, cfg)
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
		// "open" has an open circuit, "closed" a closed one.
		tk := admit("open")
		if _, err := oa.Finish(ctx, tk, core.Settlement{Kind: core.SettleRefund}, core.OutcomeDead); err != nil {
			t.Fatal(err)
		}
		admit("closed")
		before := map[string]core.BreakerSnapshot{"open": snap("open"), "closed": snap("closed")}
		for source, s := range before {
			if err := ops.SetEnabled(ctx, scope, source, cfg, false); err != nil {
				t.Fatal(err)
			}
			a, err := obs.Allow(ctx, scope, source, cfg)
			if err != nil || a.Allowed || !a.Disabled || a.State != s.State || a.RetryAfter != 0 {
				t.Fatalf("the other process's Allow(%s) = %+v, %v; want refused as disabled in state %v", source, a, err, s.State)
			}
			if tk := admit(source); tk.Admission.Allowed || !tk.Admission.Disabled || tk.Grant.OK {
				t.Fatalf("the other process's Admit(%s) = %+v, want refused as disabled", source, tk)
			}
			if u, _ := ol.Usage(ctx, scope, source); u.InFlight != map[string]int{"open": 0, "closed": 1}[source] {
				t.Fatalf("a refused Admit held a slot: %+v", u)
			}
		}
		if err := obs.Reset(ctx, scope, "closed", cfg); err != nil {
			t.Fatal(err)
		}
		if a, err := obs.Allow(ctx, scope, "closed", cfg); err != nil || a.Allowed || !a.Disabled {
			t.Fatalf("Allow after a Reset = %+v, %v; want still disabled", a, err)
		}
		for source, s := range before {
			if err := ops.SetEnabled(ctx, scope, source, cfg, true); err != nil {
				t.Fatal(err)
			}
			now := snap(source)
			if now.Disabled || now.State != s.State || now.Opens != s.Opens {
				t.Fatalf("snapshot of %s after the switch went on = %+v, was %+v", source, now, s)
			}
		}
		if tk := admit("closed"); !tk.Admitted() {
			t.Fatalf("Admit after the switch went on = %+v", tk)
		}
		if tk := admit("open"); tk.Admission.Allowed || tk.Admission.Disabled || tk.Admission.State != core.StateOpen {
			t.Fatalf("Admit of the open circuit after the switch went on = %+v, want refused as open", tk)
		}
	})
}

// TestSwitchOutlastsIdleCircuits: a switched-off circuit keeps no TTL,
// whatever is recorded on it meanwhile, so the switch does not lapse with
// an idle circuit; switched on, the circuit expires as usual again.
func TestSwitchOutlastsIdleCircuits(t *testing.T) {
	t.Parallel()
	cl := newClocked(t)
	ctx := t.Context()
	b := redisstore.NewBreaker(cl.c, redisstore.WithPrefix(cl.prefix), redisstore.WithClock(cl.clk))
	key := cl.prefix + ":brk:{OFF}:a"
	ttl := func() time.Duration {
		t.Helper()
		d, err := cl.c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, cfg := range []core.BreakerConfig{backendtest.SuiteBreakerConfig(), {FailThreshold: 3, Cooldown: time.Minute}} {
		adm, err := b.Allow(ctx, "OFF", "a", cfg)
		if err != nil || !adm.Allowed {
			t.Fatalf("Allow = %+v, %v", adm, err)
		}
		if err := b.SetEnabled(ctx, "OFF", "a", cfg, false); err != nil {
			t.Fatal(err)
		}
		if d := ttl(); d != -1 {
			t.Fatalf("PTTL of a switched-off circuit = %v, want none", d)
		}
		// Outcomes of calls admitted before, a Reset: the TTL stays off.
		for _, o := range []core.Outcome{core.OutcomeFailure, core.OutcomeSuccess} {
			if _, err := b.Record(ctx, "OFF", "a", adm, o, cfg); err != nil {
				t.Fatal(err)
			}
			if d := ttl(); d != -1 {
				t.Fatalf("PTTL after recording %v while off = %v, want none", o, d)
			}
		}
		if err := b.Reset(ctx, "OFF", "a", cfg); err != nil {
			t.Fatal(err)
		}
		if d := ttl(); d != -1 {
			t.Fatalf("PTTL after a Reset while off = %v, want none", d)
		}
		if err := b.SetEnabled(ctx, "OFF", "a", cfg, true); err != nil {
			t.Fatal(err)
		}
		if d := ttl(); d < 23*time.Hour || d > 24*time.Hour {
			t.Fatalf("PTTL after the switch went on = %v, want about a day", d)
		}
		adm, err = b.Allow(ctx, "OFF", "a", cfg)
		if err != nil || !adm.Allowed {
			t.Fatalf("Allow = %+v, %v", adm, err)
		}
		if _, err := b.Record(ctx, "OFF", "a", adm, core.OutcomeSuccess, cfg); err != nil {
			t.Fatal(err)
		}
		if d := ttl(); d < 23*time.Hour || d > 24*time.Hour {
			t.Fatalf("PTTL after a success = %v, want about a day", d)
		}
	}
	// A switch on a circuit never seen makes a key that keeps it.
	if err := b.SetEnabled(ctx, "OFF", "new", core.BreakerConfig{}, false); err != nil {
		t.Fatal(err)
	}
	if d, _ := cl.c.PTTL(ctx, cl.prefix+":brk:{OFF}:new").Result(); d != -1 {
		t.Fatalf("PTTL of a new switched-off circuit = %v, want none", d)
	}
	if err := b.SetEnabled(ctx, "OFF", "new", core.BreakerConfig{}, true); err != nil {
		t.Fatal(err)
	}
	if n, _ := cl.c.Exists(ctx, cl.prefix+":brk:{OFF}:new").Result(); n != 0 {
		t.Fatal("switching on a circuit that held only the switch left a key behind")
	}
}
