package engine

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// selectorEngine builds an engine for choose tests.
func selectorEngine(t *testing.T, selector core.SelectorName, opts []func(*Config), sources ...core.SourceConfig) *Engine {
	t.Helper()
	set := testSettings(sources...)
	set.Selector = selector
	return newFixture(t, set, opts...).g
}

// picks runs choose n times with fresh call state and counts the names picked.
func picks(g *Engine, now time.Time, n int, tried, excluded sourceSet) map[string]int {
	counts := map[string]int{}
	for range n {
		tr, ex := tried, excluded
		i := g.pick(now, &tr, &ex, &sourceSet{})
		if i < 0 {
			counts[""]++
			continue
		}
		counts[g.sources[i].cfg.Name]++
	}
	return counts
}

func setOf(g *Engine, names ...string) sourceSet {
	var s sourceSet
	for _, name := range names {
		for i, src := range g.sources {
			if src.cfg.Name == name {
				s.add(i, len(g.sources))
			}
		}
	}
	return s
}

// makeWeak drives a source's health below healthyScore at now.
func makeWeak(s *sourceState, now time.Time) {
	for range 5 {
		observe(s, now, false)
	}
}

func onlyPicked(t *testing.T, counts map[string]int, want string) {
	t.Helper()
	for name, n := range counts {
		if name != want && n > 0 {
			t.Errorf("picked %q %d times; want only %q (counts %v)", name, n, want, counts)
		}
	}
	if counts[want] == 0 {
		t.Errorf("never picked %q (counts %v)", want, counts)
	}
}

func TestChoosePrefersTheLowestPriorityTier(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, selector := range []core.SelectorName{core.SelectorHealthAware, core.SelectorRoundRobin, core.SelectorLeastInflight, core.SelectorCostAware} {
		t.Run(string(selector), func(t *testing.T) {
			t.Parallel()
			g := selectorEngine(t, selector, nil, src("backup", 1), src("main1", 0), src("last", 2), src("main2", 0))
			counts := picks(g, now, 400, sourceSet{}, sourceSet{})
			if counts["backup"]+counts["last"]+counts[""] > 0 {
				t.Errorf("a fallback tier was picked while tier 0 was eligible: %v", counts)
			}
			if counts["main1"] == 0 || counts["main2"] == 0 {
				t.Errorf("tier 0 not shared: %v", counts)
			}
		})
	}
}

func TestChooseFallsBackATierOnlyWhenTheBestTierHasNoEligibleSource(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name     string
		prepare  func(g *Engine) (tried, excluded sourceSet)
		wantOnly string
	}{
		{"tier 0 excluded this round", func(g *Engine) (sourceSet, sourceSet) {
			return sourceSet{}, setOf(g, "main")
		}, "backup"},
		{"tier 0 in a hard hold", func(g *Engine) (sourceSet, sourceSet) {
			g.sourceNamed("main").setHold(now, now.Add(time.Minute), holdCircuitOpen)
			return sourceSet{}, sourceSet{}
		}, "backup"},
		{"tier 0 and 1 unavailable", func(g *Engine) (sourceSet, sourceSet) {
			g.sourceNamed("main").setHold(now, now.Add(time.Minute), holdRateLimited)
			return sourceSet{}, setOf(g, "backup")
		}, "last"},
		{"tier 0 in an expired hard hold", func(g *Engine) (sourceSet, sourceSet) {
			g.sourceNamed("main").setHold(now.Add(-time.Minute), now, holdCircuitOpen)
			return sourceSet{}, sourceSet{}
		}, "main"},
		{"tier 0 weak is still preferred over a healthy fallback tier", func(g *Engine) (sourceSet, sourceSet) {
			makeWeak(g.sourceNamed("main"), now)
			return sourceSet{}, sourceSet{}
		}, "main"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			g := selectorEngine(t, core.SelectorHealthAware, nil, src("main", 0), src("backup", 1), src("last", 2))
			tried, excluded := tc.prepare(g)
			onlyPicked(t, picks(g, now, 100, tried, excluded), tc.wantOnly)
		})
	}
}

