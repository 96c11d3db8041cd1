package polygateway

import (
	"context"
	"net/http"

	"github.com/polygateway/polygateway/core"
)

// Limiter is the rate-limit port: six gates ({concurrency, RPM, TPM} ×
// {source, global}), all-or-nothing. See the method contracts in package
// core; backend/memory and backend/redisstore implement it.
type Limiter = core.Limiter

// Breaker is the circuit-breaker port, keyed by (scope, source).
type Breaker = core.Breaker

// Cache is the response-cache port.
type Cache = core.Cache

// TelemetrySink is the telemetry port: one TelemetryRecord per call.
type TelemetrySink = core.TelemetrySink

// TelemetryRecord is one row of the llm_calls table.
type TelemetryRecord = core.TelemetryRecord

// Observer receives the engine's events, for metrics.
type Observer = core.Observer

// AttemptEvent describes one finished upstream attempt.
type AttemptEvent = core.AttemptEvent

// DeltaSink receives a streamed answer as it arrives (see Call.Deltas).
type DeltaSink = core.DeltaSink

// Clock tells the time; backends read time only through it.
type Clock = core.Clock

// Port value types.
type (
	Limits               = core.Limits
	PermitRequest        = core.PermitRequest
	Permit               = core.Permit
	Grant                = core.Grant
	Gate                 = core.Gate
	Settlement           = core.Settlement
	SettleKind           = core.SettleKind
	LimiterUsage         = core.LimiterUsage
	BreakerConfig        = core.BreakerConfig
	BreakerOverride      = core.BreakerOverride
	BreakerState         = core.BreakerState
	BreakerSnapshot      = core.BreakerSnapshot
	Admission            = core.Admission
	Outcome              = core.Outcome
	ProviderProfile      = core.ProviderProfile
	ThinkingSwitch       = core.ThinkingSwitch
	PricingTable         = core.PricingTable
	ModelPrice           = core.ModelPrice
	SourceConfig         = core.SourceConfig
	GatewaySettings      = core.GatewaySettings
	RetrySettings        = core.RetrySettings
	BackpressureSettings = core.BackpressureSettings
	Budget               = core.Budget
	BudgetUsage          = core.BudgetUsage
	// Priority is a call's priority class (WithPriority).
	Priority = core.Priority
	// QueueDepth counts waiting calls by class, indexed by Priority.
	QueueDepth = core.QueueDepth
	// Place is a call's class and tenant in the admission queue
	// (WithPriority, WithTenant).
	Place = core.Place
)

// QueueObserver is an Observer that also receives the admission queue's
// events: admissions by class and tenant, and time waited in the queue.
type QueueObserver = core.QueueObserver

// NumPriorities is the number of priority classes.
const NumPriorities = core.NumPriorities

// The priority classes (WithPriority).
const (
	PriorityInteractive = core.PriorityInteractive
	PriorityNormal      = core.PriorityNormal
	PriorityBatch       = core.PriorityBatch
)

// MaxTenant is the longest tenant name (WithTenant), in bytes.
const MaxTenant = core.MaxTenant

// BudgetLimiter is a Limiter that enforces spend budgets (PermitRequest.
// Budgets) in the same atomic step as its gates; a scope with a budget
// needs one.
type BudgetLimiter = core.BudgetLimiter

// ScopedBudgetReader is a BudgetLimiter that counts a budget per scope or
// pool somewhere (a Redis Cluster) and reads it as a given scope counts it.
type ScopedBudgetReader = core.ScopedBudgetReader

// SourceSwitch is a Breaker that can switch a source off at runtime and
// on again; a backend shared across processes shares the switch.
type SourceSwitch = core.SourceSwitch

// Pushback is a Breaker that shares an upstream's pushback (a 429 and how
// long to leave the source alone) with every caller of the backend, and
// every process where the backend is shared (see core.Pushback for the
// contract).
type Pushback = core.Pushback

// PushbackAdmitter is an Admitter whose breaker shares pushback.
type PushbackAdmitter = core.PushbackAdmitter

// Admitter is the admission port: an attempt passes the breaker and the six
// gates in one step (Admit) and reports its settlement and outcome in one
// step (Finish). Redis implements it natively in one round trip each way;
// ComposeAdmitter builds one from a separate Limiter and Breaker.
type Admitter = core.Admitter

// InProcess is an optional method of a backend that lives in the process
// and never waits on I/O (the memory ones): when the Admitter (or both the
// Limiter and the Breaker it is composed of) reports true, the engine
// finishes calls without a deadline timer of its own.
type InProcess = core.InProcess

