package metrics

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/polygateway/polygateway/core"
)

// Label names. These are the only labels the package uses: every value
// comes from configuration (scope, source) or from a closed vocabulary
// (outcome, reason, state, class), except model, which is capped
// (maxUsageSeries), and tenant, which is capped (maxTenants).
const (
	lScope   = "scope"
	lSource  = "source"
	lBudget  = "budget"
	lModel   = "model"
	lOutcome = "outcome"
	lReason  = "reason"
	lState   = "state"
	lClass   = "class"
	lTenant  = "tenant"
)

// Call outcome classes (label outcome of calls_total and
// call_duration_seconds).
const (
	OutcomeSuccess     = "success"
	OutcomeTransient   = "transient"
	OutcomeSourceDead  = "source_dead"
	OutcomeRejected    = "rejected"
	OutcomeInvalid     = "invalid"
	OutcomeUnavailable = "unavailable"
	OutcomeBackend     = "backend"
	OutcomeCancelled   = "cancelled"
	// OutcomeOther is an error of a type the library does not make (from a
	// caller's middleware, say).
	OutcomeOther = "other"
)

// callOutcomes is the closed vocabulary of call outcomes, by index.
var callOutcomes = [...]string{
	OutcomeSuccess, OutcomeTransient, OutcomeSourceDead, OutcomeRejected,
	OutcomeInvalid, OutcomeUnavailable, OutcomeBackend, OutcomeCancelled, OutcomeOther,
}

const (
	coSuccess = iota
	coTransient
	coSourceDead
	coRejected
	coInvalid
	coUnavailable
	coBackend
	coCancelled
	coOther
	numCallOutcomes
)

// attemptOutcomes is the closed vocabulary of attempt outcomes (the
// core's Attempt* constants), by index; anything else is "other".
var attemptOutcomes = [...]core.AttemptOutcome{
	core.AttemptSuccess, core.AttemptTransient, core.AttemptTimeout, core.AttemptRateLimited,
	core.AttemptDead, core.AttemptRejected, core.AttemptInvalid, core.AttemptCancelled,
}

// refusalReasons are the reasons the engine reports refusals with.
var refusalReasons = [...]core.Reason{core.ReasonCircuitOpen, core.ReasonRateLimited, core.ReasonDisabled, core.ReasonBudgetExhausted}

// knownReasons is the whole Reason vocabulary; any other value is "other".
var knownReasons = map[core.Reason]bool{
	core.ReasonNetworkError: true, core.ReasonTimeout: true,
	core.ReasonRateLimited: true, core.ReasonSourceDead: true,
	core.ReasonCircuitOpen: true, core.ReasonRetryExhausted: true,
	core.ReasonStalled: true, core.ReasonServerError: true,
	core.ReasonContextLength: true, core.ReasonContentFilter: true, core.ReasonLowQuality: true,
	core.ReasonBudgetExhausted: true, core.ReasonDisabled: true, core.ReasonTaskFailed: true,
	core.ReasonQueueDeadline: true,
}

// breakerStates are the state label values, indexed by the gauge value of
// breaker_state: 0 closed, 1 half_open, 2 open.
var breakerStates = [...]core.BreakerState{core.StateClosed, core.StateHalfOpen, core.StateOpen}

// stateGauge returns the breaker_state gauge value of s.
func stateGauge(s core.BreakerState) float64 {
	switch s {
	case core.StateHalfOpen:
		return 1
	case core.StateOpen:
		return 2
	}
	return 0
}

// scopeMetrics holds the children of one scope, created once.
type scopeMetrics struct {
	calls    [numCallOutcomes]prometheus.Counter
	dur      [numCallOutcomes]prometheus.Observer
	ttft     prometheus.Observer
	itl      prometheus.Observer
	hits     prometheus.Counter
	misses   prometheus.Counter
	inFlight prometheus.Gauge
	degraded prometheus.Counter
	wait     prometheus.Observer
}

type sourceKey struct{ scope, source string }

// sourceMetrics holds the children of one (scope, source), created once.
type sourceMetrics struct {
	attempts    [len(attemptOutcomes)]prometheus.Counter
	dur         prometheus.Observer
	ttft        prometheus.Observer
	itl         prometheus.Observer
	refusals    [len(refusalReasons)]prometheus.Counter
	transitions [len(breakerStates)]prometheus.Counter
	bounded     prometheus.Counter
}

