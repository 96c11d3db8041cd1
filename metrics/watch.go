package metrics

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// WatchClient makes every scrape read gc.Sources and export, per source of
// its scope: breaker_state (0 closed, 1 half_open, 2 open), breaker_opens,
// source_in_flight, source_health, source_adaptive_limit, the limiter's
// current use (limiter_in_flight, limiter_requests, limiter_tokens), the
// configured limits, and source_status_up; and per scope and class
// queue_depth, the calls of the client waiting in the admission queue.
//
// Any number of clients may be watched. When two watched clients report the
// same (scope, source) — a configuration reload that keeps the old client
// draining, say — the one watched last wins. A client that has been closed
// is dropped at the next scrape; Unwatch drops one at once. Watching a
// client again, or a nil client, does nothing. WatchClient also creates the
// scope's and sources' event series at zero, so that rate() and absent()
// queries work before the first event.
func (c *Collector) WatchClient(gc *polygateway.GatewayClient) {
	if gc == nil {
		return
	}
	s := gc.Settings()
	c.scope(s.Scope)
	c.queue(s.Scope)
	for _, src := range s.Sources {
		c.source(s.Scope, src.Name)
	}
	c.watch.add(gc, s.Scope)
}

// BudgetReader reads spend budgets at scrape time, for WatchBudgets: a
// gateway's client budgets, a batch job's own. It must honour ctx.
type BudgetReader func(ctx context.Context) ([]polygateway.BudgetUsage, error)

// WatchBudgets reads the budgets read reports at every scrape, as the
// watched clients' scope budgets are read: budget_limit_usd,
// budget_spent_usd and budget_window_end_seconds with the scope label
// "unknown" and the budget's key (a budget key seen twice in one scrape is
// reported once).
func (c *Collector) WatchBudgets(read BudgetReader) {
	if read == nil {
		return
	}
	c.watch.mu.Lock()
	c.watch.budgetReaders = append(c.watch.budgetReaders, read)
	c.watch.mu.Unlock()
}

// Unwatch stops exporting the scrape-time state of gc. Event counters
// already recorded stay.
func (c *Collector) Unwatch(gc *polygateway.GatewayClient) { c.watch.remove(gc) }

type watched struct {
	client *polygateway.GatewayClient
	scope  string
}

// watcher is the prometheus.Collector that reads the watched clients at
// scrape time.
type watcher struct {
	timeout time.Duration

	breakerState, breakerOpens               *prometheus.Desc
	inFlight, health, adaptive               *prometheus.Desc
	limInFlight, limRequests, limTokens      *prometheus.Desc
	limitConcurrency, limitRPM, limitTPM, up *prometheus.Desc
	disabled                                 *prometheus.Desc
	budgetLimit, budgetSpent, budgetEnd      *prometheus.Desc
	queueDepth                               *prometheus.Desc
	mu                                       sync.Mutex
	clients                                  []watched
	budgetReaders                            []BudgetReader
}

func newWatcher(ns string, timeout time.Duration) *watcher {
	labels := []string{lScope, lSource}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
	}
	b := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, []string{lScope, lBudget}, nil)
	}
	return &watcher{
		timeout:          timeout,
		breakerState:     d("breaker_state", "Breaker state of the source: 0 closed, 1 half_open, 2 open."),
		breakerOpens:     d("breaker_opens", "How many times the source's breaker opened, as its backend counts (reset by a breaker reset)."),
		inFlight:         d("source_in_flight", "Attempts in progress on the source in this process."),
		health:           d("source_health", "EWMA success score of the source, 0 to 1 (1 healthy)."),
		adaptive:         d("source_adaptive_limit", "Adaptive (AIMD) concurrency limit of the source."),
		limInFlight:      d("limiter_in_flight", "Concurrency slots held on the source's limiter (all processes sharing the backend)."),
		limRequests:      d("limiter_requests", "Requests counted in the source's current RPM window."),
		limTokens:        d("limiter_tokens", "Tokens counted in the source's current TPM window."),
		limitConcurrency: d("limiter_max_concurrency", "Configured MAX_CONCURRENCY of the source (absent when off)."),
		limitRPM:         d("limiter_rpm_limit", "Configured RPM of the source (absent when off)."),
		limitTPM:         d("limiter_tpm_limit", "Configured TPM of the source (absent when off)."),
		up:               d("source_status_up", "1 when the source's breaker and limiter state could be read at this scrape, else 0 (breaker and limiter series are then omitted)."),
		disabled:         d("source_disabled", "1 while an operator has switched the source off, else 0."),
		budgetLimit:      b("budget_limit_usd", "Spend allowed per window by the budget."),
		budgetSpent:      b("budget_spent_usd", "Spend counted in the budget's current window: settled costs plus the reservations of calls in flight, across every process sharing the backend."),
		budgetEnd:        b("budget_window_end_seconds", "Unix time at which the budget's current window ends."),
		queueDepth: prometheus.NewDesc(prometheus.BuildFQName(ns, "", "queue_depth"),
			"Calls of this process waiting in the scope's admission queue, by priority class.", []string{lScope, lClass}, nil),
	}
}

