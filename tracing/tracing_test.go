package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/tracing"
)

func TestFailoverIsOneCallSpanWithAnAttemptSpanPerSource(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	var hdrA, hdrB headers
	a := upstream(t, &hdrA, fakeupstream.BadKey())
	b := upstream(t, &hdrB, fakeupstream.OK().WithTokens(3))
	c := baseEnv().Source("alpha", 1, a.URL(), "PRIORITY", "0").Source("beta", 1, b.URL(), "PRIORITY", "1").
		Client(t, polygateway.WithTracer(rec.tr))

	resp, err := testenv.AskContext(context.Background(), t, c, polygateway.WithStream(false), polygateway.WithSessionID("sess-1"))
	if err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := strings.Join(resp.Attempts, ","); got != "alpha_1,beta_1" {
		t.Fatalf("attempts %s: the scenario did not fail over", got)
	}

	spans := rec.spans()
	if len(spans) != 3 {
		t.Fatalf("%d spans, want a call span and two attempt spans: %v", len(spans), spans)
	}
	calls := rec.named("chat LLM")
	first, second := rec.named("chat alpha-model"), rec.named("chat beta-model")
	if len(calls) != 1 || len(first) != 1 || len(second) != 1 {
		t.Fatalf("span names: %v", spanNames(spans))
	}
	call, at1, at2 := calls[0], first[0], second[0]
	for _, at := range []spanStub{at1, at2} {
		if at.Parent.SpanID() != call.SpanContext.SpanID() || at.SpanContext.TraceID() != call.SpanContext.TraceID() {
			t.Errorf("attempt %q is not a child of the call span", at.Name)
		}
		if at.SpanKind != trace.SpanKindClient {
			t.Errorf("attempt %q kind %v", at.Name, at.SpanKind)
		}
	}
	if call.Parent.IsValid() || call.SpanKind != trace.SpanKindInternal {
		t.Errorf("call span: parent %v kind %v", call.Parent, call.SpanKind)
	}

	wantAttrs(t, call, map[string]any{
		"gen_ai.operation.name": "chat", "polygateway.scope": "LLM", "polygateway.call_id": resp.CallID,
		"gen_ai.provider.name": "beta", "gen_ai.response.model": resp.Model, "polygateway.source": "beta_1",
		"gen_ai.usage.input_tokens": resp.PromptTokens, "gen_ai.usage.output_tokens": resp.CompletionTokens,
		"polygateway.cache_hit": false, "polygateway.degraded": false, "polygateway.attempts": 2,
		"gen_ai.request.stream": false, "gen_ai.conversation.id": "sess-1",
	}, "error.type", "polygateway.degraded_by")
	if resp.CompletionTokens == 0 || resp.Model == "" {
		t.Errorf("the answer has no usage or model: %+v", resp)
	}
	if call.Status.Code == codes.Error {
		t.Errorf("call status %v", call.Status)
	}

	wantAttrs(t, at1, map[string]any{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "alpha", "gen_ai.request.model": "alpha-model",
		"polygateway.scope": "LLM", "polygateway.source": "alpha_1", "polygateway.call_id": resp.CallID,
		"polygateway.attempt": 1, "polygateway.breaker.state": "closed", "polygateway.outcome": "source_dead",
		"error.type": "SourceDeadError",
	}, "gen_ai.response.model")
	if at1.Status.Code != codes.Error || at1.Status.Description == "" || strings.Contains(at1.Status.Description, "sk-test-alpha") {
		t.Errorf("failed attempt status %+v", at1.Status)
	}
	wantAttrs(t, at2, map[string]any{
		"gen_ai.provider.name": "beta", "gen_ai.request.model": "beta-model", "gen_ai.response.model": resp.Model,
		"polygateway.source": "beta_1", "polygateway.attempt": 2, "polygateway.breaker.state": "closed",
		"polygateway.outcome": "success",
	}, "error.type")
	if at2.Status.Code == codes.Error {
		t.Errorf("successful attempt status %+v", at2.Status)
	}

	// Each upstream saw the traceparent of its own attempt's span.
	if got := hdrA.traceparents(); len(got) != 1 || got[0] != traceparent(at1.SpanContext) {
		t.Errorf("alpha upstream traceparent %q, want %q", got, traceparent(at1.SpanContext))
	}
	if got := hdrB.traceparents(); len(got) != 1 || got[0] != traceparent(at2.SpanContext) {
		t.Errorf("beta upstream traceparent %q, want %q", got, traceparent(at2.SpanContext))
	}
}

