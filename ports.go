package polygateway

import "github.com/polygateway/polygateway/core"

// The settings and the values an application reads or builds; their fields
// are documented in package core. The ports (core.Limiter, core.Breaker,
// core.Cache, core.TelemetrySink, core.Admitter, core.Selector,
// core.Observer, core.Tracer, core.Clock) and the other values of the
// backend interface are core's, and backends register in package backend.
type (
	// GatewaySettings are the parsed settings of one scope (LoadSettings,
	// FromSettings).
	GatewaySettings = core.GatewaySettings
	// SourceConfig is one source of a scope's settings.
	SourceConfig = core.SourceConfig
	// ProviderProfile describes how a provider's endpoint is spoken to
	// (WithProfiles, DefaultProfiles).
	ProviderProfile = core.ProviderProfile
	// PricingTable maps a model to its prices (WithPricing, LoadPricing).
	PricingTable = core.PricingTable
	// ModelPrice is one model's prices in a PricingTable.
	ModelPrice = core.ModelPrice
	// Budget is a spend budget of a call (WithBudget).
	Budget = core.Budget
	// BudgetUsage is the current window of a spend budget (Budgets).
	BudgetUsage = core.BudgetUsage
	// BreakerSnapshot is a source's circuit as Sources reports it.
	BreakerSnapshot = core.BreakerSnapshot
	// Priority is a call's priority class (WithPriority).
	Priority = core.Priority
	// Place is a call's class and tenant in the admission queue
	// (WithPriority, WithTenant).
	Place = core.Place
)

// The priority classes (WithPriority). Their number (core.NumPriorities)
// and the longest tenant name (core.MaxTenant) are core's.
const (
	PriorityInteractive = core.PriorityInteractive
	PriorityNormal      = core.PriorityNormal
	PriorityBatch       = core.PriorityBatch
)

// Classified is what Classify finds in an error: its class (core.Class,
// the core.Class… constants), source and reason.
type Classified = core.Classified

// Classify finds the class, source and reason of an error of this library.
func Classify(err error) Classified { return core.Classify(err) }
