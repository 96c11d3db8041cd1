package metrics_test

import (
	"log"
	"net/http"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/metrics"
)

// Wire one Collector in its three roles and serve /metrics.
func Example() {
	col, err := metrics.New(nil, metrics.WithRuntimeMetrics())
	if err != nil {
		log.Fatal(err)
	}
	gc, err := polygateway.FromEnv("LLM",
		polygateway.WithObserver(col),                // attempts, refusals, waits, breaker transitions
		polygateway.WithMiddleware(col.Middleware()), // calls, latency, tokens, cost, cache, in-flight
	)
	if err != nil {
		log.Fatal(err)
	}
	defer gc.Close()
	col.WatchClient(gc) // breaker state, health and limiter use, read at scrape time

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", col.Handler())
	// ListenAndServe returns only on failure; gc.Close then runs.
	log.Print(http.ListenAndServe("127.0.0.1:9464", mux))
}