func spanNames(spans []spanStub) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.Name
	}
	return names
}

func TestCallSpanIsAChildOfTheCallersSpan(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	var hdr headers
	srv := upstream(t, &hdr, fakeupstream.OK())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t, polygateway.WithTracer(rec.tr))

	ctx, parent := rec.tp.Tracer("test").Start(context.Background(), "job")
	_, err := testenv.AskContext(ctx, t, c, polygateway.WithParentCallID("parent-1"))
	parent.End()
	if err != nil {
		t.Fatal(err)
	}
	calls := rec.named("chat LLM")
	if len(calls) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	if calls[0].Parent.SpanID() != parent.SpanContext().SpanID() || calls[0].SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("call span parent %v, want the caller's span %v", calls[0].Parent, parent.SpanContext())
	}
	wantAttrs(t, calls[0], map[string]any{"polygateway.parent_call_id": "parent-1", "gen_ai.request.stream": true},
		"gen_ai.conversation.id")
	attempt := rec.named("chat alpha-model")
	if len(attempt) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	if got := hdr.traceparents(); len(got) != 1 || got[0] != traceparent(attempt[0].SpanContext) {
		t.Errorf("upstream traceparent %q", got)
	}
}

func TestStreamedAttemptRecordsTokenTimings(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	srv := upstream(t, nil, fakeupstream.OK().WithTokens(4))
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t, polygateway.WithTracer(rec.tr))
	resp, err := testenv.AskContext(context.Background(), t, c, polygateway.WithStream(true))
	if err != nil {
		t.Fatal(err)
	}
	at := rec.named("chat alpha-model")
	if len(at) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	wantAttrs(t, at[0], map[string]any{"gen_ai.request.stream": true, "polygateway.outcome": "success"})
	if resp.TTFT > 0 {
		wantAttrs(t, at[0], map[string]any{"polygateway.ttft_s": resp.TTFT.Seconds()})
	} else {
		t.Errorf("a streamed answer without TTFT: %+v", resp)
	}
}

func TestFailedCallHasErrorStatusAndClass(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	srv := upstream(t, nil, fakeupstream.BadKey())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t, polygateway.WithTracer(rec.tr))
	_, err := testenv.AskContext(context.Background(), t, c)
	var unavailable *polygateway.GatewayUnavailableError
	if !errors.As(err, &unavailable) {
		t.Fatalf("err = %v, want GatewayUnavailableError", err)
	}
	calls := rec.named("chat LLM")
	if len(calls) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	call := calls[0]
	if call.Status.Code != codes.Error || call.Status.Description != err.Error() {
		t.Errorf("call status %+v, want Error with %q", call.Status, err.Error())
	}
	wantAttrs(t, call, map[string]any{"error.type": "GatewayUnavailableError", "polygateway.source": "alpha_1"},
		"gen_ai.usage.input_tokens")
	if r := polygateway.Classify(err).Reason; r != "" {
		wantAttrs(t, call, map[string]any{"polygateway.reason": string(r)})
	}
	if at := rec.named("chat alpha-model"); len(at) != 1 || at[0].Status.Code != codes.Error {
		t.Errorf("attempt spans %v", at)
	}
}