// AdmitRequest and Ticket are the admission port's values.
type (
	AdmitRequest = core.AdmitRequest
	Ticket       = core.Ticket
	Timer        = core.Timer
)

// ComposeAdmitter returns the Admitter made of a separate Limiter and Breaker.
func ComposeAdmitter(l Limiter, b Breaker) Admitter { return core.ComposeAdmitter(l, b) }

// Settings parts of the degradation chain and the quality guard.
type (
	FallbackSettings = core.FallbackSettings
	QualitySettings  = core.QualitySettings
	Class            = core.Class
	Classified       = core.Classified
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

// CallInfo describes a governed call to a Tracer.
type CallInfo = core.CallInfo

// Tracer puts calls and attempts in spans (see WithTracer; package tracing
// implements it with OpenTelemetry).
//
// Contract: StartCall is called once per governed call before any of its
// layers runs, StartAttempt once per upstream attempt; each returns the
// context the call or attempt runs with (carrying its span) and an end
// function that is called exactly once with the outcome. Inject writes the
// trace context of ctx into the headers of an upstream request (W3C
// traceparent). Methods are called on the call path: they must be cheap
// and safe for concurrent use.
type Tracer interface {
	StartCall(ctx context.Context, call CallInfo) (context.Context, func(resp *LLMResponse, err error))
	StartAttempt(ctx context.Context, ev AttemptEvent) (context.Context, func(ev AttemptEvent, err error))
	Inject(ctx context.Context, h http.Header)
}

// coreTracer puts a public Tracer in core's terms.
type coreTracer struct{ t Tracer }

func (k coreTracer) StartCall(ctx context.Context, call CallInfo) (context.Context, func(*core.LLMResponse, error)) {
	ctx, end := k.t.StartCall(ctx, call)
	return ctx, func(resp *core.LLMResponse, err error) { end(publicResponse(resp), publicError(err)) }
}

func (k coreTracer) StartAttempt(ctx context.Context, ev AttemptEvent) (context.Context, func(AttemptEvent, error)) {
	ctx, end := k.t.StartAttempt(ctx, ev)
	return ctx, func(ev AttemptEvent, err error) { end(ev, publicError(err)) }
}

func (k coreTracer) Inject(ctx context.Context, h http.Header) { k.t.Inject(ctx, h) }

// Selector chooses the source of each attempt among the eligible ones; see
// WithSelector. Candidate is one eligible source as a Selector sees it.
type (
	Selector  = core.Selector
	Candidate = core.Candidate
)

// Typed settings values.
type (
	SelectorName      = core.SelectorName
	QuotaFullPolicy   = core.QuotaFullPolicy
	MissingDonePolicy = core.MissingDonePolicy
	AttemptOutcome    = core.AttemptOutcome
	Degradation       = core.Degradation
	TelemetryContent  = core.TelemetryContent
)

// What a telemetry row keeps of prompts and answers (PGW_TELEMETRY_CONTENT).
const (
	TelemetryContentFull     = core.TelemetryContentFull
	TelemetryContentRedacted = core.TelemetryContentRedacted
	TelemetryContentNone     = core.TelemetryContentNone
)

// Degradation strategies (LLMResponse.DegradedBy).
const (
	DegradedNone       = core.DegradedNone
	DegradedStaleCache = core.DegradedStaleCache
	DegradedFallback   = core.DegradedFallback
)

// Built-in selectors, QUOTA_FULL and MISSING_DONE policies.
const (
	SelectorHealthAware   = core.SelectorHealthAware
	SelectorRoundRobin    = core.SelectorRoundRobin
	SelectorLeastInflight = core.SelectorLeastInflight
	SelectorCostAware     = core.SelectorCostAware
	QuotaFullWait         = core.QuotaFullWait
	QuotaFullFailFast     = core.QuotaFullFailFast
	MissingDoneRetry      = core.MissingDoneRetry
	MissingDoneSalvage    = core.MissingDoneSalvage
)

// Attempt outcomes reported to an Observer.
const (
	AttemptSuccess     = core.AttemptSuccess
	AttemptTransient   = core.AttemptTransient
	AttemptTimeout     = core.AttemptTimeout
	AttemptRateLimited = core.AttemptRateLimited
	AttemptDead        = core.AttemptDead
	AttemptRejected    = core.AttemptRejected
	AttemptInvalid     = core.AttemptInvalid
	AttemptCancelled   = core.AttemptCancelled
)

// Breaker states.
const (
	StateClosed   = core.StateClosed
	StateOpen     = core.StateOpen
	StateHalfOpen = core.StateHalfOpen
)
