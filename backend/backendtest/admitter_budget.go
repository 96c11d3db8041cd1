package backendtest

import (
	"reflect"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

var admitterBudgetCases = []struct {
	name string
	run  func(h *admitterHarness)
}{
	{"BudgetReservedAndSettled", admitterBudgetSettles},
	{"BudgetRefusalHoldsNothing", admitterBudgetRefusal},
	{"ProbeGivenBackWhenBudgetRefuses", admitterBudgetProbe},
	{"BudgetConcurrentAdmitsFitExactly", admitterBudgetConcurrent},
	{"BudgetSharedAcrossScopes", admitterBudgetPooled},
	{"SwitchedOffSourceRefused", admitterSwitch},
	{"SwitchKeepsTheCircuit", admitterSwitchKeepsCircuit},
}

func (h *admitterHarness) setEnabled(source string, on bool) {
	h.t.Helper()
	if err := h.be.Breaker.SetEnabled(h.t.Context(), h.scope, source, h.cfg, on); err != nil {
		h.t.Fatalf("SetEnabled(%s/%s, %v): %v", h.scope, source, on, err)
	}
}

func (h *admitterHarness) budget(name string, limit int64, window time.Duration) core.Budget {
	return core.Budget{Key: h.t.Name() + "/" + name, Limit: limit, Window: window}
}

// spend returns req with budgets bs and cost.
func spend(r core.AdmitRequest, cost int64, bs ...core.Budget) core.AdmitRequest {
	r.Permit.Budgets, r.Permit.Cost = bs, cost
	return r
}

func (h *admitterHarness) wantSpent(b core.Budget, want int64) {
	h.t.Helper()
	us, err := h.be.Limiter.Budgets(h.t.Context(), h.scope, h.cfg.Pool, []core.Budget{b})
	if err != nil {
		h.t.Fatalf("Budgets: %v", err)
	}
	if len(us) != 1 || us[0].Spent != want {
		h.t.Fatalf("Budgets(%s) = %+v, want spent %d", b.Key, us, want)
	}
}

func (h *admitterHarness) refusedByBudget(r core.AdmitRequest, key string) core.Ticket {
	h.t.Helper()
	t := h.refusedBy(r, core.GateBudget)
	if t.Grant.Budget != key || t.Grant.RetryAfter <= 0 {
		h.t.Fatalf("refusal %+v, want the budget %q and a RetryAfter", t.Grant, key)
	}
	return t
}

func admitterBudgetSettles(h *admitterHarness) {
	b := h.budget("b", 1000, time.Hour)
	r := spend(h.req("a", allGates, allGates, 100), 400, b)
	t := h.granted(r)
	if p := t.Grant.Permit; p.Cost != 400 || !reflect.DeepEqual(p.Budgets, []core.Budget{b}) {
		h.t.Fatalf("permit %+v, want cost 400 on the request's budget", p)
	}
	h.wantSpent(b, 400)
	if !h.finish(t, core.Settlement{Kind: core.SettleActual, Tokens: 30, Cost: 100}, core.OutcomeSuccess) {
		h.t.Fatal("Finish not applied")
	}
	h.wantSpent(b, 100)
	h.wantUsage("a", core.LimiterUsage{InFlight: 0, Requests: 1, Tokens: 30})
	e, f := h.granted(r), h.granted(r)
	h.finish(e, core.Settlement{Kind: core.SettleEstimate}, core.OutcomeSuccess)
	h.finish(f, core.Settlement{Kind: core.SettleRefund}, core.OutcomeFailure)
	h.wantSpent(b, 500)
	g := h.granted(spend(r, 500, b))
	h.refusedByBudget(spend(r, 1, b), b.Key)
	h.finish(g, core.Settlement{Kind: core.SettleActual, Cost: 1700}, core.OutcomeSuccess)
	h.wantSpent(b, 2200)
}

func admitterBudgetRefusal(h *admitterHarness) {
	b := h.budget("b", 100, time.Hour)
	h.granted(spend(h.req("a", allGates, allGates, 100), 100, b))
	before, beforeG := h.usage("a"), h.usage("")
	snap := h.snap("a")
	h.refusedByBudget(spend(h.req("a", allGates, allGates, 100), 1, b), b.Key)
	h.wantUsage("a", before)
	h.wantUsage("", beforeG)
	h.wantSpent(b, 100)
	if s := h.snap("a"); s != snap {
		h.t.Fatalf("a budget refusal changed the circuit: %+v, was %+v", s, snap)
	}
}

func admitterBudgetProbe(h *admitterHarness) {
	b := h.budget("b", 100, time.Hour)
	h.open("a")
	h.clk.Advance(h.cfg.Cooldown)
	full, err := h.be.Limiter.TryAcquire(h.t.Context(), spend(h.req("b", core.Limits{}, core.Limits{}, 0), 100, b).Permit)
	if err != nil || !full.OK {
		h.t.Fatalf("TryAcquire = %+v, %v", full, err)
	}
	t := h.refusedByBudget(spend(h.req("a", core.Limits{}, core.Limits{}, 0), 10, b), b.Key)
	if !t.Admission.Probe {
		h.t.Fatalf("admission %+v, want the probe (then given back)", t.Admission)
	}
	if s := h.snap("a"); s.ProbeHeld || s.State != core.StateHalfOpen {
		h.t.Fatalf("snapshot %+v, want half-open with the probe free", s)
	}
	if err := h.be.Limiter.Release(h.t.Context(), full.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		h.t.Fatal(err)
	}
	if p := h.granted(spend(h.req("a", core.Limits{}, core.Limits{}, 0), 10, b)); !p.Admission.Probe {
		h.t.Fatalf("admission %+v once the budget has room, want the probe", p.Admission)
	}
}

func admitterBudgetConcurrent(h *admitterHarness) {
	b := h.budget("b", 1000, 24*time.Hour)
	r := spend(h.req("a", core.Limits{MaxConcurrency: 100}, core.Limits{}, 0), 100, b)
	const n = 50
	type result struct {
		t   core.Ticket
		err error
	}
	results := make(chan result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			t, err := h.be.Admitter.Admit(h.t.Context(), r)
			results <- result{t, err}
		})
	}
	close(start)
	wg.Wait()
	close(results)
	admitted := 0
	for res := range results {
		switch {
		case res.err != nil:
			h.t.Fatalf("Admit: %v", res.err)
		case res.t.Admitted():
			admitted++
		case res.t.Grant.Gate != core.GateBudget || res.t.Grant.Budget != b.Key || res.t.Grant.RetryAfter != 24*time.Hour:
			h.t.Fatalf("refusal %+v, want the budget %q with RetryAfter 24h", res.t, b.Key)
		}
	}
	if admitted != 10 {
		h.t.Fatalf("%d of %d concurrent admits of 100 on a budget of 1000, want exactly 10", admitted, n)
	}
	h.wantSpent(b, 1000)
	h.wantUsage("a", core.LimiterUsage{InFlight: 10})
}