func TestChooseReturnsNoneWhenEverySourceIsExcludedOrHardHeld(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorHealthAware, nil, src("a", 0), src("b", 1))
	g.sourceNamed("a").setHold(now, now.Add(time.Minute), holdRateLimited)
	excluded := setOf(g, "b")
	if i := g.pick(now, &sourceSet{}, &excluded, &sourceSet{}); i != -1 {
		t.Errorf("choose = %d, want -1", i)
	}
}

func TestChoosePrefersTheRegionOverTheTier(t *testing.T) {
	t.Parallel()
	now := time.Now()
	region := func(c core.SourceConfig, r string) core.SourceConfig { c.Region = r; return c }
	tests := []struct {
		name      string
		preferred string
		excluded  []string
		wantOnly  string
	}{
		{"preferred region in a worse tier beats another region's best tier", "eu", nil, "eu_backup"},
		{"best tier inside the preferred region", "us", nil, "us_main"},
		{"other region only when the preferred region has no eligible source", "eu", []string{"eu_backup"}, "us_main"},
		{"no preference means tiers only", "", nil, "us_main"},
		{"unknown preferred region means tiers only", "ap", nil, "us_main"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := testSettings(region(src("us_main", 0), "us"), region(src("eu_backup", 1), "eu"), region(src("us_backup", 2), "us"))
			set.PreferredRegion = tc.preferred
			g := newFixture(t, set).g
			onlyPicked(t, picks(g, now, 100, sourceSet{}, setOf(g, tc.excluded...)), tc.wantOnly)
		})
	}
}

// PRIORITY is any integer: the preferred region ranks before it and lower
// tiers before higher ones whatever their size, with no arithmetic limit
// (a PRIORITY beyond ±2^30 once moved a source across the region order).
func TestRegionAndTierOrderHoldForAnyPriority(t *testing.T) {
	t.Parallel()
	now := time.Now()
	region := func(c core.SourceConfig, r string) core.SourceConfig { c.Region = r; return c }
	tests := []struct {
		name       string
		home, away int // PRIORITY of the preferred region's source and the other's
	}{
		{"small tiers", 5, 0},
		{"a preferred tier above 2^30", 2_000_000_000, 0},
		{"another region's tier below -2^30", 0, -2_000_000_000},
		{"the extremes", math.MaxInt, math.MinInt},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			set := testSettings(region(src("home", tc.home), "eu"), region(src("away", tc.away), "us"))
			set.PreferredRegion = "eu"
			g := newFixture(t, set).g
			onlyPicked(t, picks(g, now, 50, sourceSet{}, sourceSet{}), "home")
		})
	}
	tiers := []struct {
		name        string
		best, worse int
	}{
		{"near the top", math.MaxInt - 1, math.MaxInt},
		{"near the bottom", math.MinInt, math.MinInt + 1},
		{"across the range", math.MinInt, math.MaxInt},
	}
	for _, tc := range tiers {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, preferred := range []string{"", "eu", "us"} {
				set := testSettings(region(src("worse", tc.worse), "eu"), region(src("best", tc.best), "eu"))
				set.PreferredRegion = preferred
				g := newFixture(t, set).g
				onlyPicked(t, picks(g, now, 50, sourceSet{}, sourceSet{}), "best")
			}
		})
	}
}

func TestSmoothWeightedRoundRobinIsExactlyProportionalOverEveryCycle(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorRoundRobin, nil, weighted("w1", 0, 1), weighted("w2", 0, 2), weighted("w3", 0, 3))
	total := map[string]int{}
	for cycle := range 100 {
		counts := picks(g, now, 6, sourceSet{}, sourceSet{})
		if counts["w1"] != 1 || counts["w2"] != 2 || counts["w3"] != 3 {
			t.Fatalf("cycle %d picked %v, want w1:1 w2:2 w3:3", cycle, counts)
		}
		for k, v := range counts {
			total[k] += v
		}
	}
	if total["w1"] != 100 || total["w2"] != 200 || total["w3"] != 300 {
		t.Errorf("600 picks = %v, want 100/200/300", total)
	}
}