func TestCacheHitIsACallSpanWithoutAttempts(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	srv := upstream(t, nil, fakeupstream.OK())
	e := baseEnv().Source("alpha", 1, srv.URL())
	e["PGW_CACHE_BACKEND"], e["PGW_CACHE_NAMESPACE"], e["PGW_CACHE_TTL_S"] = "memory", "tracing-test", "60"
	c := e.Client(t, polygateway.WithTracer(rec.tr))
	for range 2 {
		if _, err := testenv.AskContext(context.Background(), t, c, polygateway.WithStream(false)); err != nil {
			t.Fatal(err)
		}
	}
	calls := rec.named("chat LLM")
	if len(calls) != 2 || len(rec.named("chat alpha-model")) != 1 {
		t.Fatalf("spans %v, want two calls and one attempt", spanNames(rec.spans()))
	}
	wantAttrs(t, calls[0], map[string]any{"polygateway.cache_hit": false, "polygateway.attempts": 1})
	wantAttrs(t, calls[1], map[string]any{"polygateway.cache_hit": true}, "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
}

func TestFallbackAnswerIsMarkedDegraded(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	srv := upstream(t, nil, fakeupstream.BadKey())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t, polygateway.WithTracer(rec.tr),
		polygateway.WithFallback(func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
			return &polygateway.LLMResponse{Content: "later"}, nil
		}))
	resp, err := testenv.AskContext(context.Background(), t, c)
	if err != nil || !resp.Degraded {
		t.Fatalf("resp %+v err %v: the fallback did not answer", resp, err)
	}
	calls := rec.named("chat LLM")
	if len(calls) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	wantAttrs(t, calls[0], map[string]any{"polygateway.degraded": true, "polygateway.degraded_by": "fallback"}, "error.type")
}

// TestCallSpanCountsTheAttemptsTheCallMade: polygateway.attempts is the
// number of attempts the call made, whatever answered it — the sources, a
// caller's fallback after they failed, or nothing (a failed call) — so
// that it matches the call span's attempt children.
func TestCallSpanCountsTheAttemptsTheCallMade(t *testing.T) {
	t.Parallel()
	fallback := func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{Content: "later"}, nil
	}
	for _, tc := range []struct {
		name string
		opts []polygateway.Option
	}{
		{"a fallback answers", []polygateway.Option{polygateway.WithFallback(fallback)}},
		{"the call fails", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t)
			a := upstream(t, nil, fakeupstream.BadKey())
			b := upstream(t, nil, fakeupstream.BadKey())
			c := baseEnv().Source("alpha", 1, a.URL(), "PRIORITY", "0").Source("beta", 1, b.URL(), "PRIORITY", "1").
				Client(t, append(tc.opts, polygateway.WithTracer(rec.tr))...)
			_, _ = testenv.AskContext(context.Background(), t, c)
			calls := rec.named("chat LLM")
			if len(calls) != 1 || len(rec.named("chat alpha-model")) != 1 || len(rec.named("chat beta-model")) != 1 {
				t.Fatalf("spans %v, want a call and two attempts", spanNames(rec.spans()))
			}
			wantAttrs(t, calls[0], map[string]any{"polygateway.attempts": 2})
		})
	}
}

func TestNoTracerSendsNoTraceparent(t *testing.T) {
	t.Parallel()
	var hdr headers
	srv := upstream(t, &hdr, fakeupstream.OK())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t)
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "job")
	defer span.End()
	if _, err := testenv.AskContext(ctx, t, c); err != nil {
		t.Fatal(err)
	}
	if got := hdr.traceparents(); len(got) != 1 || got[0] != "" {
		t.Errorf("upstream traceparent %q without a tracer", got)
	}
}

func TestNonRecordingProviderStillPropagatesTheCallersContext(t *testing.T) {
	t.Parallel()
	var hdr headers
	srv := upstream(t, &hdr, fakeupstream.OK())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t,
		polygateway.WithTracer(tracing.New(tracing.WithTracerProvider(noop.NewTracerProvider()))))
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "job")
	defer span.End()
	if _, err := testenv.AskContext(ctx, t, c); err != nil {
		t.Fatal(err)
	}
	if got := hdr.traceparents(); len(got) != 1 || got[0] != traceparent(span.SpanContext()) {
		t.Errorf("upstream traceparent %q, want the caller's %q", got, traceparent(span.SpanContext()))
	}
}

