package kernel

import (
	"fmt"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
)

// checkBudget refuses a budgeted scope that cannot keep its budget: every
// source's model needs a price (an unpriced call would reserve and spend
// nothing). Every limiter enforces budgets (core.Limiter).
func checkBudget(s core.GatewaySettings, pricing core.PricingTable) error {
	if s.Budget.Limit <= 0 {
		return nil
	}
	key := s.Scope + "__BUDGET__USD"
	for _, src := range s.Sources {
		if _, ok := pricing.Price(src.Model); !ok {
			return &config.Error{Key: key, Problem: fmt.Sprintf("source %s: model %q has no price; a budgeted scope needs a price for every model (PGW_PRICING_PATH)", src.Name, src.Model)}
		}
	}
	return nil
}
