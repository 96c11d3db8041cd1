package redisstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// safeWindow returns a budget window (whole days) whose current window,
// by the server's clock, has at least a minute left, so that a test on the
// server's time does not straddle a window's end.
func safeWindow(t *testing.T, c redis.UniversalClient) time.Duration {
	t.Helper()
	now, err := c.Time(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	for days := 7; ; days++ {
		b := core.Budget{Window: time.Duration(days) * 24 * time.Hour}
		if b.WindowStart(now).Add(b.Window).Sub(now) > time.Minute {
			return b.Window
		}
	}
}

// TestBudgetAcrossProcesses: two Limiters and two Admitters on two clients
// (two processes) share one budget by the server's clock. Fifty concurrent
// calls, half from each, against a budget that fits ten: ten pass in all.
func TestBudgetAcrossProcesses(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg target) {
		c1 := tg.client
		var c2 redis.UniversalClient = newClient(t)
		if tg.name == "cluster" {
			c2 = newClusterClient(t)
		}
		prefix := freshPrefix(t, c1)
		b := core.Budget{Key: "client:two-processes", Limit: 1000, Window: safeWindow(t, c1)}
		cfg := backendtest.SuiteBreakerConfig()
		type proc struct {
			l *redisstore.Limiter
			a *redisstore.Admitter
		}
		var procs []proc
		for _, c := range []redis.UniversalClient{c1, c2} {
			l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
			a := redisstore.NewAdmitter(l, redisstore.NewBreaker(c, redisstore.WithPrefix(prefix)))
			t.Cleanup(func() { _ = a.Close() })
			procs = append(procs, proc{l, a})
		}
		for _, via := range []string{"limiter", "admitter"} {
			t.Run(via, func(t *testing.T) {
				bud := b
				bud.Key += "/" + via
				// One pool, so that the cluster counts one spend too.
				req := core.PermitRequest{Scope: "TWO", Source: "a", Pool: "TWOPOOL", LeaseTTL: time.Minute,
					SourceLimits: core.Limits{MaxConcurrency: 100}, Budgets: []core.Budget{bud}, Cost: 100}
				bc := cfg
				bc.Pool = req.Pool
				const n = 50
				var (
					wg      sync.WaitGroup
					mu      sync.Mutex
					granted []core.Permit
					errs    []error
				)
				start := make(chan struct{})
				for i := range n {
					p := procs[i%2]
					wg.Go(func() {
						<-start
						var g core.Grant
						var err error
						if via == "limiter" {
							g, err = p.l.TryAcquire(t.Context(), req)
						} else {
							var tk core.Ticket
							tk, err = p.a.Admit(t.Context(), core.AdmitRequest{Permit: req, Breaker: bc})
							g = tk.Grant
						}
						mu.Lock()
						defer mu.Unlock()
						switch {
						case err != nil:
							errs = append(errs, err)
						case g.OK:
							granted = append(granted, g.Permit)
						case g.Gate != core.GateBudget || g.Budget != bud.Key || g.RetryAfter <= 0 || g.RetryAfter > bud.Window:
							errs = append(errs, fmt.Errorf("refusal %+v", g))
						}
					})
				}
				close(start)
				wg.Wait()
				if len(errs) > 0 {
					t.Fatal(errors.Join(errs...))
				}
				if len(granted) != 10 {
					t.Fatalf("%d of %d calls from two processes granted on a budget of ten, want 10", len(granted), n)
				}
				for _, p := range procs {
					us, err := p.l.Budgets(t.Context(), req.Scope, req.Pool, []core.Budget{bud})
					if err != nil || us[0].Spent != 1000 {
						t.Fatalf("Budgets = %+v, %v; want 1000 spent, seen by both processes", us, err)
					}
				}
				// A release by the other process settles it.
				if err := procs[1].l.Release(t.Context(), granted[0], core.Settlement{Kind: core.SettleActual, Cost: 40}); err != nil {
					t.Fatal(err)
				}
				if us, err := procs[0].l.Budgets(t.Context(), req.Scope, req.Pool, []core.Budget{bud}); err != nil || us[0].Spent != 940 {
					t.Fatalf("Budgets = %+v, %v; want 940", us, err)
				}
			})
		}
	})
}

