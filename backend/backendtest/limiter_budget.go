package backendtest

import (
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

var limiterBudgetCases = []struct {
	name string
	run  func(h *limiterHarness)
}{
	{"BudgetConcurrentAcquiresFitExactly", limiterBudgetConcurrent},
	{"BudgetSettlementFreesRoom", limiterBudgetSettlementFrees},
	{"BudgetSettleActualAboveEstimate", limiterBudgetActualAbove},
	{"BudgetFreeAndNegativeCosts", limiterBudgetFreeCalls},
	{"BudgetWindowRollover", limiterBudgetRollover},
	{"BudgetEndedWindowNotMadeAnew", limiterBudgetEndedWindow},
	{"BudgetGateRefusalTakesNoBudget", limiterBudgetGateFirst},
	{"BudgetRefusalTakesNoGate", limiterBudgetTakesNoGate},
	{"BudgetTwoBudgetsOneFull", limiterBudgetTwo},
	{"BudgetSameKeyAcrossScopes", limiterBudgetAcrossScopes},
	{"BudgetDoubleReleaseIsNoop", limiterBudgetDoubleRelease},
	{"BudgetLeaseExpiryKeepsReservation", limiterBudgetLeaseExpiry},
	{"BudgetsReportWindows", limiterBudgetsReport},
	{"BudgetInvalidIsAnError", limiterBudgetInvalid},
}

// in returns a harness for another scope sharing the limiter and clock.
func (h *limiterHarness) in(scope string) *limiterHarness {
	c := *h
	c.scope = scope
	return &c
}

// budget returns a budget whose key is the subtest's own.
func (h *limiterHarness) budget(name string, limit int64, window time.Duration) core.Budget {
	return core.Budget{Key: h.t.Name() + "/" + name, Limit: limit, Window: window}
}

// spend returns a request on source "a" with every gate off, checked
// against bs for cost.
func (h *limiterHarness) spend(cost int64, bs ...core.Budget) core.PermitRequest {
	req := h.req("a", core.Limits{}, core.Limits{}, 0)
	req.Budgets, req.Cost = bs, cost
	return req
}

// refuseBudget checks that req is refused by the budget named key.
func (h *limiterHarness) refuseBudget(req core.PermitRequest, key string) core.Grant {
	h.t.Helper()
	g := h.refuse(req, core.GateBudget)
	if g.Budget != key {
		h.t.Fatalf("refused by budget %q, want %q", g.Budget, key)
	}
	return g
}

// usageOfBudgets reads bs as the harness's scope (in no pool) counts them.
func (h *limiterHarness) usageOfBudgets(bs ...core.Budget) []core.BudgetUsage {
	h.t.Helper()
	return h.usageOfBudgetsIn("", bs...)
}

// usageOfBudgetsIn reads bs as the harness's scope in pool counts them.
func (h *limiterHarness) usageOfBudgetsIn(pool string, bs ...core.Budget) []core.BudgetUsage {
	h.t.Helper()
	us, err := h.l.Budgets(h.t.Context(), h.scope, pool, bs)
	if err != nil {
		h.t.Fatalf("Budgets: %v", err)
	}
	if len(us) != len(bs) {
		h.t.Fatalf("Budgets returned %d usages for %d budgets", len(us), len(bs))
	}
	return us
}

// wantSpent checks the spend of b's current window.
func (h *limiterHarness) wantSpent(b core.Budget, want int64) {
	h.t.Helper()
	if u := h.usageOfBudgets(b)[0]; u.Spent != want {
		h.t.Fatalf("spent on %s at %v = %d, want %d", b.Key, h.clk.Now().Sub(epoch()), u.Spent, want)
	}
}

// wantSpentIn checks the spend of b's current window as the harness's
// scope in pool counts it.
func (h *limiterHarness) wantSpentIn(pool string, b core.Budget, want int64) {
	h.t.Helper()
	if u := h.usageOfBudgetsIn(pool, b)[0]; u.Spent != want {
		h.t.Fatalf("spent on %s in scope %s, pool %q = %d, want %d", b.Key, h.scope, pool, u.Spent, want)
	}
}

func limiterBudgetConcurrent(h *limiterHarness) {
	h.clk.Advance(10 * time.Minute)
	// The acquires come from five scopes (of one pool where the backend
	// counts a budget per pool), which a backend may lock apart.
	const n, scopes = 50, 5
	pool := ""
	if h.opt.budgetsPerScope {
		pool = h.scope + "/pool"
	}
	for round := range 4 {
		b := h.budget("hour"+strconv.Itoa(round), 1000, time.Hour)
		type result struct {
			g   core.Grant
			err error
		}
		results := make(chan result, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			req := pooled(h.in(h.scope+"/s"+strconv.Itoa(i%scopes)).spend(100, b), pool)
			wg.Go(func() {
				<-start
				g, err := h.l.TryAcquire(h.t.Context(), req)
				results <- result{g, err}
			})
		}
		close(start)
		wg.Wait()
		close(results)
		var granted []core.Permit
		for r := range results {
			switch {
			case r.err != nil:
				h.t.Fatalf("TryAcquire: %v", r.err)
			case r.g.OK:
				granted = append(granted, r.g.Permit)
			case r.g.Gate != core.GateBudget || r.g.Budget != b.Key || r.g.RetryAfter != 50*time.Minute:
				h.t.Fatalf("refusal %+v, want the budget %q with RetryAfter 50m (the hour's rest)", r.g, b.Key)
			}
		}
		if len(granted) != 10 {
			h.t.Fatalf("round %d: %d of %d concurrent acquires of 100 granted on a budget of 1000, want exactly 10", round, len(granted), n)
		}
		for _, p := range granted {
			h.release(p, core.Settlement{Kind: core.SettleRefund})
		}
		if !h.opt.budgetsPerScope {
			h.wantSpent(b, 0)
		}
	}
}

func limiterBudgetSettlementFrees(h *limiterHarness) {
	b := h.budget("b", 1000, time.Hour)
	a := h.grant(h.spend(400, b))
	c := h.grant(h.spend(400, b))
	h.refuseBudget(h.spend(400, b), b.Key)
	h.release(a, core.Settlement{Kind: core.SettleRefund, Cost: 999})
	h.wantSpent(b, 400)
	d := h.grant(h.spend(400, b))
	h.release(c, core.Settlement{Kind: core.SettleActual, Cost: 100})
	h.wantSpent(b, 500)
	h.grant(h.spend(500, b))
	h.refuseBudget(h.spend(1, b), b.Key)
	h.refuseBudget(h.spend(0, b), b.Key)
	h.release(d, core.Settlement{Kind: core.SettleEstimate, Cost: 1})
	h.wantSpent(b, 1000)
}

func limiterBudgetActualAbove(h *limiterHarness) {
	b := h.budget("b", 1000, time.Hour)
	other := h.budget("other", 100000, time.Hour)
	p := h.grant(h.spend(100, b, other))
	h.wantSpent(b, 100)
	h.release(p, core.Settlement{Kind: core.SettleActual, Cost: 1500})
	h.wantSpent(b, 1500)
	h.wantSpent(other, 1500)
	h.refuseBudget(h.spend(0, b), b.Key)
	if u := h.usageOfBudgets(b)[0]; u.Remaining() != 0 {
		h.t.Fatalf("Remaining = %d past the limit, want 0", u.Remaining())
	}
}

func limiterBudgetFreeCalls(h *limiterHarness) {
	b := h.budget("b", 100, time.Hour)
	h.grant(h.spend(99, b))
	if p := h.grant(h.spend(0, b)); p.Cost != 0 || !reflect.DeepEqual(p.Budgets, []core.Budget{b}) {
		h.t.Fatalf("permit %+v, want cost 0 on the request's budgets", p)
	}
	p := h.grant(h.spend(-50, b))
	if p.Cost != 0 {
		h.t.Fatalf("permit of a negative cost reserves %d, want 0", p.Cost)
	}
	h.wantSpent(b, 99)
	h.refuseBudget(h.spend(2, b), b.Key)
	h.grant(h.spend(1, b))
	h.refuseBudget(h.spend(0, b), b.Key)
	h.refuseBudget(h.spend(-1, b), b.Key)
	h.wantSpent(b, 100)
}

func limiterBudgetRollover(h *limiterHarness) {
	b := h.budget("minute", 1000, time.Minute)
	t0 := epoch()
	h.clk.Set(t0.Add(25 * time.Second))
	p := h.grant(h.spend(600, b))
	q := h.grant(h.spend(400, b))
	if g := h.refuseBudget(h.spend(1, b), b.Key); g.RetryAfter != 35*time.Second {
		h.t.Fatalf("RetryAfter = %v at +25s of a minute's window, want 35s", g.RetryAfter)
	}
	h.clk.Set(t0.Add(time.Minute - time.Millisecond))
	if g := h.refuseBudget(h.spend(0, b), b.Key); g.RetryAfter != time.Millisecond {
		h.t.Fatalf("RetryAfter = %v a millisecond before the window ends, want 1ms", g.RetryAfter)
	}
	h.clk.Set(t0.Add(time.Minute))
	u := h.usageOfBudgets(b)[0]
	if u.Spent != 0 || !u.WindowStart.Equal(t0.Add(time.Minute)) || !u.WindowEnd.Equal(t0.Add(2*time.Minute)) {
		h.t.Fatalf("the next window = %+v, want empty, from +1m to +2m", u)
	}
	h.grant(h.spend(300, b))
	// Permits of the ended window settle nothing into the new one.
	h.release(p, core.Settlement{Kind: core.SettleRefund})
	h.release(q, core.Settlement{Kind: core.SettleActual, Cost: 5000})
	h.wantSpent(b, 300)
	h.grant(h.spend(700, b))
	h.refuseBudget(h.spend(1, b), b.Key)
}

func limiterBudgetEndedWindow(h *limiterHarness) {
	b := h.budget("minute", 1000, time.Minute)
	p := h.grant(h.spend(600, b))
	h.clk.Advance(2 * time.Minute) // nothing else happens meanwhile
	h.release(p, core.Settlement{Kind: core.SettleActual, Cost: 900})
	u := h.usageOfBudgets(b)[0]
	if u.Spent != 0 || !u.WindowStart.Equal(epoch().Add(2*time.Minute)) {
		h.t.Fatalf("after a late settlement the window is %+v, want the current one, empty", u)
	}
	h.grant(h.spend(1000, b))
}

func limiterBudgetGateFirst(h *limiterHarness) {
	b := h.budget("b", 1000, time.Hour)
	one := core.Limits{MaxConcurrency: 1}
	req := h.req("a", one, core.Limits{}, 0)
	req.Budgets, req.Cost = []core.Budget{b}, 100
	h.grant(req)
	h.refuse(req, core.GateSourceConcurrency)
	h.wantSpent(b, 100)
	// A gate and a budget both refuse: the gate is named, the budget untouched.
	full := h.budget("full", 100, time.Hour)
	h.grant(h.spend(100, full))
	req.Budgets = []core.Budget{b, full}
	h.refuse(req, core.GateSourceConcurrency)
	h.wantSpent(b, 100)
	h.wantSpent(full, 100)
}

func limiterBudgetTakesNoGate(h *limiterHarness) {
	b := h.budget("b", 100, time.Hour)
	lim := core.Limits{MaxConcurrency: 5, RPM: 10, TPM: 1000}
	req := h.req("a", lim, lim, 10)
	req.Budgets, req.Cost = []core.Budget{b}, 100
	h.grant(req)
	before, beforeG := h.usage("a"), h.usage("")
	req.Cost = 1
	h.refuseBudget(req, b.Key)
	if got := h.usage("a"); got != before {
		h.t.Fatalf("a budget refusal counted on the source: %+v, was %+v", got, before)
	}
	if got := h.usage(""); got != beforeG {
		h.t.Fatalf("a budget refusal counted on the global gates: %+v, was %+v", got, beforeG)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 1, Requests: 1, Tokens: 10})
}