func TestEmbeddingsCallsAreTraced(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	var hdr headers
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr.record(r.Header)
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		data := make([]map[string]any, len(req.Input))
		for i := range req.Input {
			data[i] = map[string]any{"index": i, "embedding": []float32{1, 0}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"data": data, "model": "emb-model", "usage": map[string]int{"prompt_tokens": 2}})
	}))
	t.Cleanup(srv.Close)
	c, err := embed.FromEnv("EMBED", polygateway.WithTracer(rec.tr), polygateway.WithEnv(map[string]string{
		"EMBED__OPENAI__1__BASE_URL": srv.URL + "/v1", "EMBED__OPENAI__1__API_KEY": "sk-emb",
		"EMBED__OPENAI__1__MODEL": "emb-model", "EMBED__OPENAI__1__TIMEOUT_S": "5", "EMBED__BATCH_SIZE": "8",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.Embed(context.Background(), []string{"a", "b"}); err != nil {
		t.Fatal(err)
	}
	calls, attempts := rec.named("embeddings EMBED"), rec.named("embeddings emb-model")
	if len(calls) != 1 || len(attempts) != 1 {
		t.Fatalf("spans %v", spanNames(rec.spans()))
	}
	wantAttrs(t, calls[0], map[string]any{"gen_ai.operation.name": "embeddings", "polygateway.scope": "EMBED",
		"polygateway.source": "openai_1", "gen_ai.provider.name": "openai"})
	wantAttrs(t, attempts[0], map[string]any{"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "emb-model",
		"polygateway.outcome": "success"})
	if attempts[0].Parent.SpanID() != calls[0].SpanContext.SpanID() {
		t.Error("the embeddings attempt is not a child of its call")
	}
	if got := hdr.traceparents(); len(got) != 1 || got[0] != traceparent(attempts[0].SpanContext) {
		t.Errorf("embeddings upstream traceparent %q", got)
	}
}

func TestOCRCallsAreTraced(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	fake := ocrfake.New()
	t.Cleanup(fake.Close)
	target, _ := url.Parse(fake.URL)
	var hdr headers
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			hdr.record(r.Header)
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	c, err := ocr.FromEnv("OCR", polygateway.WithTracer(rec.tr), polygateway.WithEnv(map[string]string{
		"OCR__MONKEY__1__BASE_URL": front.URL, "OCR__MONKEY__1__API_KEY": "none",
		"OCR__MONKEY__1__MODEL": "monkey-ocr", "OCR__MONKEY__1__TIMEOUT_S": "30",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	png := []byte("\x89PNG\r\n\x1a\n…pixels…")
	if _, err := c.RecognizeText(context.Background(), png); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ParseLayout(context.Background(), png); err != nil {
		t.Fatal(err)
	}
	for _, op := range []string{"ocr_text", "ocr_layout"} {
		calls, attempts := rec.named(op+" OCR"), rec.named(op+" monkey-ocr")
		if len(calls) != 1 || len(attempts) != 1 {
			t.Fatalf("%s: spans %v", op, spanNames(rec.spans()))
		}
		wantAttrs(t, calls[0], map[string]any{"gen_ai.operation.name": op, "polygateway.source": "monkey_1"})
		wantAttrs(t, attempts[0], map[string]any{"gen_ai.operation.name": op, "polygateway.outcome": "success"})
		if attempts[0].Parent.SpanID() != calls[0].SpanContext.SpanID() {
			t.Errorf("%s: the attempt is not a child of its call", op)
		}
	}
	// Every request through the front (the uploads; downloads too when
	// their URLs point at it) carries the traceparent of its attempt.
	want := map[string]bool{}
	for _, s := range rec.spans() {
		if strings.HasSuffix(s.Name, " monkey-ocr") {
			want[traceparent(s.SpanContext)] = true
		}
	}
	got := hdr.traceparents()
	if len(got) < 2 {
		t.Fatalf("the front saw %d requests", len(got))
	}
	for _, tp := range got {
		if !want[tp] {
			t.Errorf("OCR upstream traceparent %q is not an attempt's", tp)
		}
	}
}

func TestDefaultPropagatorIsTraceContext(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	ctx, span := rec.tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	h := http.Header{}
	tracing.New().Inject(ctx, h)
	if got := h.Get("traceparent"); got != traceparent(span.SpanContext()) {
		t.Errorf("traceparent %q", got)
	}
}

func TestWithPropagatorCarriesBaggage(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, tracing.WithPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})))
	m, _ := baggage.NewMember("tenant", "acme")
	bag, _ := baggage.New(m)
	ctx, span := rec.tp.Tracer("test").Start(baggage.ContextWithBaggage(context.Background(), bag), "x")
	defer span.End()
	h := http.Header{}
	rec.tr.Inject(ctx, h)
	if h.Get("traceparent") == "" || h.Get("baggage") != "tenant=acme" {
		t.Errorf("headers %v", h)
	}
}

func TestHandlerExtractsTheIncomingTraceContext(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	var got trace.SpanContext
	h := rec.tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = trace.SpanContextFromContext(r.Context())
	}))
	req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	req.Header.Set("traceparent", incoming)
	h.ServeHTTP(httptest.NewRecorder(), req)
	if !got.IsRemote() || got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("extracted %+v", got)
	}

	got = trace.SpanContext{}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if got.IsValid() {
		t.Errorf("a request without traceparent got %+v", got)
	}
}