func TestSmoothWeightedRoundRobinInterleaves(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorRoundRobin, nil, weighted("a", 0, 1), weighted("b", 0, 1))
	prev := ""
	for i := range 50 {
		var tried, excluded sourceSet
		name := g.sources[g.pick(now, &tried, &excluded, &sourceSet{})].cfg.Name
		if name == prev {
			t.Fatalf("pick %d repeated %q: equal weights must alternate", i, name)
		}
		prev = name
	}
}

func TestLeastInflightPicksTheLeastLoadedPerWeight(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name     string
		weights  []float64
		inflight []int64
		wantOnly string
	}{
		{"fewest in flight", []float64{1, 1, 1}, []int64{3, 1, 2}, "s1"},
		{"load is per unit of weight", []float64{1, 4, 1}, []int64{2, 4, 3}, "s1"},
		{"idle source wins", []float64{5, 5, 1}, []int64{1, 1, 0}, "s2"},
		{"heavier weight breaks an absolute tie", []float64{1, 2, 1}, []int64{2, 2, 2}, "s1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var srcs []core.SourceConfig
			for i, w := range tc.weights {
				srcs = append(srcs, weighted(fmt.Sprintf("s%d", i), 0, w))
			}
			g := selectorEngine(t, core.SelectorLeastInflight, nil, srcs...)
			for i, n := range tc.inflight {
				g.sources[i].inflight.Store(n)
			}
			onlyPicked(t, picks(g, now, 100, sourceSet{}, sourceSet{}), tc.wantOnly)
		})
	}
}

func TestLeastInflightBreaksTiesAtRandom(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorLeastInflight, nil, src("a", 0), src("b", 0), src("c", 0))
	counts := picks(g, now, 3000, sourceSet{}, sourceSet{})
	for _, name := range []string{"a", "b", "c"} {
		if counts[name] < 700 {
			t.Errorf("tie broken unevenly: %v", counts)
		}
	}
}

func TestHealthAwareAvoidsWeakSourcesWhileAHealthyOneIsInTheGroup(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorHealthAware, nil, src("weak", 0), src("ok1", 0), src("ok2", 0))
	makeWeak(g.sourceNamed("weak"), now)
	counts := picks(g, now, 2000, sourceSet{}, sourceSet{})
	if counts["weak"] > 0 {
		t.Errorf("weak source picked %d times while healthy ones were available: %v", counts["weak"], counts)
	}
	if counts["ok1"] == 0 || counts["ok2"] == 0 {
		t.Errorf("healthy sources not shared: %v", counts)
	}
}