func (w *watcher) add(gc *polygateway.GatewayClient, scope string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, x := range w.clients {
		if x.client == gc {
			return
		}
	}
	w.clients = append(w.clients, watched{client: gc, scope: scope})
}

func (w *watcher) remove(gc *polygateway.GatewayClient) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clients = slices.DeleteFunc(w.clients, func(x watched) bool { return x.client == gc })
}

// Describe implements prometheus.Collector.
func (w *watcher) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		w.breakerState, w.breakerOpens, w.inFlight, w.health, w.adaptive,
		w.limInFlight, w.limRequests, w.limTokens,
		w.limitConcurrency, w.limitRPM, w.limitTPM, w.up, w.disabled,
		w.budgetLimit, w.budgetSpent, w.budgetEnd, w.queueDepth,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: it reads every watched client's
// sources, newest watch first.
func (w *watcher) Collect(ch chan<- prometheus.Metric) {
	w.mu.Lock()
	clients := slices.Clone(w.clients)
	readers := slices.Clone(w.budgetReaders)
	w.mu.Unlock()
	if len(clients) == 0 && len(readers) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	seenBudget := make(map[string]bool)
	budgets := func(scope string, us []polygateway.BudgetUsage) {
		for _, u := range us {
			if seenBudget[u.Key] || len(seenBudget) >= maxUsageSeries {
				continue
			}
			seenBudget[u.Key] = true
			ls, lb := cleanLabel(scope), cleanLabel(u.Key)
			ch <- prometheus.MustNewConstMetric(w.budgetLimit, prometheus.GaugeValue, float64(u.Limit)/1e6, ls, lb)
			ch <- prometheus.MustNewConstMetric(w.budgetSpent, prometheus.GaugeValue, float64(u.Spent)/1e6, ls, lb)
			ch <- prometheus.MustNewConstMetric(w.budgetEnd, prometheus.GaugeValue, float64(u.WindowEnd.Unix()), ls, lb)
		}
	}
	for _, read := range readers {
		if us, err := read(ctx); err == nil {
			budgets("", us)
		}
	}
	seen := make(map[sourceKey]bool)
	seenScope := make(map[string]bool)
	for i := len(clients) - 1; i >= 0; i-- {
		x := clients[i]
		if closed(ctx, x.client) {
			w.remove(x.client)
			continue
		}
		ls := cleanLabel(x.scope)
		if us, err := x.client.Budgets(ctx); err == nil {
			budgets(x.scope, us)
		}
		for i, st := range x.client.Sources(ctx) {
			if i == 0 && !seenScope[x.scope] {
				// The queue is the scope's: every source reports it.
				seenScope[x.scope] = true
				w.emitQueue(ch, ls, st.Queued)
			}
			k := sourceKey{x.scope, st.Name}
			if seen[k] {
				continue
			}
			seen[k] = true
			w.emit(ch, ls, cleanLabel(st.Name), &st)
		}
	}
}

func (w *watcher) emit(ch chan<- prometheus.Metric, scope, source string, st *polygateway.SourceStatus) {
	g := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, scope, source)
	}
	g(w.inFlight, float64(st.InFlight))
	g(w.health, st.Health)
	g(w.adaptive, st.AdaptiveLimit)
	if st.Limits.MaxConcurrency > 0 {
		g(w.limitConcurrency, float64(st.Limits.MaxConcurrency))
	}
	if st.Limits.RPM > 0 {
		g(w.limitRPM, float64(st.Limits.RPM))
	}
	if st.Limits.TPM > 0 {
		g(w.limitTPM, float64(st.Limits.TPM))
	}
	if st.Err != nil {
		// A zero snapshot would read as a closed breaker: say nothing.
		g(w.up, 0)
		return
	}
	g(w.up, 1)
	disabled := 0.0
	if st.Breaker.Disabled {
		disabled = 1
	}
	g(w.disabled, disabled)
	g(w.breakerState, stateGauge(st.Breaker.State))
	g(w.breakerOpens, float64(st.Breaker.Opens))
	g(w.limInFlight, float64(st.Usage.InFlight))
	g(w.limRequests, float64(st.Usage.Requests))
	g(w.limTokens, float64(st.Usage.Tokens))
}

// emitQueue exports a scope's queue depth by class.
func (w *watcher) emitQueue(ch chan<- prometheus.Metric, scope string, d core.QueueDepth) {
	for p, n := range d {
		ch <- prometheus.MustNewConstMetric(w.queueDepth, prometheus.GaugeValue, float64(n), scope, polygateway.Priority(p).String())
	}
}

// closed reports whether gc has been closed.
func closed(_ context.Context, gc *polygateway.GatewayClient) bool { return gc.Closed() }
