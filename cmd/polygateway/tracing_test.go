package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
)

// tracedEnv is a gateway with a chat scope LLM and an embeddings scope
// EMBED on one fake upstream, whose requests' traceparent headers are
// recorded.
func tracedEnv(t *testing.T) (map[string]string, func() []string) {
	t.Helper()
	var (
		mu   sync.Mutex
		seen []string
	)
	record := func(h http.Header) {
		mu.Lock()
		seen = append(seen, h.Get("traceparent"))
		mu.Unlock()
	}
	up := fakeupstream.NewServer(t,
		fakeupstream.WithFunc(func(r fakeupstream.RequestInfo) fakeupstream.Behavior {
			record(r.Header)
			return fakeupstream.OK()
		}),
		fakeupstream.WithHandler("/embeddings", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			record(r.Header)
			_, _ = io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, `{"data":[{"index":0,"embedding":[1,0]}],"model":"emb-model","usage":{"prompt_tokens":1}}`)
		})))
	env := map[string]string{
		"PGW_LISTEN_ADDR": "127.0.0.1:0", "PGW_ROUTES": "gpt-4o=LLM", "PGW_EMBED_ROUTES": "emb=EMBED",
		"PGW_METRICS": "false", "PGW_DRAIN_TIMEOUT_S": "5",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__ONE__1__BASE_URL": up.URL(), "LLM__ONE__1__API_KEY": "sk-one", "LLM__ONE__1__MODEL": "one-model", "LLM__ONE__1__TIMEOUT_S": "5",
		"EMBED__EMB__1__BASE_URL": up.URL(), "EMBED__EMB__1__API_KEY": "sk-emb", "EMBED__EMB__1__MODEL": "emb-model",
		"EMBED__EMB__1__TIMEOUT_S": "5", "EMBED__BATCH_SIZE": "4",
	}
	return env, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// serve starts the gateway of env with the tracing hook h and returns its
// base URL; it is shut down when the test ends.
func serve(t *testing.T, env map[string]string, h *tracingHook) string {
	t.Helper()
	a := newApp(slog.New(slog.NewTextHandler(io.Discard, nil)), envSource(func() (map[string]string, error) { return maps.Clone(env), nil }), nil)
	a.tracing = h
	addr, err := a.start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if err := a.shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + addr.String()
}

// postTraced sends body to url as a client whose span is clientSpanID.
func postTraced(t *testing.T, url, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
}

func TestGatewayCallsContinueTheClientsTrace(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	env, upstreamSaw := tracedEnv(t)
	base := serve(t, env, newTracingHook(tp, tp.Shutdown))

	postTraced(t, base+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	postTraced(t, base+"/v1/embeddings", `{"model":"emb","input":"hi"}`)

	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	for _, pair := range [][2]string{{"chat LLM", "chat one-model"}, {"embeddings EMBED", "embeddings emb-model"}} {
		call, ok := byName[pair[0]]
		attempt, ok2 := byName[pair[1]]
		if !ok || !ok2 {
			t.Fatalf("spans %v: no %q or %q", names(exp.GetSpans()), pair[0], pair[1])
		}
		if call.SpanContext.TraceID().String() != clientTraceID || call.Parent.SpanID().String() != clientSpanID || !call.Parent.IsRemote() {
			t.Errorf("%s: trace %s parent %s, want the client's %s/%s", pair[0], call.SpanContext.TraceID(), call.Parent.SpanID(), clientTraceID, clientSpanID)
		}
		if attempt.Parent.SpanID() != call.SpanContext.SpanID() {
			t.Errorf("%s is not a child of %s", pair[1], pair[0])
		}
	}
	want := []string{
		fmt.Sprintf("00-%s-%s-01", clientTraceID, byName["chat one-model"].SpanContext.SpanID()),
		fmt.Sprintf("00-%s-%s-01", clientTraceID, byName["embeddings emb-model"].SpanContext.SpanID()),
	}
	if got := upstreamSaw(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("upstream traceparents %q, want %q", got, want)
	}
}

func TestGatewayWithoutOTLPEndpointDoesNotTrace(t *testing.T) {
	env, upstreamSaw := tracedEnv(t)
	on, err := tracingEnabled(env)
	if err != nil || on {
		t.Fatalf("tracingEnabled = %v, %v without an endpoint", on, err)
	}
	base := serve(t, env, nil)
	postTraced(t, base+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if got := upstreamSaw(); len(got) != 1 || got[0] != "" {
		t.Errorf("upstream traceparents %q without tracing", got)
	}
}

// TestGatewayExportsOTLPFromTheStandardVariables sets the OTEL_* keys in
// the .env map only: the gateway hands them to the exporter.
func TestGatewayExportsOTLPFromTheStandardVariables(t *testing.T) {
	var (
		mu       sync.Mutex
		exported []*coltracepb.ExportTraceServiceRequest
		problems []string
	)
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || r.Header.Get("Authorization") != "Bearer otlp-secret" {
			problems = append(problems, fmt.Sprintf("%s %s %v", r.Method, r.URL.Path, r.Header))
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			problems = append(problems, err.Error())
		}
		exported = append(exported, &req)
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer collector.Close()

	env, _ := tracedEnv(t)
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = collector.URL
	env["OTEL_EXPORTER_OTLP_HEADERS"] = "Authorization=Bearer otlp-secret"
	env["OTEL_RESOURCE_ATTRIBUTES"] = "deployment.environment.name=test"
	for k := range env {
		if strings.HasPrefix(k, "OTEL_") {
			t.Setenv(k, "") // restored when the test ends
			os.Unsetenv(k)
		}
	}
	on, err := tracingEnabled(env)
	if err != nil || !on {
		t.Fatalf("tracingEnabled = %v, %v with an endpoint", on, err)
	}
	var logs bytes.Buffer
	h, err := newTracing(context.Background(), env, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	base := serve(t, env, h)
	postTraced(t, base+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	if err := h.shutdown(context.Background()); err != nil { // flushes
		t.Fatalf("flush: %v (logs %s)", err, logs.String())
	}

	mu.Lock()
	defer mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("collector: %v", problems)
	}
	spans := map[string]string{} // name -> trace id
	resource := map[string]string{}
	for _, req := range exported {
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				resource[kv.GetKey()] = kv.GetValue().GetStringValue()
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans[s.GetName()] = fmt.Sprintf("%x", s.GetTraceId())
				}
			}
		}
	}
	if spans["chat LLM"] != clientTraceID || spans["chat one-model"] != clientTraceID {
		t.Errorf("exported spans %v", spans)
	}
	if resource["service.name"] != "polygateway" || resource["deployment.environment.name"] != "test" {
		t.Errorf("resource %v", resource)
	}
}

