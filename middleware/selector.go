package middleware

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// p2cTie is the relative score difference below which two P2C candidates
// are considered equal.
const p2cTie = 0.05

// maxInline is the number of sources a call tracks without allocating.
const maxInline = 128

// sourceSet is a set of source indexes; allocation-free up to maxInline sources.
type sourceSet struct {
	small [maxInline / 64]uint64
	big   []uint64
}

func (s *sourceSet) words(n int) []uint64 {
	if n <= maxInline {
		return s.small[:]
	}
	if s.big == nil {
		s.big = make([]uint64, (n+63)/64)
	}
	return s.big
}

func (s *sourceSet) add(i, n int)      { w := s.words(n); w[i/64] |= 1 << (i % 64) }
func (s *sourceSet) has(i, n int) bool { w := s.words(n); return w[i/64]&(1<<(i%64)) != 0 }
func (s *sourceSet) clear() {
	s.small = [maxInline / 64]uint64{}
	for i := range s.big {
		s.big[i] = 0
	}
}

// eligibility levels, best first: never tried in this call and not in the
// memo; tried but not in the memo; in a soft memo.
const (
	levelFresh = iota
	levelTried
	levelSoft
	levelNone
)

// choose picks the source for the next attempt, or -1 when none is eligible
// (every source is excluded for this round or in a hard memo).
//
// Among eligible sources it keeps the best level, then the best group
// (region preference, then PRIORITY tier), then applies the selector.
//
// Sources in busy (at their adaptive concurrency limit this round) are not
// candidates, but they are not forgotten either: when a busy source is
// better placed than every candidate (a better level or group), or is healthy
// while every candidate in its group is weak, choose returns -1 so that the
// call waits a moment for a slot instead of spilling onto a source that just
// failed.
func (g *Governor) choose(now time.Time, tried, excluded, busy *sourceSet) int {
	n := len(g.sources)
	busyLevel, busyGroup := levelNone, math.MaxInt
	busyHealthy := false
	healthGated := g.settings.Selector != core.SelectorRoundRobin && g.settings.Selector != core.SelectorLeastInflight
	var buf [maxInline]*sourceState
	var idx [maxInline]int
	cands, idxs := buf[:0], idx[:0]
	if n > maxInline {
		cands, idxs = make([]*sourceState, 0, n), make([]int, 0, n)
	}
	bestLevel, bestGroup := levelNone, math.MaxInt
	for i, s := range g.sources {
		if busy.has(i, n) {
			level := levelFresh
			if tried.has(i, n) {
				level = levelTried
			}
			group := g.group(s)
			if level < busyLevel || (level == busyLevel && group < busyGroup) {
				busyLevel, busyGroup, busyHealthy = level, group, false
			}
			if level == busyLevel && group == busyGroup && healthGated && s.health(now) >= healthyScore {
				busyHealthy = true
			}
			continue
		}
		if excluded.has(i, n) {
			continue
		}
		level := levelFresh
		if kind, _ := s.memo(now); kind != memoNone {
			if kind.hard() {
				continue
			}
			level = levelSoft
		} else if tried.has(i, n) {
			level = levelTried
		}
		group := g.group(s)
		if level > bestLevel || (level == bestLevel && group > bestGroup) {
			continue
		}
		if level < bestLevel || group < bestGroup {
			bestLevel, bestGroup = level, group
			cands, idxs = cands[:0], idxs[:0]
		}
		idxs = append(idxs, i)
		cands = append(cands, s)
	}
	if len(cands) == 0 {
		return -1
	}
	if busyLevel != levelNone {
		if busyLevel < bestLevel || (busyLevel == bestLevel && busyGroup < bestGroup) {
			return -1
		}
		if busyHealthy && busyLevel == bestLevel && busyGroup == bestGroup && allWeak(now, cands) {
			return -1
		}
	}
	return idxs[g.selectAmong(now, cands)]
}

// group orders sources: same region first when a region is preferred, then
// by PRIORITY (lower first).
func (g *Governor) group(s *sourceState) int {
	grp := s.cfg.Priority
	if g.settings.PreferredRegion != "" && s.cfg.Region != g.settings.PreferredRegion {
		grp += 1 << 30
	}
	return grp
}

