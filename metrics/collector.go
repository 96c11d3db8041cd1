package metrics

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/polygateway/polygateway/core"
)

// DefaultNamespace prefixes every metric name unless WithNamespace says
// otherwise.
const DefaultNamespace = "polygateway"

// DefaultBuckets are the upper bounds, in seconds, of every duration
// histogram unless WithBuckets says otherwise. They span a fast first token
// (25 ms) to a long reasoning answer (160 s).
var DefaultBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160}

// DefaultScrapeTimeout bounds how long one scrape may spend reading the
// watched clients' sources (breaker and limiter backends).
const DefaultScrapeTimeout = 5 * time.Second

// maxUsageSeries caps the number of distinct (scope, source, model) label
// sets of the token and cost counters. The model label comes from the
// upstream's answer; should an upstream report ever-changing model names,
// further ones are counted under model="other" instead of growing the
// series without bound.
const maxUsageSeries = 1000

// otherLabel is the label value of anything outside a bounded vocabulary.
const otherLabel = "other"

// unknownLabel replaces an empty scope, source or model.
const unknownLabel = "unknown"

// Option configures New.
type Option func(*config)

type config struct {
	namespace     string
	buckets       []float64
	scrapeTimeout time.Duration
	runtime       bool
}

// WithNamespace sets the prefix of every metric name (default
// DefaultNamespace, "polygateway"). It must match [a-zA-Z_][a-zA-Z0-9_]*;
// the empty string means no prefix.
func WithNamespace(ns string) Option { return func(c *config) { c.namespace = ns } }

// WithBuckets sets the upper bounds, in seconds, of every duration
// histogram (call and attempt latency, time to first token, largest
// inter-token gap, limiter waits). They must be strictly increasing;
// default DefaultBuckets.
func WithBuckets(upperBounds ...float64) Option {
	return func(c *config) { c.buckets = slices.Clone(upperBounds) }
}

// WithScrapeTimeout bounds how long one scrape may spend reading the
// sources of the clients given to WatchClient (default
// DefaultScrapeTimeout). With Redis backends every source costs a round
// trip per scrape.
func WithScrapeTimeout(d time.Duration) Option { return func(c *config) { c.scrapeTimeout = d } }

// WithRuntimeMetrics also registers the Go runtime and process collectors
// (go_*, process_*) with the registerer, as a standalone /metrics endpoint
// usually wants. A registerer that already has them is left as is.
func WithRuntimeMetrics() Option { return func(c *config) { c.runtime = true } }

// Collector records a gateway's calls, attempts and source states as
// Prometheus metrics.
//
// It is three things at once: a core.Observer for the engine's
// events (give it to polygateway.WithObserver), a call-level layer (give
// Middleware() to polygateway.WithMiddleware), and, through WatchClient, a
// scrape-time reader of the clients' breaker, health and limiter state. One
// Collector may serve any number of clients and scopes; its methods are safe
// for concurrent use. The metric names and labels are listed in the package
// documentation.
type Collector struct {
	own      *prometheus.Registry
	gatherer prometheus.Gatherer

	// Call level (Middleware).
	calls       *prometheus.CounterVec
	callDur     *prometheus.HistogramVec
	callTTFT    *prometheus.HistogramVec
	callITL     *prometheus.HistogramVec
	promptTok   *prometheus.CounterVec
	complTok    *prometheus.CounterVec
	cost        *prometheus.CounterVec
	cacheHits   *prometheus.CounterVec
	cacheMisses *prometheus.CounterVec
	inFlight    *prometheus.GaugeVec
	degraded    *prometheus.CounterVec

	// Attempt level (Observer).
	attempts    *prometheus.CounterVec
	attemptDur  *prometheus.HistogramVec
	attemptTTFT *prometheus.HistogramVec
	attemptITL  *prometheus.HistogramVec
	refusals    *prometheus.CounterVec
	waits       *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	bounded     *prometheus.CounterVec

	// Admission queue (core.Observer).
	queueWaits *prometheus.HistogramVec
	admissions *prometheus.CounterVec

	// Scrape time (WatchClient).
	watch *watcher

	scopes  cowMap[string, *scopeMetrics]
	sources cowMap[sourceKey, *sourceMetrics]
	usage   cowMap[usageKey, *usageMetrics]
	queues  cowMap[string, *queueMetrics]
	admits  cowMap[admitKey, prometheus.Counter]
	tenants tenantSet
}

var _ core.Observer = (*Collector)(nil)