type usageKey struct{ scope, source, model string }

// usageMetrics holds the token and cost children of one (scope, source,
// model). The cost child is created on the first priced answer, so that a
// model without a price has no cost series rather than a misleading 0.
type usageMetrics struct {
	prompt, completion prometheus.Counter
	cost               func() prometheus.Counter
}

// scope returns the children of scope, creating them on first use.
func (c *Collector) scope(scope string) *scopeMetrics {
	if m, ok := c.scopes.get(scope); ok {
		return m
	}
	return c.scopes.getOrCreate(scope, func() *scopeMetrics {
		l := cleanLabel(scope)
		m := &scopeMetrics{
			ttft:     c.callTTFT.WithLabelValues(l),
			itl:      c.callITL.WithLabelValues(l),
			hits:     c.cacheHits.WithLabelValues(l),
			misses:   c.cacheMisses.WithLabelValues(l),
			inFlight: c.inFlight.WithLabelValues(l),
			degraded: c.degraded.WithLabelValues(l),
			wait:     c.waits.WithLabelValues(l),
		}
		for i, o := range callOutcomes {
			m.calls[i] = c.calls.WithLabelValues(l, o)
			m.dur[i] = c.callDur.WithLabelValues(l, o)
		}
		return m
	})
}

// source returns the children of (scope, source), creating them on first use.
func (c *Collector) source(scope, source string) *sourceMetrics {
	k := sourceKey{scope, source}
	if m, ok := c.sources.get(k); ok {
		return m
	}
	return c.sources.getOrCreate(k, func() *sourceMetrics {
		ls, lsrc := cleanLabel(scope), cleanLabel(source)
		m := &sourceMetrics{
			dur:     c.attemptDur.WithLabelValues(ls, lsrc),
			ttft:    c.attemptTTFT.WithLabelValues(ls, lsrc),
			itl:     c.attemptITL.WithLabelValues(ls, lsrc),
			bounded: c.bounded.WithLabelValues(ls, lsrc),
		}
		for i, o := range attemptOutcomes {
			m.attempts[i] = c.attempts.WithLabelValues(ls, lsrc, string(o))
		}
		for i, r := range refusalReasons {
			m.refusals[i] = c.refusals.WithLabelValues(ls, lsrc, string(r))
		}
		for i, s := range breakerStates {
			m.transitions[i] = c.transitions.WithLabelValues(ls, lsrc, s.String())
		}
		return m
	})
}

// usageFor returns the token and cost children of (scope, source, model).
func (c *Collector) usageFor(scope, source, model string) *usageMetrics {
	k := usageKey{scope, source, model}
	if m, ok := c.usage.get(k); ok {
		return m
	}
	if c.usage.len() >= maxUsageSeries {
		k.model = otherLabel
		if m, ok := c.usage.get(k); ok {
			return m
		}
	}
	return c.usage.getOrCreate(k, func() *usageMetrics {
		ls, lsrc, lm := cleanLabel(k.scope), cleanLabel(k.source), cleanLabel(k.model)
		return &usageMetrics{
			prompt:     c.promptTok.WithLabelValues(ls, lsrc, lm),
			completion: c.complTok.WithLabelValues(ls, lsrc, lm),
			cost:       sync.OnceValue(func() prometheus.Counter { return c.cost.WithLabelValues(ls, lsrc, lm) }),
		}
	})
}

// cowMap is a copy-on-write map: lock-free reads, rare writes. It holds the
// per-label children so that the call path does no label hashing.
type cowMap[K comparable, V any] struct {
	mu sync.Mutex
	m  atomic.Pointer[map[K]V]
}

func (c *cowMap[K, V]) get(k K) (V, bool) {
	if p := c.m.Load(); p != nil {
		v, ok := (*p)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

func (c *cowMap[K, V]) len() int {
	if p := c.m.Load(); p != nil {
		return len(*p)
	}
	return 0
}

func (c *cowMap[K, V]) getOrCreate(k K, mk func() V) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.m.Load()
	if old != nil {
		if v, ok := (*old)[k]; ok {
			return v
		}
	}
	n := make(map[K]V, c.len()+1)
	if old != nil {
		for k2, v2 := range *old {
			n[k2] = v2
		}
	}
	v := mk()
	n[k] = v
	c.m.Store(&n)
	return v
}
