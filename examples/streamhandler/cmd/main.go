// Command streamhandler serves the streamhandler example on a local port,
// offline, in front of two fake OpenAI-compatible servers of package
// polygatewaytest: a primary whose first request fails (HTTP 503, before
// any token) and a healthy secondary that paces its tokens. Ask it with
// curl and watch the answer arrive:
//
//	go run ./examples/streamhandler/cmd
//	curl -N -d 'Why is the sky blue?' http://127.0.0.1:8500/
package main

import (
	"flag"
	"log"
	"net/http"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/streamhandler"
	"github.com/polygateway/polygateway/polygatewaytest"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	addr := flag.String("addr", "127.0.0.1:8500", "listen address")
	flag.Parse()
	flaky := polygatewaytest.New(polygatewaytest.WithScript(polygatewaytest.ServerError(503), polygatewaytest.OK()))
	defer flaky.Close()
	healthy := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.OK().WithTokens(20).WithInterTokenDelay(100 * time.Millisecond)))
	defer healthy.Close()
	env := flaky.Env("CHAT", polygatewaytest.EnvSource("openai", 1))
	for k, v := range healthy.Env("CHAT", polygatewaytest.EnvSource("qwen", 1)) {
		env[k] = v
	}
	client, err := polygateway.FromEnv("CHAT", polygateway.WithEnv(env))
	if err != nil {
		return err
	}
	defer client.Close()
	log.Printf("listening on http://%s/ (POST a question)", *addr)
	srv := &http.Server{Addr: *addr, Handler: &streamhandler.Handler{Client: client}, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}