func TestWithAttributesAddsToEverySpan(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t, tracing.WithAttributes(deployment.String("eu-1")))
	srv := upstream(t, nil, fakeupstream.OK())
	c := baseEnv().Source("alpha", 1, srv.URL()).Client(t, polygateway.WithTracer(rec.tr))
	if _, err := testenv.AskContext(context.Background(), t, c); err != nil {
		t.Fatal(err)
	}
	spans := rec.spans()
	if len(spans) != 2 {
		t.Fatalf("spans %v", spanNames(spans))
	}
	for _, s := range spans {
		wantAttrs(t, s, map[string]any{"deployment": "eu-1"})
	}
}

func TestLongValuesAreClipped(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	long := strings.Repeat("é", 300) // 600 bytes
	_, end := rec.tr.StartCall(context.Background(), core.CallInfo{Scope: "LLM", CallID: long, Operation: "chat"})
	end(&polygateway.LLMResponse{Model: long}, nil)
	s := rec.spans()
	if len(s) != 1 {
		t.Fatalf("spans %v", spanNames(s))
	}
	for _, k := range []string{"polygateway.call_id", "gen_ai.response.model"} {
		v := attrs(s[0])[attrKey(k)].AsString()
		if len(v) > 256 || len(v) < 254 || !strings.HasPrefix(long, v) {
			t.Errorf("%s: %d bytes", k, len(v))
		}
	}
}

// FuzzHandlerTraceparent: whatever trace headers a client sends, the
// handler runs with either no span context or a valid remote one.
func FuzzHandlerTraceparent(f *testing.F) {
	for _, s := range []string{"", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-extra", "garbage"} {
		f.Add(s, "")
	}
	tr := tracing.New(tracing.WithTracerProvider(noop.NewTracerProvider()))
	f.Fuzz(func(t *testing.T, traceparent, tracestate string) {
		var got trace.SpanContext
		ran := false
		h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ran, got = true, trace.SpanContextFromContext(r.Context())
		}))
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.Header["Traceparent"] = []string{traceparent}
		req.Header["Tracestate"] = []string{tracestate}
		h.ServeHTTP(httptest.NewRecorder(), req)
		if !ran {
			t.Fatal("the handler did not run")
		}
		if got.IsValid() && !got.IsRemote() {
			t.Fatalf("%q: a local span context %v", traceparent, got)
		}
		if got.IsValid() && !strings.Contains(traceparent, got.TraceID().String()) {
			t.Fatalf("%q: trace id %s from nowhere", traceparent, got.TraceID())
		}
	})
}