func TestHealthAwarePicksAWeakSourceWhenNothingHealthierIsAvailable(t *testing.T) {
	t.Parallel()
	now := time.Now()
	t.Run("alone", func(t *testing.T) {
		t.Parallel()
		g := selectorEngine(t, core.SelectorHealthAware, nil, src("weak", 0))
		makeWeak(g.sourceNamed("weak"), now)
		onlyPicked(t, picks(g, now, 10, sourceSet{}, sourceSet{}), "weak")
	})
	t.Run("healthy one excluded", func(t *testing.T) {
		t.Parallel()
		g := selectorEngine(t, core.SelectorHealthAware, nil, src("weak", 0), src("ok", 0))
		makeWeak(g.sourceNamed("weak"), now)
		onlyPicked(t, picks(g, now, 50, sourceSet{}, setOf(g, "ok")), "weak")
	})
	t.Run("all weak", func(t *testing.T) {
		t.Parallel()
		g := selectorEngine(t, core.SelectorHealthAware, nil, src("w1", 0), src("w2", 0))
		makeWeak(g.sourceNamed("w1"), now)
		makeWeak(g.sourceNamed("w2"), now)
		counts := picks(g, now, 500, sourceSet{}, sourceSet{})
		if counts["w1"] == 0 || counts["w2"] == 0 || counts[""] > 0 {
			t.Errorf("weak sources not used when all are weak: %v", counts)
		}
	})
	t.Run("weak source is readmitted after idle recovery", func(t *testing.T) {
		t.Parallel()
		g := selectorEngine(t, core.SelectorHealthAware, nil, src("weak", 0), src("busy", 0))
		makeWeak(g.sourceNamed("weak"), now)
		g.sourceNamed("busy").inflight.Store(1)
		// Weak: avoided even though the healthy source is busy.
		onlyPicked(t, picks(g, now, 200, sourceSet{}, sourceSet{}), "busy")
		// Recovered (health ≈ 0.995 after 5τ): now it wins against the busy one.
		onlyPicked(t, picks(g, now.Add(5*recoveryTau), 200, sourceSet{}, sourceSet{}), "weak")
	})
}

func TestP2CShareIsRoughlyProportionalToWeight(t *testing.T) {
	t.Parallel()
	now := time.Now()
	tests := []struct {
		name    string
		weights []float64
	}{
		{"1:3", []float64{1, 3}},
		{"1:2:5", []float64{1, 2, 5}},
		{"equal", []float64{1, 1, 1, 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var srcs []core.SourceConfig
			sum := 0.0
			for i, w := range tc.weights {
				srcs = append(srcs, weighted(fmt.Sprintf("s%d", i), 0, w))
				sum += w
			}
			g := selectorEngine(t, core.SelectorHealthAware, nil, srcs...)
			const n = 20000
			counts := picks(g, now, n, sourceSet{}, sourceSet{})
			for i, w := range tc.weights {
				got := float64(counts[fmt.Sprintf("s%d", i)]) / n
				if want := w / sum; math.Abs(got-want) > 0.03 {
					t.Errorf("s%d share = %.3f, want %.3f ± 0.03 (counts %v)", i, got, want, counts)
				}
			}
		})
	}
}

func TestP2CPrefersTheLessLoadedOfTwoEquallyHealthySources(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorHealthAware, nil, src("busy", 0), src("idle", 0))
	g.sourceNamed("busy").inflight.Store(5)
	onlyPicked(t, picks(g, now, 200, sourceSet{}, sourceSet{}), "idle")
}

func TestCostAwarePicksTheCheapestPricedHealthySource(t *testing.T) {
	t.Parallel()
	now := time.Now()
	pricing := core.PricingTable{
		"model-dear":  {InputPer1M: 10, OutputPer1M: 30},
		"model-cheap": {InputPer1M: 0.5, OutputPer1M: 1.5},
		"model-mid":   {InputPer1M: 1, OutputPer1M: 3},
	}
	build := func(t *testing.T) *Engine {
		return selectorEngine(t, core.SelectorCostAware, []func(*Config){withPricing(pricing)},
			src("dear", 0), src("unpriced", 0), src("cheap", 0), src("mid", 0))
	}
	t.Run("cheapest", func(t *testing.T) {
		t.Parallel()
		onlyPicked(t, picks(build(t), now, 200, sourceSet{}, sourceSet{}), "cheap")
	})
	t.Run("cheapest weak is skipped", func(t *testing.T) {
		t.Parallel()
		g := build(t)
		makeWeak(g.sourceNamed("cheap"), now)
		onlyPicked(t, picks(g, now, 200, sourceSet{}, sourceSet{}), "mid")
	})
	t.Run("unpriced last", func(t *testing.T) {
		t.Parallel()
		g := build(t)
		onlyPicked(t, picks(g, now, 200, sourceSet{}, setOf(g, "cheap", "mid")), "dear")
		onlyPicked(t, picks(g, now, 200, sourceSet{}, setOf(g, "cheap", "mid", "dear")), "unpriced")
	})
	t.Run("nothing priced falls back to p2c", func(t *testing.T) {
		t.Parallel()
		g := selectorEngine(t, core.SelectorCostAware, []func(*Config){withPricing(pricing)}, src("x", 0), src("y", 0))
		counts := picks(g, now, 1000, sourceSet{}, sourceSet{})
		if counts["x"] < 300 || counts["y"] < 300 {
			t.Errorf("unpriced sources not shared: %v", counts)
		}
	})
}

