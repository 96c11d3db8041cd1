package main

import (
	"context"
	"net/http"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/metrics"
	"github.com/polygateway/polygateway/proxy"
)

// promHook wires the metrics package's collector into the server: as
// observer and middleware of every client, as scrape-time watcher of the
// chat clients, and as the /metrics handler.
type promHook struct {
	col *metrics.Collector
	gw  *metrics.Gateway // HTTP requests, refusals, reloads, build info
}

var _ proxy.RequestObserver = (*metrics.Gateway)(nil)

func newMetrics() (metricsHook, error) {
	col, err := metrics.New(nil, metrics.WithRuntimeMetrics()) // go_* and process_* beside the gateway's own
	if err != nil {
		return nil, err
	}
	gw, err := metrics.NewGateway(col.Registry())
	if err != nil {
		return nil, err
	}
	return promHook{col, gw}, nil
}

func (h promHook) Observer() proxy.RequestObserver { return h.gw }
func (h promHook) Reloaded(applied bool)           { h.gw.ObserveReload(applied) }

func (h promHook) Options() []polygateway.Option {
	return []polygateway.Option{polygateway.WithObserver(h.col), polygateway.WithMiddleware(h.col.Middleware())}
}

func (h promHook) Watch(c *polygateway.GatewayClient)   { h.col.WatchClient(c) }
func (h promHook) Unwatch(c *polygateway.GatewayClient) { h.col.Unwatch(c) }
func (h promHook) Handler() http.Handler                { return h.col.Handler() }
func (h promHook) WatchBudgets(read func(context.Context) ([]polygateway.BudgetUsage, error)) {
	h.col.WatchBudgets(read)
}