// TestBudgetKeys: a budget is one hash per (key, window length), named
// under the prefix alone on a single node and under the scope's (pool's)
// hash tag on a cluster, in the slot of the scope's other keys; its TTL
// runs a second past the end of its window.
func TestBudgetKeys(t *testing.T) {
	t.Parallel()
	forEachTarget(t, func(t *testing.T, tg target) {
		c := tg.client
		prefix := freshPrefix(t, c)
		clk := backendtest.NewFakeClock(clockEpoch.Add(20 * time.Minute))
		l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
		b := core.Budget{Key: "client:{a}", Limit: 1000, Window: time.Hour}
		for _, pool := range []string{"", "KP"} {
			g, err := l.TryAcquire(t.Context(), core.PermitRequest{Scope: "K:S", Source: "a", Pool: pool,
				SourceLimits: core.Limits{MaxConcurrency: 5}, Budgets: []core.Budget{b}, Cost: 10, LeaseTTL: time.Minute})
			if err != nil || !g.OK {
				t.Fatalf("TryAcquire = %+v, %v", g, err)
			}
		}
		// On a single node both scopes' grants are in one spend; on a
		// cluster each is in its scope's (pool's).
		want := map[string]string{"": prefix + ":bud:client%3A%7Ba%7D:3600"}
		spent, members := "20", 2
		slots := map[string]string{"": prefix + ":lim:{K%3AS}:src:a:slots", "KP": prefix + ":pool:{KP}:src:K%3AS:a:slots"}
		if tg.name == "cluster" {
			want = map[string]string{
				"":   prefix + ":lim:{K%3AS}:bud:client%3A%7Ba%7D:3600",
				"KP": prefix + ":pool:{KP}:bud:client%3A%7Ba%7D:3600",
			}
			spent, members = "10", 1
		}
		for pool, k := range want {
			h, err := c.HGetAll(t.Context(), k).Result()
			if err != nil || h["s"] != fmt.Sprint(clockEpoch.Unix()) || h["v"] != spent || len(h) != 2+members {
				t.Fatalf("HGETALL %s = %v, %v; want the window's start, the spend %s and %d reservations", k, h, err, spent, members)
			}
			// The window ends in 40 minutes; the key outlives it by the 1 s margin.
			if ttl, err := c.PTTL(t.Context(), k).Result(); err != nil || ttl < 40*time.Minute || ttl > 40*time.Minute+2*time.Second {
				t.Fatalf("PTTL(%s) = %v, %v; want 40m1s", k, ttl, err)
			}
			if tg.name == "cluster" {
				ks, err1 := c.ClusterKeySlot(t.Context(), k).Result()
				ss, err2 := c.ClusterKeySlot(t.Context(), slots[pool]).Result()
				if err1 != nil || err2 != nil || ks != ss {
					t.Fatalf("budget key %s in slot %d, the scope's keys in %d (%v, %v)", k, ks, ss, err1, err2)
				}
			}
		}
		if n := countKeys(t, c, prefix+":*bud:*"); n != len(want) {
			t.Fatalf("%d budget keys, want %d", n, len(want))
		}
	})
}

