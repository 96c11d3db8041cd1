package metrics_test

import (
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polygateway/polygateway/metrics"
)

// Count a gateway's HTTP requests on the registry of the Collector that
// serves /metrics; give the Gateway to proxy.Config.Observer.
func ExampleNewGateway() {
	col, err := metrics.New(nil)
	if err != nil {
		log.Fatal(err)
	}
	gw, err := metrics.NewGateway(col.Registry())
	if err != nil {
		log.Fatal(err)
	}
	// What proxy.Server reports: a request answered, one refused for its key.
	gw.ObserveRequest("/v1/chat/completions", 200, "key-0123456789ab")
	gw.ObserveRequest("/v1/chat/completions", 401, "")
	gw.ObserveRefusal("auth")
	gw.ObserveReload(true)

	n, err := testutil.GatherAndCount(col.Registry(), "polygateway_http_requests_total")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(n, "request series")
	// Output: 2 request series
}
