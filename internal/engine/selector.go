package engine

import (
	"fmt"

	"github.com/polygateway/polygateway/core"
)

// healthGated reports whether the built-in selector named name chooses a
// weak candidate only when no healthy one is among the candidates
// (health_aware, cost_aware); the engine then also waits for a busy
// healthy source rather than spill onto weak ones. A selector the caller
// gives is not.
func healthGated(name core.SelectorName) bool {
	switch name {
	case "", core.SelectorHealthAware, core.SelectorCostAware:
		return true
	}
	return false
}

// Builtin returns a fresh instance of the built-in selector named name: the
// one place configuration names map to selectors. "" is health_aware.
func Builtin(name core.SelectorName) (core.Selector, error) {
	switch name {
	case "", core.SelectorHealthAware:
		return HealthAware(), nil
	case core.SelectorRoundRobin:
		return RoundRobin(), nil
	case core.SelectorLeastInflight:
		return LeastInflight(), nil
	case core.SelectorCostAware:
		return CostAware(), nil
	}
	return nil, fmt.Errorf("polygateway: engine: unknown selector %q", name)
}