func TestTracingEnabled(t *testing.T) {
	t.Parallel()
	const ep = "http://127.0.0.1:4318"
	for _, tc := range []struct {
		env     map[string]string
		on      bool
		problem string
	}{
		{map[string]string{}, false, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ep + "/v1/traces"}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "otlp"}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}, true, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_SDK_DISABLED": "true"}, false, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "none"}, false, ""},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"},
	} {
		on, err := tracingEnabled(tc.env)
		if on != tc.on || (err == nil) != (tc.problem == "") || (err != nil && !strings.Contains(err.Error(), tc.problem)) {
			t.Errorf("%v: on %v err %v", tc.env, on, err)
		}
	}
}

func names(spans tracetest.SpanStubs) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.Name
	}
	return out
}

// TestMalformedOTLPHeadersAreRefusedWithoutTheirText: the exporter's SDK
// prints an OTEL_EXPORTER_OTLP_HEADERS entry it cannot read as is (to
// stderr, outside the logs), credentials included, and then exports
// without it; the gateway refuses such a value at start and under -check,
// naming the key and the entry's position, never its text.
func TestMalformedOTLPHeadersAreRefusedWithoutTheirText(t *testing.T) {
	t.Parallel()
	const ep, secret = "http://127.0.0.1:4318", "sk-otlp-secret"
	for _, tc := range []struct {
		key, val string
		ok       bool
	}{
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization=Bearer%20" + secret, true},
		{"OTEL_EXPORTER_OTLP_HEADERS", " api-key = " + secret + " ,x-tenant=a,", true},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "api-key=" + secret, true},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization: Bearer " + secret, false},
		{"OTEL_EXPORTER_OTLP_HEADERS", "x-tenant=a,Authorization=Bearer%20" + secret + "%", false},
		{"OTEL_EXPORTER_OTLP_HEADERS", "Authorization Bearer " + secret + "=x", false},
		{"OTEL_EXPORTER_OTLP_TRACES_HEADERS", secret, false},
	} {
		on, err := tracingEnabled(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, tc.key: tc.val})
		switch {
		case tc.ok && (!on || err != nil):
			t.Errorf("%s: on %v err %v", tc.key, on, err)
		case !tc.ok && (on || err == nil || !strings.HasPrefix(err.Error(), tc.key+": ")):
			t.Errorf("%s: on %v err %v, want an error naming the key", tc.key, on, err)
		case err != nil && strings.Contains(err.Error(), secret):
			t.Errorf("%s: the error shows the value: %v", tc.key, err)
		}
	}
	// Without an endpoint nothing reads them.
	if on, err := tracingEnabled(map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": secret}); on || err != nil {
		t.Errorf("headers without an endpoint: on %v err %v", on, err)
	}
}
