package tracing_test

import (
	"context"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/tracing"
)

// providers are the arms of the benchmarks: a provider that records
// nothing (what the global one is until a program installs an SDK) and the
// SDK sampling every span (with no exporter, so that only the tracing work
// is measured).
func providers() []struct {
	name string
	tp   trace.TracerProvider
} {
	return []struct {
		name string
		tp   trace.TracerProvider
	}{
		{"noop", noop.NewTracerProvider()},
		{"sdk", sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))},
	}
}

// BenchmarkSpans is what the Tracer does for a call with one attempt: two
// spans started and ended, one Inject.
func BenchmarkSpans(b *testing.B) {
	call := core.CallInfo{CallID: "call-1", Scope: "LLM", Operation: "chat", Stream: true}
	ev := core.AttemptEvent{Scope: "LLM", Source: "openai_1", Provider: "openai", Model: "gpt-4o-mini", CallID: "call-1", Attempt: 1}
	resp := &polygateway.LLMResponse{Model: "gpt-4o-mini", Provider: "openai", SourceName: "openai_1",
		PromptTokens: 12, CompletionTokens: 30, Attempts: []string{"openai_1"}, FinishReason: "stop"}
	for _, p := range providers() {
		b.Run(p.name, func(b *testing.B) {
			tr := tracing.New(tracing.WithTracerProvider(p.tp))
			h := http.Header{}
			b.ReportAllocs()
			for b.Loop() {
				ctx, endCall := tr.StartCall(context.Background(), call)
				actx, endAttempt := tr.StartAttempt(ctx, ev)
				tr.Inject(actx, h)
				ev.Outcome = core.AttemptSuccess
				endAttempt(ev, nil)
				endCall(resp, nil)
			}
		})
	}
}

// BenchmarkCall is a whole governed call against the fake upstream on
// loopback (non-streaming, no cache): "raw" without a Tracer, then with one
// on each provider. Read the tracing arms as ratios to raw.
func BenchmarkCall(b *testing.B) {
	srv := fakeupstream.NewServer(b, fakeupstream.WithBehavior(fakeupstream.OK()))
	e := baseEnv().Source("openai", 1, srv.URL())
	msgs := []polygateway.Message{polygateway.User("hello")}
	run := func(b *testing.B, opts ...polygateway.Option) {
		c := e.Client(b, opts...)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Chat(ctx, msgs, polygateway.WithStream(false)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("raw", func(b *testing.B) { run(b) })
	for _, p := range providers() {
		b.Run(p.name, func(b *testing.B) {
			run(b, polygateway.WithTracer(tracing.New(tracing.WithTracerProvider(p.tp))))
		})
	}
}
