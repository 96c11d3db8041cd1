package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// TestLimiterStress has 64 goroutines acquire and release at random across
// four sources of two scopes while the clock moves. No concurrency gate is
// ever exceeded, and once everything is released and the window has
// passed, every gate reads zero.
func TestLimiterStress(t *testing.T) {
	const (
		workers = 64
		rounds  = 400
	)
	ctx := context.Background()
	clk := backendtest.NewFakeClock(allocEpoch)
	l := memory.NewLimiter(memory.WithClock(clk))
	scopes := []string{"alpha", "beta"}
	sources := []string{"s0", "s1", "s2", "s3"}
	srcLim := core.Limits{MaxConcurrency: 4, RPM: 600, TPM: 200_000}
	globLim := core.Limits{MaxConcurrency: 10, RPM: 1500, TPM: 500_000}

	type key struct{ scope, source string }
	held := map[key]*atomic.Int64{}
	for _, sc := range scopes {
		held[key{sc, ""}] = &atomic.Int64{}
		for _, s := range sources {
			held[key{sc, s}] = &atomic.Int64{}
		}
	}
	var (
		wg      sync.WaitGroup
		granted atomic.Int64
		failed  atomic.Value
	)
	fail := func(format string, args ...any) { failed.CompareAndSwap(nil, fmt.Sprintf(format, args...)) }
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			var mine []core.Permit
			release := func(p core.Permit) {
				held[key{p.Scope, p.Source}].Add(-1)
				held[key{p.Scope, ""}].Add(-1)
				s := core.Settlement{Kind: core.SettleKind(rng.IntN(3)), Tokens: rng.IntN(2000)}
				if err := l.Release(ctx, p, s); err != nil {
					fail("Release: %v", err)
				}
				if rng.IntN(10) == 0 { // a stray second release is a no-op
					_ = l.Release(ctx, p, s)
				}
			}
			for range rounds {
				if rng.IntN(8) == 0 {
					clk.Advance(time.Duration(rng.IntN(200)) * time.Millisecond)
				}
				req := core.PermitRequest{
					Scope: scopes[rng.IntN(len(scopes))], Source: sources[rng.IntN(len(sources))],
					SourceLimits: srcLim, GlobalLimits: globLim,
					Tokens: rng.IntN(1500), LeaseTTL: time.Hour,
				}
				g, err := l.TryAcquire(ctx, req)
				if err != nil {
					fail("TryAcquire: %v", err)
					return
				}
				if g.OK {
					granted.Add(1)
					if n := held[key{req.Scope, req.Source}].Add(1); n > int64(srcLim.MaxConcurrency) {
						fail("%d permits held on %s/%s, limit %d", n, req.Scope, req.Source, srcLim.MaxConcurrency)
					}
					if n := held[key{req.Scope, ""}].Add(1); n > int64(globLim.MaxConcurrency) {
						fail("%d permits held on %s, limit %d", n, req.Scope, globLim.MaxConcurrency)
					}
					mine = append(mine, g.Permit)
				} else if g.Gate == core.GateNone {
					fail("refusal without a gate: %+v", g)
				}
				for len(mine) > 0 && (len(mine) > 2 || rng.IntN(2) == 0) {
					i := rng.IntN(len(mine))
					p := mine[i]
					mine = append(mine[:i], mine[i+1:]...)
					release(p)
				}
			}
			for _, p := range mine {
				release(p)
			}
		})
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		t.Fatal(msg)
	}
	if granted.Load() < workers*rounds/10 {
		t.Fatalf("only %d grants: the stress did not exercise the limiter", granted.Load())
	}
	usage := func(scope, source string) core.LimiterUsage {
		u, err := l.Usage(ctx, scope, source)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	for _, sc := range scopes {
		for _, s := range append([]string{""}, sources...) {
			if u := usage(sc, s); u.InFlight != 0 {
				t.Errorf("%s/%q: %d in flight after every release", sc, s, u.InFlight)
			}
		}
	}
	clk.Advance(time.Minute)
	for _, sc := range scopes {
		for _, s := range append([]string{""}, sources...) {
			if u := usage(sc, s); u != (core.LimiterUsage{}) {
				t.Errorf("%s/%q: usage %+v a minute later, want zero", sc, s, u)
			}
		}
	}
}

// TestBreakerStress has 64 goroutines admit and record at random outcomes
// on a few circuits while the clock moves. At most one probe is ever out
// per circuit, and once every admission is recorded no probe is held.
func TestBreakerStress(t *testing.T) {
	const workers = 64
	ctx := context.Background()
	clk := backendtest.NewFakeClock(allocEpoch)
	b := memory.NewBreaker(memory.WithClock(clk))
	cfg := backendtest.SuiteBreakerConfig()
	cfg.Cooldown, cfg.MaxCooldown, cfg.ProbeTTL = time.Second, 4*time.Second, time.Hour
	cfg.MinCalls = 10
	var probesOut [3]atomic.Int64
	var (
		wg      sync.WaitGroup
		failed  atomic.Value
		applied atomic.Int64
	)
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for range 500 {
				if rng.IntN(4) == 0 {
					clk.Advance(time.Duration(rng.IntN(100)) * time.Millisecond)
				}
				c := rng.IntN(len(probesOut))
				src := "c" + strconv.Itoa(c)
				adm, err := b.Allow(ctx, "scope", src, cfg)
				if err != nil {
					failed.CompareAndSwap(nil, err.Error())
					return
				}
				if !adm.Allowed {
					continue
				}
				if adm.Probe {
					if n := probesOut[c].Add(1); n > 1 {
						failed.CompareAndSwap(nil, fmt.Sprintf("%d probes out on %s", n, src))
					}
				}
				o := core.Outcome(rng.IntN(6))
				if adm.Probe {
					probesOut[c].Add(-1)
				}
				ok, err := b.Record(ctx, "scope", src, adm, o, cfg)
				if err != nil {
					failed.CompareAndSwap(nil, err.Error())
					return
				}
				if ok {
					applied.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if msg := failed.Load(); msg != nil {
		t.Fatal(msg)
	}
	if applied.Load() == 0 {
		t.Fatal("no outcome applied")
	}
	for c := range probesOut {
		s, err := b.Snapshot(ctx, "scope", "c"+strconv.Itoa(c), cfg)
		if err != nil {
			t.Fatal(err)
		}
		if s.ProbeHeld {
			t.Errorf("c%d: probe held after every admission was recorded: %+v", c, s)
		}
		if s.Opens == 0 {
			t.Errorf("c%d never opened: the stress did not exercise the breaker", c)
		}
	}
}

// TestCacheConcurrent hammers one bounded Cache from 16 goroutines.
func TestCacheConcurrent(t *testing.T) {
	ctx := context.Background()
	c := memory.NewCache(memory.WithMaxEntries(50))
	var wg sync.WaitGroup
	for w := range 16 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 3))
			for range 2000 {
				k := "k" + strconv.Itoa(rng.IntN(200))
				if rng.IntN(2) == 0 {
					_ = c.Set(ctx, k, []byte(k), time.Hour)
					continue
				}
				v, ok, err := c.Get(ctx, k)
				if err != nil || (ok && string(v) != k) {
					t.Errorf("Get(%s) = %q, %v, %v", k, v, ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := c.Len(); n > 50 {
		t.Fatalf("%d entries, bound 50", n)
	}
}
