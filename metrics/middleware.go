package metrics

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// Middleware returns the call-level layer: calls by outcome class, call
// latency, per-call TTFT and largest inter-token gap, tokens and cost,
// cache hits and misses, in-flight calls and degraded answers.
//
// Give it to polygateway.WithMiddleware. Layers given there sit outside the
// built-in onion (cache → telemetry → degradation → engine), so this one sees cache hits
// too; list it first to also time the caller's other layers. A structured
// call's re-asks are separate calls and are counted as such.
func (c *Collector) Middleware() polygateway.Middleware {
	return func(next polygateway.Handler) polygateway.Handler {
		return func(ctx context.Context, call *polygateway.Call) (*polygateway.LLMResponse, error) {
			var scope string
			if call != nil {
				scope = call.Scope
			}
			sm := c.scope(scope)
			sm.inFlight.Inc()
			defer sm.inFlight.Dec()
			start := time.Now()
			resp, err := next(ctx, call)
			c.observeCall(sm, scope, resp, err, time.Since(start))
			return resp, err
		}
	}
}

// observeCall records one finished call.
func (c *Collector) observeCall(sm *scopeMetrics, scope string, resp *polygateway.LLMResponse, err error, took time.Duration) {
	o := callOutcome(err)
	sm.calls[o].Inc()
	sm.dur[o].Observe(took.Seconds())
	if resp == nil {
		sm.misses.Inc()
		return
	}
	if resp.Degraded {
		sm.degraded.Inc()
	}
	if resp.CacheHit {
		// A hit costs nothing and has no stream timing.
		sm.hits.Inc()
		return
	}
	sm.misses.Inc()
	if resp.TTFT > 0 {
		sm.ttft.Observe(resp.TTFT.Seconds())
	}
	if resp.MaxInterToken > 0 {
		sm.itl.Observe(resp.MaxInterToken.Seconds())
	}
	// An answer that comes back with an error (ResultInvalid) was still
	// billed: count its usage.
	priced := resp.Cost != nil && *resp.Cost >= 0 && !math.IsInf(*resp.Cost, 1)
	if resp.PromptTokens <= 0 && resp.CompletionTokens <= 0 && !priced {
		return
	}
	um := c.usageFor(scope, resp.SourceName, resp.Model)
	if resp.PromptTokens > 0 {
		um.prompt.Add(float64(resp.PromptTokens))
	}
	if resp.CompletionTokens > 0 {
		um.completion.Add(float64(resp.CompletionTokens))
	}
	if priced {
		um.cost().Add(*resp.Cost)
	}
}

// callOutcome classifies a call's error into an index of callOutcomes, with
// the same precedence as the telemetry error prefix.
func callOutcome(err error) int {
	if err == nil {
		return coSuccess
	}
	switch core.ErrorClass(err) {
	case "GatewayUnavailableError":
		return coUnavailable
	case "GovernanceBackendError":
		return coBackend
	case "CanceledError":
		return coCancelled
	case "TransientError":
		return coTransient
	case "SourceDeadError":
		return coSourceDead
	case "RequestRejectedError":
		return coRejected
	case "ResultInvalidError":
		return coInvalid
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return coCancelled
	}
	return coOther
}