func limiterBudgetTwo(h *limiterHarness) {
	scope := h.budget("scope", 10000, 24*time.Hour)
	client := h.budget("client", 300, time.Hour)
	h.grant(h.spend(300, scope, client))
	h.wantSpent(scope, 300)
	h.wantSpent(client, 300)
	h.refuseBudget(h.spend(100, scope, client), client.Key)
	h.refuseBudget(h.spend(100, client, scope), client.Key)
	h.wantSpent(scope, 300)
	h.wantSpent(client, 300)
	// With both full, the first in the request's order is named.
	x, y := h.budget("x", 100, time.Hour), h.budget("y", 100, time.Hour)
	h.grant(h.spend(100, x, y))
	h.refuseBudget(h.spend(1, y, x), y.Key)
	h.refuseBudget(h.spend(1, x, y), x.Key)
}

func limiterBudgetAcrossScopes(h *limiterHarness) {
	b := h.budget("client", 1000, time.Hour)
	// The sources of one scope share.
	h.grant(h.spend(600, b))
	other := h.spend(400, b)
	other.Source = "b"
	h.grant(other)
	h.refuseBudget(h.spend(1, b), b.Key)
	// Two scopes without a pool share, unless the backend counts per scope.
	c := h.budget("scopes", 1000, time.Hour)
	x, y := h.in(h.scope+"/x"), h.in(h.scope+"/y")
	x.grant(x.spend(600, c))
	if h.opt.budgetsPerScope {
		y.grant(y.spend(600, c))
		y.refuseBudget(y.spend(600, c), c.Key)
		// Budgets reads each scope's own count.
		x.wantSpent(c, 600)
		y.wantSpent(c, 600)
	} else {
		y.refuseBudget(y.spend(600, c), c.Key)
		y.grant(y.spend(400, c))
		// Budgets reads the one count, whichever scope asks.
		x.wantSpent(c, 1000)
		y.wantSpent(c, 1000)
	}
	x.refuseBudget(x.spend(600, c), c.Key)
	// The scopes of one pool share whatever the backend.
	d := h.budget("pool", 1000, time.Hour)
	pool := h.scope + "/pool"
	px, py := h.in(h.scope+"/px"), h.in(h.scope+"/py")
	px.grant(pooled(px.spend(600, d), pool))
	py.refuseBudget(pooled(py.spend(600, d), pool), d.Key)
	py.grant(pooled(py.spend(400, d), pool))
	px.wantSpentIn(pool, d, 1000)
	py.wantSpentIn(pool, d, 1000)
	// One key with another window is another spend.
	e := b
	e.Window = 24 * time.Hour
	h.grant(h.spend(1000, e))
	h.refuseBudget(h.spend(1, e), e.Key)
}