// New builds a Collector and registers its metrics with reg. A nil reg
// means a fresh registry of the Collector's own, returned by Registry.
// Registering twice with the same namespace on one registry fails with the
// registry's error (prometheus.AlreadyRegisteredError).
func New(reg prometheus.Registerer, opts ...Option) (*Collector, error) {
	cfg := config{namespace: DefaultNamespace, buckets: DefaultBuckets, scrapeTimeout: DefaultScrapeTimeout}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := validNamespace(cfg.namespace); err != nil {
		return nil, err
	}
	if err := validBuckets(cfg.buckets); err != nil {
		return nil, err
	}
	if cfg.scrapeTimeout <= 0 {
		return nil, fmt.Errorf("metrics: scrape timeout must be positive, got %s", cfg.scrapeTimeout)
	}
	cfg.buckets = slices.Clone(cfg.buckets)

	c := &Collector{}
	ns, b := cfg.namespace, cfg.buckets
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels ...string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: name, Help: help, Buckets: b}, labels)
	}

	c.calls = counter("calls_total", "Governed calls by scope and outcome class (success or the error class).", lScope, lOutcome)
	c.callDur = histogram("call_duration_seconds", "Wall time of governed calls, cache hits included, by scope and outcome class.", lScope, lOutcome)
	c.callTTFT = histogram("call_ttft_seconds", "Time to first token of streamed answers, per call.", lScope)
	c.callITL = histogram("call_max_inter_token_seconds", "Largest gap between two tokens of streamed answers, per call.", lScope)
	c.promptTok = counter("prompt_tokens_total", "Prompt tokens billed, by scope, answering source and model.", lScope, lSource, lModel)
	c.complTok = counter("completion_tokens_total", "Completion tokens billed, by scope, answering source and model.", lScope, lSource, lModel)
	c.cost = counter("cost_total", "Cost of calls priced by the pricing table, in its currency unit.", lScope, lSource, lModel)
	c.cacheHits = counter("cache_hits_total", "Calls answered from the response cache.", lScope)
	c.cacheMisses = counter("cache_misses_total", "Calls not answered from the response cache (every call when no cache is configured).", lScope)
	c.inFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "calls_in_flight", Help: "Governed calls in progress."}, []string{lScope})
	c.degraded = counter("degraded_responses_total", "Answers not served by a governed call to a source (stale cache entry or caller fallback).", lScope)

	c.attempts = counter("attempts_total", "Upstream attempts by scope, source and outcome.", lScope, lSource, lOutcome)
	c.attemptDur = histogram("attempt_duration_seconds", "Wall time of upstream attempts.", lScope, lSource)
	c.attemptTTFT = histogram("attempt_ttft_seconds", "Time to first token of streamed attempts.", lScope, lSource)
	c.attemptITL = histogram("attempt_max_inter_token_seconds", "Largest gap between two tokens of streamed attempts.", lScope, lSource)
	c.refusals = counter("refusals_total", "Sources refused before an attempt, by reason (circuit_open: breaker; rate_limited: limiter, pushback or adaptive limit; disabled: switched off; budget_exhausted: spend budget).", lScope, lSource, lReason)
	c.waits = histogram("limiter_wait_seconds", "Time calls spent waiting for quota or 429 pushback with no source eligible.", lScope)
	c.transitions = counter("breaker_transitions_total", "Breaker state changes seen by the engine, by the state entered.", lScope, lSource, lState)
	c.bounded = counter("usage_bounded_total", "Answers that claimed more usage than their request could use, settled at the bound (an upstream anomaly).", lScope, lSource)
	c.queueWaits = histogram("queue_wait_seconds", "Time calls waited in the admission queue for full gates, per stay, by scope and priority class.", lScope, lClass)
	c.admissions = counter("queue_admissions_total", "Attempts admitted through the gates, by scope, priority class and tenant (at most 100 tenants by name; the rest as \"other\").", lScope, lClass, lTenant)

	c.watch = newWatcher(ns, cfg.scrapeTimeout)

	cs := []prometheus.Collector{
		c.calls, c.callDur, c.callTTFT, c.callITL, c.promptTok, c.complTok, c.cost,
		c.cacheHits, c.cacheMisses, c.inFlight, c.degraded,
		c.attempts, c.attemptDur, c.attemptTTFT, c.attemptITL, c.refusals, c.waits, c.transitions, c.bounded,
		c.queueWaits, c.admissions, c.watch,
	}

	if reg == nil {
		c.own = prometheus.NewRegistry()
		reg = c.own
	}
	regs := []prometheus.Registerer{reg}
	if g, ok := reg.(prometheus.Gatherer); ok {
		c.gatherer = g
	} else {
		// Handler needs something to gather: keep a private registry too.
		priv := prometheus.NewRegistry()
		regs = append(regs, priv)
		c.gatherer = priv
	}
	// The private registry, when there is one, is fresh: only reg can refuse.
	for _, r := range regs {
		if err := registerAll(r, cs, cfg.runtime); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// registerAll registers every collector with r, or none of them, and with
// runtime the Go runtime and process collectors (kept when r has them).
func registerAll(r prometheus.Registerer, cs []prometheus.Collector, runtime bool) error {
	for i, col := range cs {
		if err := r.Register(col); err != nil {
			for _, prev := range cs[:i] {
				r.Unregister(prev)
			}
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	if !runtime {
		return nil
	}
	for _, col := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := r.Register(col); err != nil && !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
			return fmt.Errorf("metrics: register: %w", err)
		}
	}
	return nil
}

// Registry returns the registry New created when it was given a nil
// Registerer, or nil when the caller supplied one.
func (c *Collector) Registry() *prometheus.Registry { return c.own }

// Handler serves the metrics in the Prometheus exposition formats
// (promhttp): the Collector's own registry, or the supplied registerer when
// it can also gather (as *prometheus.Registry and the default registerer
// can), so the page then shows everything registered there.
func (c *Collector) Handler() http.Handler {
	return promhttp.HandlerFor(c.gatherer, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

func validNamespace(ns string) error {
	for i, r := range ns {
		ok := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return fmt.Errorf("metrics: invalid namespace %q: want [a-zA-Z_][a-zA-Z0-9_]*", ns)
		}
	}
	return nil
}

func validBuckets(b []float64) error {
	if len(b) == 0 {
		return errors.New("metrics: no histogram buckets")
	}
	for i := range b {
		if b[i] != b[i] || (i > 0 && b[i] <= b[i-1]) {
			return fmt.Errorf("metrics: histogram buckets must be strictly increasing: %v", b)
		}
	}
	return nil
}

// cleanLabel returns v as a valid, non-empty label value.
func cleanLabel(v string) string {
	if v == "" {
		return unknownLabel
	}
	return strings.ToValidUTF8(v, "\uFFFD")
}
