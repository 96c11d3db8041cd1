package tracing_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/tracing"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type (
	spanStub = tracetest.SpanStub
	attrKey  = attribute.Key
)

// deployment is an attribute the tests add with WithAttributes.
const deployment = attribute.Key("deployment")

// recorder is a Tracer whose spans end up in an in-memory exporter.
type recorder struct {
	tp  *sdktrace.TracerProvider
	exp *tracetest.InMemoryExporter
	tr  *tracing.Tracer
}

func newRecorder(t testing.TB, opts ...tracing.Option) *recorder {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &recorder{tp: tp, exp: exp, tr: tracing.New(append([]tracing.Option{tracing.WithTracerProvider(tp)}, opts...)...)}
}

// spans returns the ended spans, in the order they ended.
func (r *recorder) spans() tracetest.SpanStubs { return r.exp.GetSpans() }

// named returns the ended spans named name.
func (r *recorder) named(name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.spans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// attrs maps a span's attributes by key.
func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := make(map[attribute.Key]attribute.Value, len(s.Attributes))
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// wantAttrs checks that s has every attribute of want (values given as
// string, int, bool or float64) and none of the keys in absent.
func wantAttrs(t *testing.T, s tracetest.SpanStub, want map[string]any, absent ...string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		gv, ok := got[attribute.Key(k)]
		if !ok {
			t.Errorf("span %q: no attribute %s (want %v)", s.Name, k, v)
			continue
		}
		var match bool
		switch v := v.(type) {
		case string:
			match = gv.Type() == attribute.STRING && gv.AsString() == v
		case int:
			match = gv.Type() == attribute.INT64 && gv.AsInt64() == int64(v)
		case bool:
			match = gv.Type() == attribute.BOOL && gv.AsBool() == v
		case float64:
			match = gv.Type() == attribute.FLOAT64 && gv.AsFloat64() == v
		default:
			t.Fatalf("wantAttrs: unsupported %T", v)
		}
		if !match {
			t.Errorf("span %q: %s = %s, want %v", s.Name, k, gv.String(), v)
		}
	}
	for _, k := range absent {
		if gv, ok := got[attribute.Key(k)]; ok {
			t.Errorf("span %q: unexpected %s = %s", s.Name, k, gv.String())
		}
	}
}

// headers records the trace headers of the requests a fake upstream got.
type headers struct {
	mu   sync.Mutex
	seen []string
}

func (h *headers) record(hd http.Header) {
	h.mu.Lock()
	h.seen = append(h.seen, hd.Get("traceparent"))
	h.mu.Unlock()
}

func (h *headers) traceparents() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// upstream starts a fake chat upstream answering with b whose requests'
// traceparent headers are recorded in h.
func upstream(t testing.TB, h *headers, b fakeupstream.Behavior) *fakeupstream.Server {
	return fakeupstream.NewServer(t, fakeupstream.WithFunc(func(r fakeupstream.RequestInfo) fakeupstream.Behavior {
		if h != nil {
			h.record(r.Header)
		}
		return b
	}))
}

// baseEnv is testenv.Base with a shorter backoff and no tier
// patience.
func baseEnv() testenv.Env {
	return testenv.Base().Set("LLM__RETRY__BACKOFF_BASE_S", "0.01", "LLM__RETRY__BACKOFF_MAX_S", "0.02",
		"LLM__RETRY__TIER_PATIENCE_S", "0")
}

// traceparent is the W3C header value naming s as the parent (sampled).
func traceparent(sc trace.SpanContext) string {
	return fmt.Sprintf("00-%s-%s-01", sc.TraceID(), sc.SpanID())
}
