package metrics

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// BenchmarkCallOverhead measures what the collector adds to one call: the
// middleware around a handler that returns a streamed, priced answer at
// once, plus the one attempt event the engine would report. "bare" is the
// same handler without the collector.
func BenchmarkCallOverhead(b *testing.B) {
	cost := 0.0001
	resp := &polygateway.LLMResponse{
		SourceName: "openai_1", Model: "gpt-test", PromptTokens: 11, CompletionTokens: 8,
		TTFT: 120 * time.Millisecond, MaxInterToken: 15 * time.Millisecond, Cost: &cost,
	}
	ev := core.AttemptEvent{
		Scope: "LLM", Source: "openai_1", Outcome: "success",
		Latency: 400 * time.Millisecond, TTFT: 120 * time.Millisecond, MaxInterToken: 15 * time.Millisecond,
	}
	call := &polygateway.Call{Scope: "LLM"}
	ctx := context.Background()

	b.Run("bare", func(b *testing.B) {
		h := polygateway.Handler(func(context.Context, *polygateway.Call) (*polygateway.LLMResponse, error) { return resp, nil })
		b.ReportAllocs()
		for b.Loop() {
			_, _ = h(ctx, call)
		}
	})
	b.Run("metrics", func(b *testing.B) {
		col := newCollector(b)
		h := col.Middleware()(func(context.Context, *polygateway.Call) (*polygateway.LLMResponse, error) {
			col.Attempt(ev)
			return resp, nil
		})
		b.ReportAllocs()
		for b.Loop() {
			_, _ = h(ctx, call)
		}
	})
	b.Run("metrics-parallel", func(b *testing.B) {
		col := newCollector(b)
		h := col.Middleware()(func(context.Context, *polygateway.Call) (*polygateway.LLMResponse, error) {
			col.Attempt(ev)
			return resp, nil
		})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				_, _ = h(ctx, call)
			}
		})
	})
}

// BenchmarkEndToEnd is a whole governed call against the fake upstream on
// loopback (non-streaming, no cache), without and with the collector wired
// in as observer, middleware and watcher.
func BenchmarkEndToEnd(b *testing.B) {
	srv := fakeupstream.NewServer(b, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	env["PGW_CACHE_BACKEND"] = "none"
	addSource(env, 1, srv, "gpt-test", 0)
	msgs := []polygateway.Message{polygateway.User("hello")}
	run := func(b *testing.B, gc *polygateway.GatewayClient) {
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := gc.Chat(ctx, msgs, polygateway.WithStream(false)); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("plain", func(b *testing.B) {
		gc, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
		if err != nil {
			b.Fatal(err)
		}
		defer gc.Close()
		run(b, gc)
	})
	b.Run("metrics", func(b *testing.B) {
		col := newCollector(b)
		run(b, newClient(b, col, env))
	})
}

// BenchmarkScrape is one /metrics gather of a collector watching a client
// with three sources after some traffic.
func BenchmarkScrape(b *testing.B) {
	srv := fakeupstream.NewServer(b, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	for i := 1; i <= 3; i++ {
		addSource(env, i, srv, fmt.Sprintf("m%d", i), 0)
	}
	col := newCollector(b)
	gc := newClient(b, col, env)
	for i := range 10 {
		chat(b, gc, fmt.Sprint("warm ", i))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := col.Registry().Gather(); err != nil {
			b.Fatal(err)
		}
	}
}
