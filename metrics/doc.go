// Package metrics exports a gateway's calls, attempts and source states as
// Prometheus metrics (github.com/prometheus/client_golang). It is opt-in:
// programs that do not import it do not link the Prometheus client.
//
// One Collector plays three roles; wire all three:
//
//	col, err := metrics.New(nil) // nil: a fresh registry, see Registry
//	if err != nil { … }
//	gc, err := polygateway.FromEnv("LLM",
//		polygateway.WithObserver(col),                  // attempts, refusals, waits, breaker transitions
//		polygateway.WithMiddleware(col.Middleware()),   // calls, latency, tokens, cost, cache, in-flight
//	)
//	if err != nil { … }
//	col.WatchClient(gc)                                 // breaker state, health, limits at scrape time
//	http.Handle("/metrics", col.Handler())
//
// The observer sees every upstream attempt (a failover is two attempts and
// one call); the middleware sees every call, including those the cache
// answers without any attempt.
//
// # Metrics
//
// Names are shown with the default namespace "polygateway" (WithNamespace
// changes the prefix). Every *_seconds histogram uses the same buckets
// (DefaultBuckets, or WithBuckets).
//
//	name                                          type       labels
//	--------------------------------------------  ---------  ---------------------------
//	polygateway_calls_total                       counter    scope, outcome
//	polygateway_call_duration_seconds             histogram  scope, outcome
//	polygateway_call_ttft_seconds                 histogram  scope
//	polygateway_call_max_inter_token_seconds      histogram  scope
//	polygateway_prompt_tokens_total               counter    scope, source, model
//	polygateway_completion_tokens_total           counter    scope, source, model
//	polygateway_cost_total                        counter    scope, source, model
//	polygateway_cache_hits_total                  counter    scope
//	polygateway_cache_misses_total                counter    scope
//	polygateway_calls_in_flight                   gauge      scope
//	polygateway_degraded_responses_total          counter    scope
//	polygateway_attempts_total                    counter    scope, source, outcome
//	polygateway_attempt_duration_seconds          histogram  scope, source
//	polygateway_attempt_ttft_seconds              histogram  scope, source
//	polygateway_attempt_max_inter_token_seconds   histogram  scope, source
//	polygateway_refusals_total                    counter    scope, source, reason
//	polygateway_limiter_wait_seconds              histogram  scope
//	polygateway_breaker_transitions_total         counter    scope, source, state
//	polygateway_usage_bounded_total               counter    scope, source
//	polygateway_queue_wait_seconds                histogram  scope, class
//	polygateway_queue_admissions_total            counter    scope, class, tenant
//	polygateway_breaker_state                     gauge      scope, source
//	polygateway_breaker_opens                     gauge      scope, source
//	polygateway_source_in_flight                  gauge      scope, source
//	polygateway_source_health                     gauge      scope, source
//	polygateway_source_adaptive_limit             gauge      scope, source
//	polygateway_limiter_in_flight                 gauge      scope, source
//	polygateway_limiter_requests                  gauge      scope, source
//	polygateway_limiter_tokens                    gauge      scope, source
//	polygateway_limiter_max_concurrency           gauge      scope, source
//	polygateway_limiter_rpm_limit                 gauge      scope, source
//	polygateway_limiter_tpm_limit                 gauge      scope, source
//	polygateway_source_status_up                  gauge      scope, source
//	polygateway_source_disabled                   gauge      scope, source
//	polygateway_budget_limit_usd                  gauge      scope, budget
//	polygateway_budget_spent_usd                  gauge      scope, budget
//	polygateway_budget_window_end_seconds         gauge      scope, budget
//	polygateway_queue_depth                       gauge      scope, class
//
// The first eleven come from Middleware, the next ten from the Observer
// methods, the rest are read from the watched clients (WatchClient) and
// budget readers (WatchBudgets) at scrape time. The gateway's own HTTP
// metrics (requests, refusals before governance, reloads, build info) are
// a Gateway's (NewGateway), registered beside a Collector.
//
// What they mean:
//
//   - calls_total, call_duration_seconds: one per governed call, cache hits
//     included. outcome is success or the class of the error returned:
//     transient (TransientError), source_dead (SourceDeadError), rejected
//     (RequestRejectedError), invalid (ResultInvalidError), unavailable
//     (GatewayUnavailableError), backend (GovernanceBackendError), cancelled
//     (CanceledError or the caller's context error), other (an error of
//     another type, e.g. from a caller's middleware).
//   - call_ttft_seconds, call_max_inter_token_seconds: from the answer's TTFT
//     and MaxInterToken, when streamed (not for cache hits).
//   - prompt_tokens_total, completion_tokens_total, cost_total: usage of the
//     answering source, model as the answer reports it; cost only for priced
//     models (WithPricing or PGW_PRICING_PATH), in the pricing table's
//     currency. A ResultInvalid answer was billed and is counted; cache hits
//     cost nothing and are not. Past 1000 distinct (scope, source, model)
//     sets, new models are counted as model="other".
//   - cache_hits_total, cache_misses_total: calls answered from the response
//     cache, and all others (so with no cache configured, misses = calls).
//   - calls_in_flight: calls inside the middleware now.
//   - degraded_responses_total: answers with LLMResponse.Degraded set (a
//     stale cache entry or the caller's fallback served them).
//   - attempts_total: one per upstream attempt; outcome is success,
//     transient, timeout (timed out or stalled stream), rate_limited (429),
//     source_dead, rejected, invalid, cancelled.
//   - attempt_duration_seconds, attempt_ttft_seconds,
//     attempt_max_inter_token_seconds: per attempt and source.
//   - refusals_total: a source skipped before an attempt, reason circuit_open
//     (its breaker), rate_limited (its limiter gates, a 429's pushback or
//     its adaptive limit), disabled (switched off by an operator) or
//     budget_exhausted (a spend budget had no room).
//   - limiter_wait_seconds: each wait of a call while no source was eligible
//     (quota full or 429 pushback); its _sum is the total time waited.
//   - queue_wait_seconds: each stay of a call in the admission queue (the
//     gates were full and the limiter queued it), by priority class
//     (interactive, normal, batch); its _sum is the total time queued.
//   - queue_admissions_total: attempts admitted through the gates, by class
//     and tenant (WithTenant; "anonymous" without one). The first 100
//     tenants seen keep their names; later ones count as tenant="other".
//   - queue_depth: the calls of this process waiting in the scope's
//     admission queue now, by class (sum over processes for the fleet).
//   - breaker_transitions_total: state changes the engine saw, state being
//     the state entered (closed, half_open, open).
//   - usage_bounded_total: answers that claimed more usage than their
//     request could use, settled at the bound (an upstream anomaly).
//   - breaker_state: 0 closed, 1 half_open, 2 open. breaker_opens: how many
//     times the circuit opened, as the breaker backend counts it (a reset
//     clears it, hence a gauge).
//   - source_in_flight, source_health (EWMA success score, 0 to 1),
//     source_adaptive_limit (AIMD): this process's view of the source.
//   - limiter_in_flight, limiter_requests, limiter_tokens: the limiter's
//     current concurrency slots, RPM window and TPM window (shared by all
//     processes on a Redis backend); limiter_max_concurrency,
//     limiter_rpm_limit, limiter_tpm_limit: the configured gates, present
//     only when on.
//   - source_status_up: 1 when the scrape could read the source's breaker and
//     limiter, 0 when a backend failed (breaker_* and limiter usage series
//     are then left out rather than reported as zero).
//
// # Labels
//
// Label cardinality is bounded by construction: scope and source come from
// configuration, outcome, reason, state and class from closed
// vocabularies, model from the answers with a cap, tenant from the callers
// with a cap of 100 names. Call ids, sessions, keys and messages never
// become labels. Add instance-wide labels with
// prometheus.WrapRegistererWith around the registerer given to New.
//
// Event series (calls, attempts, refusals, transitions…) of a scope and its
// sources are created at zero by WatchClient, so rate() and absent() work
// before the first event.
//
// Several processes sharing Redis backends each export breaker_state and the
// limiter gauges for the same sources; aggregate them with max or avg, not
// sum.
//
// # Example alert rules
//
//	groups:
//	  - name: polygateway
//	    rules:
//	      - alert: PolyGatewayBreakerOpen
//	        expr: max by (scope, source) (polygateway_breaker_state) == 2
//	        for: 5m
//	        labels: {severity: warning}
//	        annotations:
//	          summary: "{{ $labels.scope }}/{{ $labels.source }}: circuit open for 5 minutes"
//
//	      - alert: PolyGatewayHighDegradedRate
//	        expr: |
//	          sum by (scope) (rate(polygateway_degraded_responses_total[5m]))
//	            / sum by (scope) (rate(polygateway_calls_total[5m])) > 0.1
//	        for: 5m
//	        labels: {severity: warning}
//	        annotations:
//	          summary: "{{ $labels.scope }}: more than 10% of answers are degraded"
//
//	      - alert: PolyGatewayAllSourcesDown
//	        expr: min by (scope) (polygateway_breaker_state) == 2
//	        for: 2m
//	        labels: {severity: critical}
//	        annotations:
//	          summary: "{{ $labels.scope }}: every source's circuit is open"
//
//	      - alert: PolyGatewayUnavailable
//	        expr: |
//	          sum by (scope) (rate(polygateway_calls_total{outcome="unavailable"}[5m]))
//	            / sum by (scope) (rate(polygateway_calls_total[5m])) > 0.05
//	        for: 5m
//	        labels: {severity: critical}
//	        annotations:
//	          summary: "{{ $labels.scope }}: more than 5% of calls find no usable source"
//
// A dashboard's usual queries: success ratio
// sum by (scope) (rate(polygateway_calls_total{outcome="success"}[5m])) /
// sum by (scope) (rate(polygateway_calls_total[5m])); p99 latency
// histogram_quantile(0.99, sum by (scope, le) (rate(polygateway_call_duration_seconds_bucket[5m])));
// failover rate sum by (scope) (rate(polygateway_attempts_total{outcome!="success"}[5m]));
// cache hit ratio rate(polygateway_cache_hits_total[5m]) /
// (rate(polygateway_cache_hits_total[5m]) + rate(polygateway_cache_misses_total[5m]));
// spend per hour sum by (model) (increase(polygateway_cost_total[1h])).
package metrics
