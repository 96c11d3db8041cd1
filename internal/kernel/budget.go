package kernel

import (
	"fmt"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
)

// checkBudget refuses a budgeted scope that cannot keep its budget: its
// limiter must enforce budgets, and every source's model needs a price
// (an unpriced call would reserve and spend nothing).
func checkBudget(s core.GatewaySettings, limiter core.Limiter, pricing core.PricingTable) error {
	if s.Budget.Limit <= 0 {
		return nil
	}
	key := s.Scope + "__BUDGET__USD"
	if _, ok := limiter.(core.BudgetLimiter); !ok {
		return &config.Error{Key: key, Problem: fmt.Sprintf("the limiter backend (%T) does not enforce spend budgets", limiter)}
	}
	for _, src := range s.Sources {
		if _, ok := pricing.Price(src.Model); !ok {
			return &config.Error{Key: key, Problem: fmt.Sprintf("source %s: model %q has no price; a budgeted scope needs a price for every model (PGW_PRICING_PATH)", src.Name, src.Model)}
		}
	}
	return nil
}
