package engine

import (
	"context"
	"math"

	"github.com/polygateway/polygateway/core"
)

// CostAware returns the cost_aware selector: the cheapest priced healthy
// candidate (ties to the healthier), health_aware when none is priced.
func CostAware() core.Selector { return costAware{} }

type costAware struct{}

var _ core.Selector = costAware{}

// Select implements core.Selector.
func (costAware) Select(_ context.Context, cands []core.Candidate) (int, error) {
	healthy := anyHealthy(cands)
	if i := cheapest(cands, healthy); i >= 0 {
		return i, nil
	}
	return p2c(cands, healthy), nil
}

// cheapest returns the priced candidate with the lowest price (only healthy
// ones with onlyHealthy), -1 when no candidate is priced.
func cheapest(cands []core.Candidate, onlyHealthy bool) int {
	best := -1
	for i, c := range cands {
		if math.IsNaN(c.Price) || (onlyHealthy && c.Health < healthyScore) {
			continue
		}
		if best < 0 || c.Price < cands[best].Price || (c.Price == cands[best].Price && c.Health > cands[best].Health) {
			best = i
		}
	}
	return best
}
