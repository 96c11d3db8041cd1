package redisstore_test

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

var cmdusecRE = regexp.MustCompile(`(?m)^cmdstat_evalsha:calls=\d+,usec=(\d+)`)

// scriptMicros returns the microseconds the server has spent in EVALSHA,
// the commands the scripts call included.
func scriptMicros(t *testing.T, c *redis.Client) int {
	t.Helper()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	m := cmdusecRE.FindStringSubmatch(info)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// commandStats returns the server's call counts of every command, from
// INFO commandstats.
func commandStats(t *testing.T, c *redis.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, m := range cmdstatRE.FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[2])
		out[m[1]] = n
	}
	return out
}

// TestRoundTripsWithBudgets: with budgets, every operation is still one
// round trip (one EVALSHA): TryAcquire, Release, Admit, Finish, Budgets,
// and SetEnabled; and it reports the commands the scripts run inside, with
// budgets off, with one and with two, per governed call (Admit + Finish)
// in steady state, counted by the server (INFO commandstats).
func TestRoundTripsWithBudgets(t *testing.T) {
	rs := startPrivateRedis(t)
	log := &cmdLog{}
	c := privateClient(t, rs, log)
	stats := privateClient(t, rs) // INFO travels apart from the log
	ctx := t.Context()
	l := redisstore.NewLimiter(c)
	br := redisstore.NewBreaker(c)
	a := redisstore.NewAdmitter(l, br)
	defer a.Close()
	cfg := backendtest.SuiteBreakerConfig()
	lim := core.Limits{MaxConcurrency: 100, RPM: 1 << 30, TPM: 1 << 40}
	scopeB := core.Budget{Key: "scope:RTB", Limit: 1 << 50, Window: 24 * time.Hour}
	clientB := core.Budget{Key: "client:rtb", Limit: 1 << 50, Window: time.Hour}
	arms := []struct {
		name    string
		budgets []core.Budget
	}{{"off", nil}, {"one budget", []core.Budget{scopeB}}, {"two budgets", []core.Budget{scopeB, clientB}}}

	warm := true // the first use of a script may cost EVALSHA, NOSCRIPT, EVAL
	one := func(op string, f func() error) {
		t.Helper()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", op, err)
		}
		if got := log.take(); !warm && (len(got) != 1 || got[0] != "evalsha") {
			t.Fatalf("%s sent %v, want one evalsha", op, got)
		}
	}
	call := func(budgets []core.Budget) {
		t.Helper()
		req := core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: "RTB", Source: "a", SourceLimits: lim,
			Tokens: 100, LeaseTTL: time.Minute, Budgets: budgets, Cost: 2500}}
		var tk core.Ticket
		one("Admit", func() (err error) {
			tk, err = a.Admit(ctx, req)
			if err == nil && !tk.Admitted() {
				t.Fatalf("Admit = %+v", tk)
			}
			return err
		})
		one("Finish", func() error {
			_, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleActual, Tokens: 80, Cost: 2100}, core.OutcomeSuccess)
			return err
		})
	}
	// Warm up: load the scripts, make the keys and the budgets' windows.
	for _, arm := range arms {
		for range 3 {
			call(arm.budgets)
		}
	}
	warm = false
	// The arms take turns, so that a drift of the machine's load falls on
	// all of them alike.
	const rounds, calls = 5, 40
	type tally struct {
		cmds       map[string]int
		evals, use int
	}
	tallies := make([]tally, len(arms))
	for range rounds {
		for i, arm := range arms {
			before, usec := commandStats(t, stats), scriptMicros(t, stats)
			for range calls {
				call(arm.budgets)
			}
			usec = scriptMicros(t, stats) - usec
			after := commandStats(t, stats)
			if tallies[i].cmds == nil {
				tallies[i].cmds = map[string]int{}
			}
			for name, n := range after {
				if d := n - before[name]; d != 0 && name != "info" && !strings.HasPrefix(name, "eval") {
					tallies[i].cmds[name] += d
				}
			}
			tallies[i].evals += after["evalsha"] - before["evalsha"]
			tallies[i].use += usec
		}
	}
	for i, arm := range arms {
		n := rounds * calls
		if tallies[i].evals != 2*n {
			t.Fatalf("%s: the server ran %d scripts in %d calls, want 2 per call", arm.name, tallies[i].evals, n)
		}
		var inside []string
		total := 0
		for name, d := range tallies[i].cmds {
			total += d
			inside = append(inside, name+"="+strconv.FormatFloat(float64(d)/float64(n), 'g', 3, 64))
		}
		slices.Sort(inside)
		t.Logf("budgets %s: 2 round trips per call (Admit + Finish); %.1f commands inside the scripts per call (%s); %.1f µs of script time per call on the server",
			arm.name, float64(total)/float64(n), strings.Join(inside, " "), float64(tallies[i].use)/float64(n))
	}
	// The Limiter's own methods, and the switch (warmed up first).
	limiterOps := func() {
		t.Helper()
		req := core.PermitRequest{Scope: "RTB", Source: "a", SourceLimits: lim, LeaseTTL: time.Minute, Budgets: []core.Budget{scopeB, clientB}, Cost: 10}
		var g core.Grant
		one("TryAcquire", func() (err error) { g, err = l.TryAcquire(ctx, req); return err })
		one("Release", func() error { return l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}) })
		one("Budgets", func() error { _, err := l.Budgets(ctx, "RTB", "", []core.Budget{scopeB, clientB}); return err })
		one("SetEnabled", func() error { return br.SetEnabled(ctx, "RTB", "b", cfg, false) })
		one("SetEnabled", func() error { return br.SetEnabled(ctx, "RTB", "b", cfg, true) })
		// A permit with no gate but a budget is still released in one trip.
		req.SourceLimits = core.Limits{}
		one("TryAcquire", func() (err error) { g, err = l.TryAcquire(ctx, req); return err })
		one("Release", func() error { return l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleRefund}) })
	}
	warm = true
	limiterOps()
	warm = false
	limiterOps()
}
