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
	// BreakerState is the state of a circuit (SourceStatus.Breaker,
	// LLMResponse.Breaker).
	BreakerState = core.BreakerState
	// Degradation names the strategy that served a degraded answer
	// (LLMResponse.DegradedBy).
	Degradation = core.Degradation
	// Priority is a call's priority class (WithPriority).
	Priority = core.Priority
	// QueueDepth counts waiting calls by class, indexed by Priority.
	QueueDepth = core.QueueDepth
	// Place is a call's class and tenant in the admission queue
	// (WithPriority, WithTenant).
	Place = core.Place
)

// The priority classes (WithPriority), their number, and the longest
// tenant name (WithTenant), in bytes.
const (
	PriorityInteractive = core.PriorityInteractive
	PriorityNormal      = core.PriorityNormal
	PriorityBatch       = core.PriorityBatch
	NumPriorities       = core.NumPriorities
	MaxTenant           = core.MaxTenant
)

// Error classification: the class, source and reason of an error of this
// library.
type (
	// Class is the class of an error (Classified.Class).
	Class = core.Class
	// Classified is what Classify finds in an error.
	Classified = core.Classified
)

// Error classes (Classified.Class).
const (
	ClassOther       = core.ClassOther
	ClassTransient   = core.ClassTransient
	ClassSourceDead  = core.ClassSourceDead
	ClassRejected    = core.ClassRejected
	ClassInvalid     = core.ClassInvalid
	ClassUnavailable = core.ClassUnavailable
	ClassBackend     = core.ClassBackend
	ClassCanceled    = core.ClassCanceled
)

// Classify finds the class, source and reason of an error of this library.
func Classify(err error) Classified { return core.Classify(err) }

// Degradation strategies (LLMResponse.DegradedBy).
const (
	DegradedNone       = core.DegradedNone
	DegradedStaleCache = core.DegradedStaleCache
	DegradedFallback   = core.DegradedFallback
)

// Breaker states.
const (
	StateClosed   = core.StateClosed
	StateOpen     = core.StateOpen
	StateHalfOpen = core.StateHalfOpen
)