func limiterBudgetDoubleRelease(h *limiterHarness) {
	b := h.budget("b", 1000, time.Hour)
	p := h.grant(h.spend(300, b))
	h.release(p, core.Settlement{Kind: core.SettleActual, Cost: 100})
	h.wantSpent(b, 100)
	q := h.grant(h.spend(300, b))
	h.release(p, core.Settlement{Kind: core.SettleRefund})
	h.release(p, core.Settlement{Kind: core.SettleActual, Cost: 5000})
	h.wantSpent(b, 400)
	forged := q
	forged.Lease += 1000
	h.release(forged, core.Settlement{Kind: core.SettleRefund})
	h.release(core.Permit{Budgets: q.Budgets, Cost: q.Cost}, core.Settlement{Kind: core.SettleRefund})
	h.wantSpent(b, 400)
	h.release(q, core.Settlement{Kind: core.SettleEstimate})
	h.release(q, core.Settlement{Kind: core.SettleRefund})
	h.wantSpent(b, 400)
}

func limiterBudgetLeaseExpiry(h *limiterHarness) {
	b := h.budget("b", 1000, time.Hour)
	req := h.spend(300, b)
	req.LeaseTTL = 30 * time.Second
	p := h.grant(req) // its process dies: never released in time
	h.clk.Advance(30 * time.Second)
	h.release(p, core.Settlement{Kind: core.SettleRefund})
	h.wantSpent(b, 300)
	alive := h.grant(req)
	h.release(alive, core.Settlement{Kind: core.SettleRefund})
	h.wantSpent(b, 300)
}