func admitterBudgetPooled(h *admitterHarness) {
	b := h.budget("client", 1000, time.Hour)
	pool := h.scope + "/pool"
	x, y := h.in(h.scope+"/x", pool), h.in(h.scope+"/y", pool)
	tx := x.granted(spend(x.req("a", core.Limits{}, core.Limits{MaxConcurrency: 5}, 0), 700, b))
	y.refusedByBudget(spend(y.req("a", core.Limits{}, core.Limits{MaxConcurrency: 5}, 0), 700, b), b.Key)
	x.finish(tx, core.Settlement{Kind: core.SettleActual, Cost: 200}, core.OutcomeSuccess)
	y.granted(spend(y.req("a", core.Limits{}, core.Limits{MaxConcurrency: 5}, 0), 700, b))
	y.refusedByBudget(spend(y.req("b", core.Limits{}, core.Limits{MaxConcurrency: 5}, 0), 101, b), b.Key)
	// Two scopes without a pool share too, unless the backend counts per scope.
	c := h.budget("scopes", 1000, time.Hour)
	u, v := h.in(h.scope+"/u", ""), h.in(h.scope+"/v", "")
	u.granted(spend(u.req("a", core.Limits{}, core.Limits{}, 0), 700, c))
	if h.opt.budgetsPerScope {
		v.granted(spend(v.req("a", core.Limits{}, core.Limits{}, 0), 700, c))
	} else {
		v.refusedByBudget(spend(v.req("a", core.Limits{}, core.Limits{}, 0), 700, c), c.Key)
	}
}

func admitterSwitch(h *admitterHarness) {
	b := h.budget("b", 1000, time.Hour)
	r := spend(h.req("a", allGates, allGates, 100), 100, b)
	h.setEnabled("a", false)
	t := h.admit(r)
	want := core.Admission{Disabled: true, State: core.StateClosed, Epoch: t.Admission.Epoch}
	if t.Admission != want || t.Admitted() || !reflect.DeepEqual(t.Grant, core.Grant{}) {
		h.t.Fatalf("Admit of a switched-off source = %+v, want refused by the breaker, disabled, no grant", t)
	}
	h.wantUsage("a", core.LimiterUsage{})
	h.wantUsage("", core.LimiterUsage{})
	h.wantSpent(b, 0)
	// Another source of the scope is not switched off.
	h.granted(spend(h.req("c", allGates, allGates, 100), 100, b))
	h.setEnabled("a", true)
	if t := h.granted(r); t.Admission.Disabled {
		h.t.Fatalf("admission %+v after the switch went on", t.Admission)
	}
	h.wantSpent(b, 200)
}

func admitterSwitchKeepsCircuit(h *admitterHarness) {
	h.open("a")
	before := h.snap("a")
	h.setEnabled("a", false)
	h.clk.Advance(h.cfg.Cooldown) // half-open by time, switched off
	t := h.admit(h.req("a", allGates, allGates, 0))
	if t.Admission.Allowed || !t.Admission.Disabled || t.Admission.Probe || t.Admission.State != core.StateHalfOpen || t.Admission.RetryAfter != 0 {
		h.t.Fatalf("Admit = %+v, want refused as disabled, half-open underneath, no probe", t.Admission)
	}
	if s := h.snap("a"); !s.Disabled || s.ProbeHeld || s.Epoch != before.Epoch || s.Opens != before.Opens {
		h.t.Fatalf("snapshot %+v while switched off, was %+v", s, before)
	}
	h.setEnabled("a", true)
	if p := h.granted(h.req("a", allGates, allGates, 0)); !p.Admission.Probe {
		h.t.Fatalf("admission %+v after the switch went on, want the probe", p.Admission)
	}
}
