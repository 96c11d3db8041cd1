package engine

import (
	"context"
	"math"
	"math/rand/v2"

	"github.com/polygateway/polygateway/core"
)

// LeastInflight returns the least_inflight selector: the candidate with the
// fewest in-flight attempts per unit of WEIGHT, ties broken at random.
func LeastInflight() core.Selector { return leastInflight{} }

type leastInflight struct{}

var _ core.Selector = leastInflight{}

// Select implements core.Selector.
func (leastInflight) Select(_ context.Context, cands []core.Candidate) (int, error) {
	best, ties := -1, 0
	bestLoad := math.Inf(1)
	for i, c := range cands {
		load := float64(c.InFlight) / c.Weight
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
	return best, nil
}
