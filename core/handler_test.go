package core

import (
	"context"
	"slices"
	"sync"
	"testing"
)

type traceLog struct {
	mu     sync.Mutex
	events []string
}

func (l *traceLog) add(e string) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func tracing(log *traceLog, name string) Middleware {
	return func(next Handler) Handler {
		return func(ctx context.Context, call *Call) (*LLMResponse, error) {
			log.add(name + " in")
			resp, err := next(ctx, call)
			log.add(name + " out")
			return resp, err
		}
	}
}

func TestChainFirstListedIsOutermost(t *testing.T) {
	t.Parallel()
	log := &traceLog{}
	h := func(ctx context.Context, call *Call) (*LLMResponse, error) {
		log.add("handler")
		return &LLMResponse{Content: call.ID}, nil
	}
	chained := Chain(h, tracing(log, "cache"), tracing(log, "telemetry"), tracing(log, "engine"))
	resp, err := chained(context.Background(), &Call{ID: "c1"})
	if err != nil || resp.Content != "c1" {
		t.Fatalf("got (%v, %v), want the handler's answer", resp, err)
	}
	want := []string{"cache in", "telemetry in", "engine in", "handler", "engine out", "telemetry out", "cache out"}
	if !slices.Equal(log.events, want) {
		t.Errorf("order = %v, want %v", log.events, want)
	}
}

func TestChainSkipsNilMiddleware(t *testing.T) {
	t.Parallel()
	log := &traceLog{}
	h := func(context.Context, *Call) (*LLMResponse, error) {
		log.add("handler")
		return &LLMResponse{}, nil
	}
	chained := Chain(h, nil, tracing(log, "a"), nil, tracing(log, "b"), nil) //nolint:gocritic // nil repeated on purpose: a nil before, between and after the middleware is skipped
	if _, err := chained(context.Background(), &Call{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a in", "b in", "handler", "b out", "a out"}
	if !slices.Equal(log.events, want) {
		t.Errorf("order = %v, want %v", log.events, want)
	}
}

func TestChainWithoutMiddlewareIsTheHandler(t *testing.T) {
	t.Parallel()
	calls := 0
	h := func(context.Context, *Call) (*LLMResponse, error) {
		calls++
		return &LLMResponse{Content: "x"}, nil
	}
	resp, err := Chain(h)(context.Background(), &Call{})
	if err != nil || resp.Content != "x" || calls != 1 {
		t.Errorf("got (%v, %v) after %d calls", resp, err, calls)
	}
}