func TestChooseTakesSoftHeldSourcesOnlyWhenNothingFreshIsEligible(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, kind := range []holdKind{holdFailed, holdTimeout} {
		t.Run(fmt.Sprint(kind), func(t *testing.T) {
			t.Parallel()
			g := selectorEngine(t, core.SelectorHealthAware, nil, src("hold", 0), src("fresh", 0), src("backup", 1))
			g.sourceNamed("hold").setHold(now, now.Add(time.Minute), kind)
			onlyPicked(t, picks(g, now, 100, sourceSet{}, sourceSet{}), "fresh")
			// A fresh source in a worse tier still beats a soft hold.
			onlyPicked(t, picks(g, now, 100, sourceSet{}, setOf(g, "fresh")), "backup")
			// Alone, a soft-held source is used.
			onlyPicked(t, picks(g, now, 100, sourceSet{}, setOf(g, "fresh", "backup")), "hold")
		})
	}
}

func TestChooseNeverTakesHardHeldSources(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, kind := range []holdKind{holdRateLimited, holdCircuitOpen} {
		g := selectorEngine(t, core.SelectorHealthAware, nil, src("hard", 0), src("soft", 1))
		g.sourceNamed("hard").setHold(now, now.Add(time.Minute), kind)
		g.sourceNamed("soft").setHold(now, now.Add(time.Minute), holdFailed)
		onlyPicked(t, picks(g, now, 100, sourceSet{}, sourceSet{}), "soft")
		excluded := setOf(g, "soft")
		if i := g.pick(now, &sourceSet{}, &excluded, &sourceSet{}); i != -1 {
			t.Errorf("kind %d: choose = %d, want -1 with only a hard-held source left", kind, i)
		}
	}
}

func TestChooseTriesSourcesUsedInThisCallAfterFreshOnes(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := selectorEngine(t, core.SelectorHealthAware, nil, src("a", 0), src("b", 0), src("c", 1))
	onlyPicked(t, picks(g, now, 100, setOf(g, "a"), sourceSet{}), "b")
	onlyPicked(t, picks(g, now, 100, setOf(g, "a", "b"), sourceSet{}), "c")
	counts := picks(g, now, 400, setOf(g, "a", "b", "c"), sourceSet{})
	if counts["a"] == 0 || counts["b"] == 0 || counts["c"] > 0 {
		t.Errorf("with all tried, tier 0 should be shared again: %v", counts)
	}
	// A tried source beats a soft hold source.
	g.sourceNamed("b").setHold(now, now.Add(time.Minute), holdFailed)
	onlyPicked(t, picks(g, now, 100, setOf(g, "a", "c"), sourceSet{}), "a")
}

func TestChooseDoesNotAllocate(t *testing.T) {
	now := time.Now()
	pricing := core.PricingTable{"model-b": {InputPer1M: 1, OutputPer1M: 1}, "model-c": {InputPer1M: 2, OutputPer1M: 2}}
	for _, selector := range []core.SelectorName{core.SelectorHealthAware, core.SelectorRoundRobin, core.SelectorLeastInflight, core.SelectorCostAware} {
		t.Run(string(selector), func(t *testing.T) {
			g := selectorEngine(t, selector, []func(*Config){withPricing(pricing)},
				weighted("a", 0, 1), weighted("b", 0, 2), weighted("c", 0, 3), weighted("d", 1, 1))
			makeWeak(g.sourceNamed("a"), now)
			var tried, excluded sourceSet
			tried.add(3, 4)
			allocs := testing.AllocsPerRun(500, func() {
				if g.pick(now, &tried, &excluded, &sourceSet{}) < 0 {
					panic("nothing chosen")
				}
			})
			if allocs != 0 {
				t.Errorf("choose allocates %v times per run, want 0", allocs)
			}
		})
	}
}

