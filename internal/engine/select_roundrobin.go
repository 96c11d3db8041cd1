package engine

import (
	"context"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// maxRRSources bounds the per-source state a round-robin selector keeps.
const maxRRSources = 4096

// RoundRobin returns a round_robin selector: smooth weighted round robin,
// so that over any run of picks each candidate gets a share proportional to
// its WEIGHT, evenly interleaved. Each instance keeps its own rotation.
func RoundRobin() core.Selector { return &roundRobin{current: map[string]float64{}} }

type roundRobin struct {
	mu      sync.Mutex
	current map[string]float64 // smooth weighted round robin current weights
}

var _ core.Selector = (*roundRobin)(nil)

// Select implements core.Selector.
func (rr *roundRobin) Select(_ context.Context, cands []core.Candidate) (int, error) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if len(rr.current) > maxRRSources {
		clear(rr.current)
	}
	total, best, bestW := 0.0, 0, 0.0
	for i, c := range cands {
		w := rr.current[c.Name] + c.Weight
		rr.current[c.Name] = w
		total += c.Weight
		if i == 0 || w > bestW {
			best, bestW = i, w
		}
	}
	rr.current[cands[best].Name] -= total
	return best, nil
}
