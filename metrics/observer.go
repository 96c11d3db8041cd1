package metrics

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// Attempt records a finished upstream attempt (core.Observer):
// attempts_total by outcome, attempt_duration_seconds, and, for streamed
// attempts, attempt_ttft_seconds and attempt_max_inter_token_seconds.
func (c *Collector) Attempt(ev core.AttemptEvent) {
	sm := c.source(ev.Scope, ev.Source)
	counted := false
	for i, o := range attemptOutcomes {
		if o == ev.Outcome {
			sm.attempts[i].Inc()
			counted = true
			break
		}
	}
	if !counted {
		c.attempts.WithLabelValues(cleanLabel(ev.Scope), cleanLabel(ev.Source), otherLabel).Inc()
	}
	if ev.Latency >= 0 {
		sm.dur.Observe(ev.Latency.Seconds())
	}
	if ev.TTFT > 0 {
		sm.ttft.Observe(ev.TTFT.Seconds())
	}
	if ev.MaxInterToken > 0 {
		sm.itl.Observe(ev.MaxInterToken.Seconds())
	}
	if ev.UsageBounded {
		sm.bounded.Inc()
	}
}

// AttemptStarted is part of core.Observer; the collector counts
// attempts when they finish.
func (c *Collector) AttemptStarted(core.AttemptEvent) {}

// Refused records a source refused before an attempt (core.Observer):
// refusals_total by reason.
func (c *Collector) Refused(scope, source string, reason core.Reason) {
	sm := c.source(scope, source)
	for i, r := range refusalReasons {
		if r == reason {
			sm.refusals[i].Inc()
			return
		}
	}
	label := otherLabel
	if knownReasons[reason] {
		label = string(reason)
	}
	c.refusals.WithLabelValues(cleanLabel(scope), cleanLabel(source), label).Inc()
}

// Waited records time a call spent waiting for quota or pushback
// (core.Observer): limiter_wait_seconds.
func (c *Collector) Waited(scope string, d time.Duration) {
	if d < 0 {
		return
	}
	c.scope(scope).wait.Observe(d.Seconds())
}

// BreakerState records a breaker transition the engine observed
// (core.Observer): breaker_transitions_total by the state entered.
func (c *Collector) BreakerState(scope, source string, state core.BreakerState) {
	sm := c.source(scope, source)
	sm.transitions[int(stateGauge(state))].Inc()
}