func limiterBudgetsReport(h *limiterHarness) {
	day := h.budget("day", 5000, 24*time.Hour)
	minute := h.budget("minute", 700, time.Minute)
	if us := h.usageOfBudgets(); len(us) != 0 {
		h.t.Fatalf("Budgets() = %+v, want none", us)
	}
	t0 := epoch()
	h.clk.Set(t0.Add(90*time.Minute + 30*time.Second))
	p := h.grant(h.spend(1200, day))
	us := h.usageOfBudgets(day, minute)
	want := []core.BudgetUsage{
		{Budget: day, Spent: 1200, WindowStart: t0, WindowEnd: t0.Add(24 * time.Hour)},
		{Budget: minute, Spent: 0, WindowStart: t0.Add(90 * time.Minute), WindowEnd: t0.Add(91 * time.Minute)},
	}
	for i := range want {
		if !sameUsage(us[i], want[i]) {
			h.t.Fatalf("Budgets()[%d] = %+v, want %+v", i, us[i], want[i])
		}
	}
	if us[0].Remaining() != 3800 || us[1].Remaining() != 700 {
		h.t.Fatalf("Remaining = %d, %d; want 3800, 700", us[0].Remaining(), us[1].Remaining())
	}
	h.release(p, core.Settlement{Kind: core.SettleActual, Cost: 800})
	h.wantSpent(day, 800)
}