func TestSourceSetBeyondTheInlineCapacity(t *testing.T) {
	t.Parallel()
	const n = 200
	var s sourceSet
	for _, i := range []int{0, 63, 64, 127, 128, 199} {
		s.add(i, n)
	}
	for i := range n {
		want := i == 0 || i == 63 || i == 64 || i == 127 || i == 128 || i == 199
		if s.has(i, n) != want {
			t.Errorf("has(%d) = %v, want %v", i, s.has(i, n), want)
		}
	}
	s.clear()
	for i := range n {
		if s.has(i, n) {
			t.Fatalf("has(%d) after clear", i)
		}
	}
}

// With more sources than the inline buffer holds, every source of the best
// group must still be a candidate.
func TestChooseConsidersEverySourceBeyondInlineCapacity(t *testing.T) {
	t.Parallel()
	now := time.Now()
	const n = maxInline + 2
	var srcs []core.SourceConfig
	for i := range n {
		srcs = append(srcs, src(fmt.Sprintf("s%03d", i), 0))
	}
	g := selectorEngine(t, core.SelectorRoundRobin, nil, srcs...)
	counts := picks(g, now, 4*n, sourceSet{}, sourceSet{})
	for i := range n {
		if name := fmt.Sprintf("s%03d", i); counts[name] == 0 {
			t.Errorf("source %s (index %d of %d) was never picked by round robin over %d picks", name, i, n, 4*n)
		}
	}
}

func TestChooseWaitsForABusyBetterSourceInsteadOfSpillingOntoAFailingOne(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000_000, 0)
	t.Run("health_aware: healthy busy, weak fresh", func(t *testing.T) {
		g := selectorEngine(t, core.SelectorHealthAware, nil, weighted("a", 0, 1), weighted("b", 0, 1))
		makeWeak(g.sourceNamed("b"), now)
		var tried, excluded, busy sourceSet
		excluded.add(0, 2)
		busy.add(0, 2)
		if i := g.pick(now, &tried, &excluded, &busy); i != -1 {
			t.Fatalf("chose %s while the healthy source was only busy", g.sources[i].cfg.Name)
		}
		// Without the busy mark (refused for another reason) the weak one is taken.
		var notBusy sourceSet
		if i := g.pick(now, &tried, &excluded, &notBusy); i != 1 {
			t.Fatalf("chose %d, want the weak source when nothing better exists", i)
		}
	})
	t.Run("round_robin: busy fresh, failing in its soft hold", func(t *testing.T) {
		g := selectorEngine(t, core.SelectorRoundRobin, nil, weighted("a", 0, 1), weighted("b", 0, 1))
		g.sourceNamed("b").setHold(now, now.Add(time.Second), holdFailed)
		var tried, excluded, busy sourceSet
		excluded.add(0, 2)
		busy.add(0, 2)
		if i := g.pick(now, &tried, &excluded, &busy); i != -1 {
			t.Fatalf("chose %s, want a wait for the busy source", g.sources[i].cfg.Name)
		}
	})
	t.Run("a worse busy source does not hold up a better candidate", func(t *testing.T) {
		g := selectorEngine(t, core.SelectorHealthAware, nil, weighted("a", 0, 1), weighted("b", 1, 1))
		var tried, excluded, busy sourceSet
		excluded.add(1, 2)
		busy.add(1, 2)
		if i := g.pick(now, &tried, &excluded, &busy); i != 0 {
			t.Fatalf("chose %d, want the tier-0 source", i)
		}
	})
}
