package core

import "context"

// Candidate is one eligible source as a Selector sees it.
type Candidate struct {
	// Name, Provider, Model and Region are the source's.
	Name, Provider, Model, Region string
	// Priority is the source's tier (lower first); Weight its share within
	// the tier.
	Priority int
	Weight   float64
	// Health is the source's EWMA success score in [0, 1] (1 = healthy;
	// below 0.5 is weak).
	Health float64
	// InFlight is this process's attempts in flight on the source.
	InFlight int
	// Price is the blended price per million tokens (input + output); NaN
	// when the model has no price.
	Price float64
	// Tried reports whether this call already attempted the source.
	Tried bool
}

// Selector chooses the source of the next attempt.
//
// Contract: the engine calls Select with two or more candidates, all
// eligible for this attempt and in the same group (the best PRIORITY tier,
// preferred region first): breakers, gates, cooldowns and tiers are the
// engine's business, the choice among equals is the selector's. Select
// returns the index of the chosen candidate; an error, or an index out of
// range, ends the call with a *SelectorError. It is called concurrently
// from many calls and must not block.
type Selector interface {
	Select(ctx context.Context, cands []Candidate) (int, error)
}

// SelectorName names a built-in selector ({SCOPE}__SELECTOR).
type SelectorName string

// Built-in selectors.
const (
	SelectorHealthAware   SelectorName = "health_aware"
	SelectorRoundRobin    SelectorName = "round_robin"
	SelectorLeastInflight SelectorName = "least_inflight"
	SelectorCostAware     SelectorName = "cost_aware"
)
