package redisstore_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// TestLimiterMatchesMemory drives the Redis limiter and the memory limiter
// with the same random operations on one fake clock and compares every
// answer: grants, the refusing gate, RetryAfter, and the usage of the
// gates that are on. Long runs of grants, releases (twice, sometimes),
// expiries and window slides reach the scripts' lazy purges, refusal
// rechecks and TTL marks in every order.
func TestLimiterMatchesMemory(t *testing.T) {
	cl := newClocked(t)
	mem := memory.NewLimiter(memory.WithClock(cl.clk))
	rng := rand.New(rand.NewPCG(7, 8))
	ctx := t.Context()
	limits := func() core.Limits {
		var l core.Limits
		if rng.IntN(3) > 0 {
			l.MaxConcurrency = 1 + rng.IntN(4)
		}
		if rng.IntN(3) > 0 {
			l.RPM = 1 + rng.IntN(12)
		}
		if rng.IntN(3) > 0 {
			l.TPM = 100 + rng.IntN(2000)
		}
		return l
	}
	type permit struct{ m, r core.Permit }
	grants, refusals := 0, map[core.Gate]int{}
	// A client's budget spans every round's scope; each round adds budgets
	// of its own, of windows short enough to roll over in the run.
	client := core.Budget{Key: "client:diff", Limit: 40_000, Window: 5 * time.Minute}
	for round := range 30 {
		scope := fmt.Sprintf("DIFF%d", round)
		src := map[string]core.Limits{"a": limits(), "b": limits()}
		glob := limits()
		ttl := []time.Duration{0, 10 * time.Second, 45 * time.Second, 5 * time.Minute}[rng.IntN(4)]
		budgets := diffBudgets(rng, scope, client)
		var live []permit
		for step := range 250 {
			where := fmt.Sprintf("round %d (source %+v %+v, global %+v, lease %v, budgets %+v) step %d at %v",
				round, src["a"], src["b"], glob, ttl, budgets, step, cl.clk.Now().Sub(clockEpoch))
			switch op := rng.IntN(20); {
			case op < 9:
				source := []string{"a", "b"}[rng.IntN(2)]
				req := core.PermitRequest{Scope: scope, Source: source, SourceLimits: src[source], GlobalLimits: glob,
					Tokens: rng.IntN(400), LeaseTTL: ttl}
				req.Budgets, req.Cost = pickBudgets(rng, budgets)
				gm, _ := mem.TryAcquire(ctx, req)
				gr, err := cl.l.TryAcquire(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if gm.OK != gr.OK || gm.Gate != gr.Gate || gm.RetryAfter != gr.RetryAfter || gm.Budget != gr.Budget ||
					gm.Permit.Cost != gr.Permit.Cost || len(gm.Permit.Budgets) != len(gr.Permit.Budgets) {
					t.Fatalf("%s: acquire %+v: memory %+v, redis %+v", where, req, gm, gr)
				}
				if gm.OK {
					grants++
					live = append(live, permit{gm.Permit, gr.Permit})
				} else {
					refusals[gm.Gate]++
				}
			case op < 15 && len(live) > 0:
				i := rng.IntN(len(live))
				p := live[i]
				s := core.Settlement{Kind: core.SettleKind(rng.IntN(3)), Tokens: rng.IntN(600), Cost: int64(rng.IntN(3000))}
				if err := mem.Release(ctx, p.m, s); err != nil {
					t.Fatal(err)
				}
				if err := cl.l.Release(ctx, p.r, s); err != nil {
					t.Fatal(err)
				}
				if rng.IntN(5) > 0 { // now and then a permit is released twice
					live = append(live[:i], live[i+1:]...)
				}
			case op < 18:
				d := time.Duration(rng.IntN(15_000)) * time.Millisecond
				if rng.IntN(10) == 0 {
					d = 61*time.Second + time.Duration(rng.IntN(60))*time.Second
				}
				cl.clk.Advance(d)
			default:
				for _, source := range []string{"a", "b", ""} {
					lim := glob
					if source != "" {
						lim = src[source]
					}
					um, _ := mem.Usage(ctx, scope, source)
					ur, err := cl.l.Usage(ctx, scope, source)
					if err != nil {
						t.Fatal(err)
					}
					if lim.MaxConcurrency > 0 && um.InFlight != ur.InFlight ||
						lim.RPM > 0 && um.Requests != ur.Requests ||
						lim.TPM > 0 && um.Tokens != ur.Tokens {
						t.Fatalf("%s: usage of %q: memory %+v, redis %+v", where, source, um, ur)
					}
				}
				compareBudgets(t, where, mem, cl.l, scope, "", budgets)
			}
		}
	}
	// The run must have reached both grants and refusals by every gate and budget.
	if grants < 100 || len(refusals) < 7 {
		t.Fatalf("%d grants, refusals by gate %v: the run is too tame to compare anything", grants, refusals)
	}
	t.Logf("%d grants, refusals by gate %v", grants, refusals)
}

// diffBudgets returns a round's budgets: client, shared by every round,
// and budgets of the scope's own with short windows.
func diffBudgets(rng *rand.Rand, scope string, client core.Budget) []core.Budget {
	bs := []core.Budget{client}
	for i := range 1 + rng.IntN(2) {
		bs = append(bs, core.Budget{Key: fmt.Sprintf("scope:%s:%d", scope, i),
			Limit: int64(500 + rng.IntN(4000)), Window: time.Duration(10+rng.IntN(110)) * time.Second})
	}
	return bs
}

// pickBudgets returns none of bs (now and then), or some in a random
// order, with a cost (now and then 0 or negative).
func pickBudgets(rng *rand.Rand, bs []core.Budget) ([]core.Budget, int64) {
	if rng.IntN(5) == 0 {
		return nil, 0
	}
	picked := make([]core.Budget, 0, len(bs))
	for _, i := range rng.Perm(len(bs)) {
		if rng.IntN(3) > 0 {
			picked = append(picked, bs[i])
		}
	}
	cost := int64(rng.IntN(800))
	switch rng.IntN(10) {
	case 0:
		cost = 0
	case 1:
		cost = -int64(rng.IntN(100))
	}
	return picked, cost
}

// compareBudgets fails the test where the two limiters report bs, as
// scope in pool counts them, apart.
func compareBudgets(t *testing.T, where string, m, r core.Limiter, scope, pool string, bs []core.Budget) {
	t.Helper()
	um, err := m.Budgets(t.Context(), scope, pool, bs)
	if err != nil {
		t.Fatal(err)
	}
	ur, err := r.Budgets(t.Context(), scope, pool, bs)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bs {
		if um[i].Budget != ur[i].Budget || um[i].Spent != ur[i].Spent ||
			!um[i].WindowStart.Equal(ur[i].WindowStart) || !um[i].WindowEnd.Equal(ur[i].WindowEnd) {
			t.Fatalf("%s: budget %s: memory %+v, redis %+v", where, bs[i].Key, um[i], ur[i])
		}
	}
}

// TestBreakerMatchesMemory drives the Redis breaker and the memory breaker
// with the same random admissions, outcomes, clock steps and turns of the
// operator's switch, and compares every admission, every fencing verdict
// and the snapshots: closed-circuit successes (the scripts' fast path)
// interleave with failures, timeouts, dead sources, pushback, abandoned
// probes and stale reports.
func TestBreakerMatchesMemory(t *testing.T) {
	cl := newClocked(t)
	rb := redisstore.NewBreaker(cl.c, redisstore.WithPrefix(cl.prefix), redisstore.WithClock(cl.clk))
	mb := memory.NewBreaker(memory.WithClock(cl.clk))
	rng := rand.New(rand.NewPCG(9, 10))
	ctx := t.Context()
	type admission struct{ m, r core.Admission }
	states := map[core.BreakerState]int{}
	applied, disabled, refusedOff := 0, 0, 0
	for round := range 12 {
		scope := fmt.Sprintf("BDIFF%d", round)
		cfg := core.BreakerConfig{
			FailThreshold: 1 + rng.IntN(5), Cooldown: time.Duration(1+rng.IntN(20)) * time.Second,
			MaxCooldown: time.Duration(20+rng.IntN(100)) * time.Second, ProbeTTL: time.Duration(5+rng.IntN(30)) * time.Second,
			HalfOpenSuccesses: 1 + rng.IntN(2), TimeoutWeight: []float64{0.5, 1}[rng.IntN(2)],
		}
		if rng.IntN(3) > 0 {
			cfg.MinCalls, cfg.FailRate, cfg.Window = 2+rng.IntN(10), 0.3+0.4*rng.Float64(), time.Duration(5+rng.IntN(60))*time.Second
		}
		// Mostly successes, as in life, so that the fast path runs between the rest.
		outcomes := []core.Outcome{core.OutcomeSuccess, core.OutcomeSuccess, core.OutcomeSuccess, core.OutcomeSuccess,
			core.OutcomeFailure, core.OutcomeFailure, core.OutcomeTimeout, core.OutcomeRateLimited, core.OutcomeAbandoned, core.OutcomeDead}
		var out []admission
		for step := range 300 {
			where := fmt.Sprintf("round %d (%+v) step %d at %v", round, cfg, step, cl.clk.Now().Sub(clockEpoch))
			switch op := rng.IntN(10); {
			case op < 4:
				am, _ := mb.Allow(ctx, scope, "s", cfg)
				ar, err := rb.Allow(ctx, scope, "s", cfg)
				if err != nil {
					t.Fatal(err)
				}
				if am != ar {
					t.Fatalf("%s: allow: memory %+v, redis %+v", where, am, ar)
				}
				states[am.State]++
				if am.Allowed {
					out = append(out, admission{am, ar})
				}
				if am.Disabled {
					refusedOff++
				}
			case op < 8 && len(out) > 0:
				// Mostly the newest admission, sometimes a stale one.
				i := len(out) - 1
				if rng.IntN(4) == 0 {
					i = rng.IntN(len(out))
				}
				a := out[i]
				o := outcomes[rng.IntN(len(outcomes))]
				okm, _ := mb.Record(ctx, scope, "s", a.m, o, cfg)
				okr, err := rb.Record(ctx, scope, "s", a.r, o, cfg)
				if err != nil {
					t.Fatal(err)
				}
				if okm != okr {
					t.Fatalf("%s: record %v of %+v: memory applied=%v, redis applied=%v", where, o, a.m, okm, okr)
				}
				if okm {
					applied++
				}
				out = append(out[:i], out[i+1:]...)
			case op < 9:
				cl.clk.Advance(time.Duration(rng.IntN(8000)) * time.Millisecond)
			default:
				if rng.IntN(3) == 0 { // the operator's switch, now and then
					on := rng.IntN(2) == 0
					if err := mb.SetEnabled(ctx, scope, "s", cfg, on); err != nil {
						t.Fatal(err)
					}
					if err := rb.SetEnabled(ctx, scope, "s", cfg, on); err != nil {
						t.Fatal(err)
					}
					if !on {
						disabled++
					}
				}
				sm, _ := mb.Snapshot(ctx, scope, "s", cfg)
				sr, err := rb.Snapshot(ctx, scope, "s", cfg)
				if err != nil {
					t.Fatal(err)
				}
				if sm != sr {
					t.Fatalf("%s: snapshot: memory %+v, redis %+v", where, sm, sr)
				}
			}
		}
	}
	if applied < 200 || len(states) < 3 || disabled == 0 || refusedOff < 20 {
		t.Fatalf("%d records applied, admissions by state %v, %d switched off, %d refused as off: the run is too tame to compare anything",
			applied, states, disabled, refusedOff)
	}
}

// TestAdmitterMatchesMemory drives the native Redis Admitter and the
// composition of the memory Limiter and Breaker with the same random
// admissions, finishes and clock steps, over two scopes of one pool and a
// scope of its own, and compares every ticket (admission and grant),
// every fencing verdict, and the usage and circuits now and then.
func TestAdmitterMatchesMemory(t *testing.T) {
	cl := newClocked(t)
	rb := redisstore.NewBreaker(cl.c, redisstore.WithPrefix(cl.prefix), redisstore.WithClock(cl.clk))
	ra := redisstore.NewAdmitter(cl.l, rb)
	defer ra.Close()
	ml, mb := memory.NewLimiter(memory.WithClock(cl.clk)), memory.NewBreaker(memory.WithClock(cl.clk))
	ma := core.ComposeAdmitter(ml, mb)
	rng := rand.New(rand.NewPCG(11, 12))
	ctx := t.Context()
	type ticket struct{ m, r core.Ticket }
	type scope struct{ name, pool string }
	outcomes := []core.Outcome{core.OutcomeSuccess, core.OutcomeSuccess, core.OutcomeSuccess, core.OutcomeFailure,
		core.OutcomeTimeout, core.OutcomeRateLimited, core.OutcomeAbandoned, core.OutcomeDead}
	grants, refusals, probes, applied := 0, map[core.Gate]int{}, 0, 0
	client := core.Budget{Key: "client:adiff", Limit: 30_000, Window: 5 * time.Minute}
	for round := range 8 {
		pool := fmt.Sprintf("POOL%d", round)
		scopes := []scope{{fmt.Sprintf("AX%d", round), pool}, {fmt.Sprintf("AY%d", round), pool}, {fmt.Sprintf("AZ%d", round), ""}}
		src := core.Limits{MaxConcurrency: 1 + rng.IntN(3), RPM: 5 + rng.IntN(20), TPM: 500 + rng.IntN(3000)}
		glob := core.Limits{MaxConcurrency: 2 + rng.IntN(3), RPM: 10 + rng.IntN(20)}
		cfg := core.BreakerConfig{FailThreshold: 1 + rng.IntN(3), Cooldown: time.Duration(1+rng.IntN(10)) * time.Second,
			MaxCooldown: 60 * time.Second, ProbeTTL: time.Duration(5+rng.IntN(20)) * time.Second, HalfOpenSuccesses: 1, TimeoutWeight: 1}
		budgets := diffBudgets(rng, pool, client)
		var live []ticket
		for step := range 250 {
			sc := scopes[rng.IntN(len(scopes))]
			source := []string{"a", "b"}[rng.IntN(2)]
			where := fmt.Sprintf("round %d step %d (%s/%s pool %q) at %v", round, step, sc.name, source, sc.pool, cl.clk.Now().Sub(clockEpoch))
			bc := cfg
			bc.Pool = sc.pool
			switch op := rng.IntN(10); {
			case op < 5:
				req := core.AdmitRequest{Breaker: bc, Permit: core.PermitRequest{Scope: sc.name, Source: source,
					SourceLimits: src, GlobalLimits: glob, Tokens: rng.IntN(300), LeaseTTL: 30 * time.Second, Pool: sc.pool}}
				req.Permit.Budgets, req.Permit.Cost = pickBudgets(rng, budgets)
				tm, _ := ma.Admit(ctx, req)
				tr, err := ra.Admit(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if tm.Admission != tr.Admission || tm.Grant.OK != tr.Grant.OK || tm.Grant.Gate != tr.Grant.Gate ||
					tm.Grant.RetryAfter != tr.Grant.RetryAfter || tm.Grant.Budget != tr.Grant.Budget {
					t.Fatalf("%s: admit: memory %+v, redis %+v", where, tm, tr)
				}
				switch {
				case tm.Admitted():
					grants++
					if tm.Admission.Probe {
						probes++
					}
					live = append(live, ticket{tm, tr})
				case tm.Admission.Allowed:
					refusals[tm.Grant.Gate]++
				}
			case op < 8 && len(live) > 0:
				i := rng.IntN(len(live))
				tk := live[i]
				s := core.Settlement{Kind: core.SettleKind(rng.IntN(3)), Tokens: rng.IntN(400), Cost: int64(rng.IntN(1500))}
				o := outcomes[rng.IntN(len(outcomes))]
				am, _ := ma.Finish(ctx, tk.m, s, o)
				ar, err := ra.Finish(ctx, tk.r, s, o)
				if err != nil {
					t.Fatal(err)
				}
				if am != ar {
					t.Fatalf("%s: finish %v of %+v: memory applied=%v, redis applied=%v", where, o, tk.m, am, ar)
				}
				if am {
					applied++
				}
				live = append(live[:i], live[i+1:]...)
			case op < 9:
				cl.clk.Advance(time.Duration(rng.IntN(6000)) * time.Millisecond)
			default:
				compareBudgets(t, where, ml, cl.l, sc.name, sc.pool, budgets)
				for _, s := range []string{"a", "b", ""} {
					um, _ := ml.Usage(ctx, sc.name, s)
					ur, err := cl.l.Usage(ctx, sc.name, s)
					if err != nil {
						t.Fatal(err)
					}
					if um.InFlight != ur.InFlight || um.Requests != ur.Requests || (s != "" && um.Tokens != ur.Tokens) {
						t.Fatalf("%s: usage of %q: memory %+v, redis %+v", where, s, um, ur)
					}
					if s == "" {
						continue
					}
					sm, _ := mb.Snapshot(ctx, sc.name, s, bc)
					sr, err := rb.Snapshot(ctx, sc.name, s, bc)
					if err != nil {
						t.Fatal(err)
					}
					if sm != sr {
						t.Fatalf("%s: snapshot of %q: memory %+v, redis %+v", where, s, sm, sr)
					}
				}
			}
		}
	}
	if grants < 200 || probes == 0 || applied < 100 || len(refusals) < 3 || refusals[core.GateBudget] == 0 {
		t.Fatalf("%d grants (%d probes), %d finishes applied, refusals by gate %v: the run is too tame to compare anything",
			grants, probes, applied, refusals)
	}
	t.Logf("%d grants (%d probes), %d finishes applied, refusals by gate %v", grants, probes, applied, refusals)
}
