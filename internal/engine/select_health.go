package engine

import (
	"context"
	"math/rand/v2"

	"github.com/polygateway/polygateway/core"
)

// p2cTie is the relative score difference below which two P2C candidates
// are considered equal.
const p2cTie = 0.05

// HealthAware returns the health_aware selector: weighted
// power-of-two-choices among the healthy candidates (all of them when none
// is healthy), keeping the one with the better health/(1+in-flight).
func HealthAware() core.Selector { return healthAware{} }

type healthAware struct{}

var _ core.Selector = healthAware{}

// Select implements core.Selector.
func (healthAware) Select(_ context.Context, cands []core.Candidate) (int, error) {
	return p2c(cands, anyHealthy(cands)), nil
}

// anyHealthy reports whether a candidate is at or above the healthy score.
func anyHealthy(cands []core.Candidate) bool {
	for _, c := range cands {
		if c.Health >= healthyScore {
			return true
		}
	}
	return false
}

// p2c is weighted power-of-two-choices: draw two distinct candidates with
// probability proportional to WEIGHT, keep the one with the better
// health/(1+in-flight). With onlyHealthy, weak candidates are not drawn.
func p2c(cands []core.Candidate, onlyHealthy bool) int {
	ok := func(i int) bool { return !onlyHealthy || cands[i].Health >= healthyScore }
	a := weightedDraw(cands, ok, -1)
	b := weightedDraw(cands, ok, a)
	if b < 0 {
		return a
	}
	sa := cands[a].Health / float64(1+cands[a].InFlight)
	sb := cands[b].Health / float64(1+cands[b].InFlight)
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
func weightedDraw(cands []core.Candidate, ok func(int) bool, skip int) int {
	total := 0.0
	for i, c := range cands {
		if i != skip && ok(i) {
			total += c.Weight
		}
	}
	if total <= 0 {
		return -1
	}
	r := rand.Float64() * total
	last := -1
	for i, c := range cands {
		if i == skip || !ok(i) {
			continue
		}
		last = i
		r -= c.Weight
		if r < 0 {
			return i
		}
	}
	return last
}