// selectAmong applies the scope's selector to a non-empty candidate group.
func (g *Governor) selectAmong(now time.Time, cands []*sourceState) int {
	if len(cands) == 1 {
		return 0
	}
	switch g.settings.Selector {
	case core.SelectorRoundRobin:
		return g.smoothWeightedRR(cands)
	case core.SelectorLeastInflight:
		return leastInflight(cands)
	}
	// health_aware and cost_aware are health-gated: weak sources only when
	// no healthy source is in the group.
	var hbuf [maxInline]float64
	var health []float64
	if len(cands) <= maxInline {
		health = hbuf[:len(cands)]
	} else {
		health = make([]float64, len(cands))
	}
	healthy := 0
	for i, s := range cands {
		health[i] = s.health(now)
		if health[i] >= healthyScore {
			healthy++
		}
	}
	if g.settings.Selector == core.SelectorCostAware {
		if i := cheapest(cands, health, healthy > 0); i >= 0 {
			return i
		}
	}
	return p2c(cands, health, healthy > 0)
}

// p2c is weighted power-of-two-choices: draw two distinct candidates with
// probability proportional to WEIGHT, keep the one with the better
// health/(1+in-flight). With onlyHealthy, weak candidates are not drawn.
func p2c(cands []*sourceState, health []float64, onlyHealthy bool) int {
	ok := func(i int) bool { return !onlyHealthy || health[i] >= healthyScore }
	a := weightedDraw(cands, ok, -1)
	b := weightedDraw(cands, ok, a)
	if b < 0 {
		return a
	}
	sa := health[a] / float64(1+cands[a].inflight.Load())
	sb := health[b] / float64(1+cands[b].inflight.Load())
	// Scores within p2cTie of each other are a tie: the weighted first draw
	// stands, so a source that recovered to nearly full health is not
	// starved by one at exactly 1.
	if sb > sa*(1+p2cTie) {
		return b
	}
	return a
}

// weightedDraw draws one candidate accepted by ok, other than skip, with
// probability proportional to its WEIGHT; -1 when there is none.
func weightedDraw(cands []*sourceState, ok func(int) bool, skip int) int {
	total := 0.0
	for i, s := range cands {
		if i != skip && ok(i) {
			total += s.cfg.Weight
		}
	}
	if total <= 0 {
		return -1
	}
	r := rand.Float64() * total
	last := -1
	for i, s := range cands {
		if i == skip || !ok(i) {
			continue
		}
		last = i
		r -= s.cfg.Weight
		if r < 0 {
			return i
		}
	}
	return last
}

// cheapest returns the priced candidate with the lowest price (health-gated),
// -1 when no candidate is priced. Ties go to the healthier one.
func cheapest(cands []*sourceState, health []float64, onlyHealthy bool) int {
	best := -1
	for i, s := range cands {
		if math.IsNaN(s.price) || (onlyHealthy && health[i] < healthyScore) {
			continue
		}
		if best < 0 || s.price < cands[best].price || (s.price == cands[best].price && health[i] > health[best]) {
			best = i
		}
	}
	return best
}

// leastInflight returns the candidate with the fewest in-flight attempts per
// unit of WEIGHT; ties are broken at random.
func leastInflight(cands []*sourceState) int {
	best, ties := -1, 0
	bestLoad := math.Inf(1)
	for i, s := range cands {
		load := float64(s.inflight.Load()) / s.cfg.Weight
		switch {
		case load < bestLoad:
			best, bestLoad, ties = i, load, 1
		case load == bestLoad:
			ties++
			if rand.IntN(ties) == 0 {
				best = i
			}
		}
	}
	return best
}

// smoothWeightedRR is smooth weighted round robin: over any run of picks each
// candidate gets a share proportional to its WEIGHT, evenly interleaved.
func (g *Governor) smoothWeightedRR(cands []*sourceState) int {
	g.rrMu.Lock()
	defer g.rrMu.Unlock()
	total, best := 0.0, 0
	for i, s := range cands {
		s.swrrWeight += s.cfg.Weight
		total += s.cfg.Weight
		if s.swrrWeight > cands[best].swrrWeight {
			best = i
		}
	}
	cands[best].swrrWeight -= total
	return best
}

// allWeak reports whether every candidate is below the healthy score.
func allWeak(now time.Time, cands []*sourceState) bool {
	for _, s := range cands {
		if s.health(now) >= healthyScore {
			return false
		}
	}
	return true
}