// TestBudgetClusterReads: on a cluster, Budgets reads the spend of the
// scope it is given, and an empty window for a budget never checked.
func TestBudgetClusterReads(t *testing.T) {
	t.Parallel()
	c := newClusterClient(t)
	prefix := freshPrefix(t, c)
	clk := backendtest.NewFakeClock(clockEpoch)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
	b := core.Budget{Key: "client:c", Limit: 1000, Window: time.Hour}
	other := core.Budget{Key: "client:never", Limit: 5, Window: time.Minute}
	for scope, cost := range map[string]int64{"CX": 300, "CY": 500} {
		if g, err := l.TryAcquire(t.Context(), core.PermitRequest{Scope: scope, Source: "a", Budgets: []core.Budget{b}, Cost: cost}); err != nil || !g.OK {
			t.Fatalf("TryAcquire = %+v, %v", g, err)
		}
	}
	for scope, want := range map[string]int64{"CX": 300, "CY": 500, "CZ": 0} {
		us, err := l.Budgets(t.Context(), scope, "", []core.Budget{b})
		if err != nil || us[0].Spent != want {
			t.Fatalf("Budgets(%s) = %+v, %v; want %d", scope, us, err, want)
		}
	}
	if g, err := l.TryAcquire(t.Context(), core.PermitRequest{Scope: "CX", Source: "a", Budgets: []core.Budget{b}, Cost: 1}); err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	us, err := l.Budgets(t.Context(), "CX", "", []core.Budget{b, other})
	if err != nil || us[0].Spent != 301 || us[1].Spent != 0 || !us[1].WindowStart.Equal(clockEpoch) || !us[1].WindowEnd.Equal(clockEpoch.Add(time.Minute)) {
		t.Fatalf("Budgets = %+v, %v; want CX's 301 and an empty window of the budget never checked", us, err)
	}
}

// TestBudgetSpendNeverBelowZero: a spend that lost count (a Redis that
// restarted, an operator's edit) never settles below zero.
func TestBudgetSpendNeverBelowZero(t *testing.T) {
	t.Parallel()
	cl := newClocked(t)
	b := core.Budget{Key: "client:z", Limit: 1000, Window: time.Hour}
	g, err := cl.l.TryAcquire(t.Context(), core.PermitRequest{Scope: "Z", Source: "a", Budgets: []core.Budget{b}, Cost: 300})
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	key := cl.prefix + ":bud:client%3Az:3600"
	if err := cl.c.HSet(t.Context(), key, "v", 50).Err(); err != nil {
		t.Fatal(err)
	}
	if err := cl.l.Release(t.Context(), g.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		t.Fatal(err)
	}
	if us, err := cl.l.Budgets(t.Context(), "Z", "", []core.Budget{b}); err != nil || us[0].Spent != 0 {
		t.Fatalf("Budgets = %+v, %v; want 0", us, err)
	}
}

// TestBudgetErrors: a budget that cannot be enforced is a *BudgetError
// before any round trip, from TryAcquire, Admit (in a
// GovernanceBackendError) and Budgets.
func TestBudgetErrors(t *testing.T) {
	t.Parallel()
	log := &cmdLog{}
	c := newClient(t, log)
	prefix := freshPrefix(t, c)
	l := redisstore.NewLimiter(c, redisstore.WithPrefix(prefix))
	a := redisstore.NewAdmitter(l, redisstore.NewBreaker(c, redisstore.WithPrefix(prefix)))
	defer a.Close()
	bad := []core.Budget{{Key: "k", Limit: 0, Window: time.Hour}}
	var be *redisstore.BudgetError
	if _, err := l.TryAcquire(t.Context(), core.PermitRequest{Scope: "E", Source: "a", Budgets: bad}); !errors.As(err, &be) || be.Key != "k" {
		t.Fatalf("TryAcquire: %v, want a *BudgetError", err)
	}
	_, err := a.Admit(t.Context(), core.AdmitRequest{Permit: core.PermitRequest{Scope: "E", Source: "a", Budgets: bad}})
	var ge *core.GovernanceBackendError
	if !errors.As(err, &ge) || !errors.As(err, &be) {
		t.Fatalf("Admit: %v, want a GovernanceBackendError of a *BudgetError", err)
	}
	if _, err := l.Budgets(t.Context(), "E", "", bad); !errors.As(err, &be) {
		t.Fatalf("Budgets: %v, want a *BudgetError", err)
	}
	if got := log.take(); len(got) != 0 {
		t.Fatalf("invalid budgets sent %v, want nothing", got)
	}
	if be.Error() != `polygateway: redisstore: budget "k": the limit must be positive` {
		t.Fatalf("message %q", be.Error())
	}
}
