package proxy_test

import (
	"context"
	"log"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/proxy"
)

// The server over one scope, served with its timeouts, reloaded with Swap
// and drained with Shutdown.
func ExampleNew() {
	llm, err := polygateway.FromEnv("LLM")
	if err != nil {
		log.Fatal(err) // names the missing or bad key
	}
	srv, err := proxy.New(proxy.Config{
		Backends: proxy.Backends{
			Clients: map[string]*polygateway.GatewayClient{"LLM": llm},
			Routes:  map[string]string{"gpt-4o": "LLM"},
		},
		StreamCommit: proxy.CommitFirstToken,
	})
	if err != nil {
		log.Fatal(err)
	}
	hs := srv.HTTPServer("127.0.0.1:8400") // header, read and idle timeouts applied
	go func() { _ = hs.ListenAndServe() }()

	// Reload: srv.Swap(newBackends). Stop: drain (new requests get 503 while
	// the listener stays open), then close the listener.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	_ = hs.Shutdown(ctx)
}