// sameUsage compares usages, their times by instant.
func sameUsage(a, b core.BudgetUsage) bool {
	return a.Budget == b.Budget && a.Spent == b.Spent && a.WindowStart.Equal(b.WindowStart) && a.WindowEnd.Equal(b.WindowEnd)
}

func limiterBudgetInvalid(h *limiterHarness) {
	ok := h.budget("ok", 1000, time.Hour)
	cases := []struct {
		name string
		bs   []core.Budget
	}{
		{"zero_limit", []core.Budget{ok, {Key: ok.Key + "z", Window: time.Hour}}},
		{"negative_limit", []core.Budget{{Key: ok.Key + "n", Limit: -5, Window: time.Hour}}},
		{"zero_window", []core.Budget{{Key: ok.Key + "w", Limit: 10}}},
		{"window_under_a_second", []core.Budget{{Key: ok.Key + "s", Limit: 10, Window: 500 * time.Millisecond}}},
		{"fractional_window", []core.Budget{{Key: ok.Key + "f", Limit: 10, Window: 1500 * time.Millisecond}}},
		{"empty_key", []core.Budget{{Limit: 10, Window: time.Hour}}},
		{"named_twice", []core.Budget{ok, ok}},
	}
	one := core.Limits{MaxConcurrency: 1, RPM: 10, TPM: 1000}
	for _, tc := range cases {
		h.t.Run(tc.name, func(t *testing.T) {
			sub := h.in(h.scope)
			sub.t = t
			req := sub.req("a", one, one, 10)
			req.Budgets, req.Cost = tc.bs, 1
			g, err := sub.l.TryAcquire(t.Context(), req)
			if err == nil || g.OK {
				t.Fatalf("TryAcquire with %+v = %+v, %v; want an error", tc.bs, g, err)
			}
			if _, err := sub.l.Budgets(t.Context(), sub.scope, "", tc.bs); err == nil {
				t.Fatalf("Budgets(%+v) did not fail", tc.bs)
			}
			sub.wantUsage("a", core.LimiterUsage{})
			sub.wantSpent(ok, 0)
		})
	}
}
