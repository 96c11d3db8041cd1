package tracing_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/tracing"
)

// Trace a client's calls. A real program gives the SDK an exporter
// (sdktrace.WithBatcher(otlptracehttp.New(ctx))) and shuts the provider
// down on exit; here the spans are kept in memory and printed.
func Example() {
	traceparent := make(chan string, 1) // what the upstream received
	upstream := fu.New(fu.WithFunc(func(r fu.RequestInfo) fu.Behavior {
		traceparent <- r.Header.Get("traceparent")
		return fu.OK().WithTokens(3)
	}))
	defer upstream.Close()

	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer func() { _ = tp.Shutdown(context.Background()) }()

	client, err := polygateway.FromEnv("LLM",
		polygateway.WithTracer(tracing.New(tracing.WithTracerProvider(tp))),
		polygateway.WithEnv(map[string]string{
			"LLM__OPENAI__1__BASE_URL":  upstream.URL(),
			"LLM__OPENAI__1__API_KEY":   "sk-example",
			"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
			"LLM__OPENAI__1__TIMEOUT_S": "30",
			"PGW_LIMITER_BACKEND":       "memory",
			"PGW_BREAKER_BACKEND":       "memory",
			"PGW_CACHE_BACKEND":         "none",
			"PGW_TELEMETRY_BACKEND":     "none",
		}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	if _, err := client.Chat(context.Background(), []polygateway.Message{polygateway.User("Count to three.")}); err != nil {
		fmt.Println(err)
		return
	}
	for _, s := range spans.Ended() { // the attempt ends first
		fmt.Printf("%s (%s)", s.Name(), s.SpanKind())
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "gen_ai.provider.name", "polygateway.source", "polygateway.outcome", "polygateway.attempts":
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		fmt.Println()
	}
	attempt := spans.Ended()[0].SpanContext()
	fmt.Println("upstream saw the attempt's span:", <-traceparent == fmt.Sprintf("00-%s-%s-01", attempt.TraceID(), attempt.SpanID()))
	// Output:
	// chat gpt-4o-mini (client) gen_ai.provider.name=openai polygateway.source=openai_1 polygateway.outcome=success
	// chat LLM (internal) gen_ai.provider.name=openai polygateway.source=openai_1 polygateway.attempts=1
	// upstream saw the attempt's span: true
}

// The wiring of a real program: OTLP/HTTP export configured by the
// standard OTEL_* variables (OTEL_EXPORTER_OTLP_ENDPOINT, _HEADERS,
// OTEL_SERVICE_NAME, …), one Tracer for the chat and embeddings clients,
// and an HTTP server whose handlers continue their callers' traces.
func Example_otlp() {
	ctx := context.Background()
	exporter, err := otlptracehttp.New(ctx) // reads OTEL_EXPORTER_OTLP_*
	if err != nil {
		log.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
	defer func() { _ = tp.Shutdown(ctx) }() // exports the last spans
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})

	tr := tracing.New() // the global provider and propagator
	chat, err := polygateway.FromEnv("LLM", polygateway.WithTracer(tr))
	if err != nil {
		log.Print(err)
		return // the deferred calls still run: the spans so far are exported
	}
	defer chat.Close()
	embedder, err := embed.FromEnv("EMBED", polygateway.WithTracer(tr))
	if err != nil {
		log.Print(err)
		return
	}
	defer embedder.Close()

	ask := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// r.Context() carries the caller's span: the call is its child.
		resp, err := chat.Chat(r.Context(), []polygateway.Message{polygateway.User(r.FormValue("q"))})
		if err != nil {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, resp.Content)
	})
	// ListenAndServe returns only on failure; the deferred calls then run.
	log.Print(http.ListenAndServe("127.0.0.1:8080", tr.Handler(ask)))
}
