package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// routed is a gateway with three chat routes, each its own scope of one
// source: "a" (scope A, source alpha_1, model alpha-model), "b" (B,
// beta_1, beta-model) and "c" (C, gamma_1, gamma-model).
type routed struct {
	*fixture
	a, b, c *fakeupstream.Server
	// logged receives the message of every log record.
	logged chan string
}

func threeRoutes(t *testing.T, a, b, c fakeupstream.Behavior, cfg proxy.Config) *routed {
	t.Helper()
	rt := &routed{
		a: fake(t, fakeupstream.WithBehavior(a)), b: fake(t, fakeupstream.WithBehavior(b)), c: fake(t, fakeupstream.WithBehavior(c)),
		logged: make(chan string, 64),
	}
	e := baseEnv().
		source("A", "alpha", 1, rt.a.URL(), secretKey1, "alpha-model").
		source("B", "beta", 1, rt.b.URL(), secretKey2, "beta-model").
		source("C", "gamma", 1, rt.c.URL(), secretKey2, "gamma-model")
	cfg.Clients = map[string]*polygateway.GatewayClient{"A": chatClient(t, "A", e), "B": chatClient(t, "B", e), "C": chatClient(t, "C", e)}
	cfg.Routes = map[string]string{"a": "A", "b": "B", "c": "C", "a-too": "A"}
	logs := &testkit.Buffer{}
	cfg.Logger = slog.New(notifyHandler{slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}), rt.logged})
	rt.fixture = serve(t, cfg)
	rt.logs = logs
	return rt
}

// notifyHandler passes records on and sends each one's message to ch
// (dropping it when ch is full).
type notifyHandler struct {
	slog.Handler
	ch chan string
}

func (h notifyHandler) Handle(ctx context.Context, r slog.Record) error {
	err := h.Handler.Handle(ctx, r)
	select {
	case h.ch <- r.Message:
	default:
	}
	return err
}

func (h notifyHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return notifyHandler{h.Handler.WithAttrs(as), h.ch}
}

func (h notifyHandler) WithGroup(name string) slog.Handler {
	return notifyHandler{h.Handler.WithGroup(name), h.ch}
}

// accessLine returns the access log line of the request with id.
func (rt *routed) accessLine(t *testing.T, id string) map[string]any {
	t.Helper()
	for _, line := range strings.Split(rt.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "request" && m["request_id"] == id {
			return m
		}
	}
	t.Fatalf("no access log line for %s in\n%s", id, rt.logs.String())
	return nil
}

// requests returns the upstream requests of a, b and c.
func (rt *routed) requests() [3]int { return [3]int{rt.a.Requests(), rt.b.Requests(), rt.c.Requests()} }

// noFallbacksUpstream fails when any upstream body carries a fallbacks
// field, at the top level or in extra_body.
func (rt *routed) noFallbacksUpstream(t *testing.T) {
	t.Helper()
	for _, up := range []*fakeupstream.Server{rt.a, rt.b, rt.c} {
		for _, body := range up.Bodies() {
			var sent map[string]json.RawMessage
			if err := json.Unmarshal(body, &sent); err != nil {
				t.Fatalf("upstream body %s: %v", body, err)
			}
			if _, ok := sent["fallbacks"]; ok || bytes.Contains(sent["extra_body"], []byte("fallbacks")) {
				t.Errorf("fallbacks sent upstream: %s", body)
			}
		}
	}
}

// repeat is n times name.
func repeat(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

type gatewayObject struct {
	Scope    string   `json:"scope"`
	Route    string   `json:"route"`
	Source   string   `json:"source"`
	Attempts []string `json:"attempts"`
}

// lastGateway returns the gateway object of a stream's chunks.
func lastGateway(t *testing.T, events []string) gatewayObject {
	t.Helper()
	for i := len(events) - 1; i >= 0; i-- {
		var c struct {
			Gateway *gatewayObject `json:"gateway"`
		}
		if json.Unmarshal([]byte(events[i]), &c) == nil && c.Gateway != nil {
			return *c.Gateway
		}
	}
	t.Fatalf("no gateway object in %v", events)
	return gatewayObject{}
}

// fallbackAnswer reads the model, the text and the gateway object of a
// chat answer that beta-model gave, streamed or not; every chunk of a
// stream must name beta-model.
func fallbackAnswer(t *testing.T, stream bool, body []byte) (model, content string, gw gatewayObject) {
	t.Helper()
	if stream {
		events := sseEvents(body)
		if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
			t.Fatalf("stream does not end cleanly: %v", events)
		}
		for _, ev := range events[:len(events)-1] {
			var c struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal([]byte(ev), &c)
			if c.Model != "beta-model" {
				t.Errorf("chunk %s names model %q, want beta-model", ev, c.Model)
			}
		}
		return "beta-model", streamText(t, events), lastGateway(t, events)
	}
	var out struct {
		Model   string `json:"model"`
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
		Gateway gatewayObject `json:"gateway"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Model, out.Choices[0].Message.Content, out.Gateway
}

func TestFallbacksAnswerFromTheNextRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stream bool
		a      fakeupstream.Behavior
		extra  string
	}{
		{"non-streaming, top level", false, fakeupstream.ServerError(503), `,"fallbacks":["b"]`},
		{"non-streaming, extra_body", false, fakeupstream.ServerError(503), `,"extra_body":{"fallbacks":["b"]}`},
		{"stream failing before its first delta, top level", true, fakeupstream.CutAfter(0), `,"fallbacks":["b"]`},
		{"stream failing before its first delta, extra_body", true, fakeupstream.CutAfter(0), `,"extra_body":{"fallbacks":["b"]}`},
		{"stream of 503s", true, fakeupstream.ServerError(503), `,"fallbacks":["a-too","b","b"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt := threeRoutes(t, tc.a, fakeupstream.OK().WithTokens(4), fakeupstream.OK(), proxy.Config{})
			resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", tc.stream, tc.extra), "X-Request-ID", "req-fb")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if rt.a.Requests() == 0 || rt.b.Requests() != 1 || rt.c.Requests() != 0 {
				t.Fatalf("upstream requests a, b, c = %v, want A's then one to B", rt.requests())
			}
			wantAttempts := append(repeat("alpha_1", rt.a.Requests()), "beta_1")
			model, content, gw := fallbackAnswer(t, tc.stream, body)
			if model != "beta-model" || content != fakeupstream.Tokens(4) {
				t.Errorf("answer from model %q: %q, want beta-model's %q", model, content, fakeupstream.Tokens(4))
			}
			if gw.Route != "b" || gw.Scope != "B" || gw.Source != "beta_1" || strings.Join(gw.Attempts, ",") != strings.Join(wantAttempts, ",") {
				t.Errorf("gateway = %+v, want route b, scope B, source beta_1, attempts %v", gw, wantAttempts)
			}
			if got := resp.Header.Get("X-PolyGateway-Route"); got != "b" {
				t.Errorf("X-PolyGateway-Route = %q, want b", got)
			}
			if got := resp.Header.Get("X-PolyGateway-Attempts"); got != strings.Join(wantAttempts, ",") {
				t.Errorf("X-PolyGateway-Attempts = %q, want %q", got, strings.Join(wantAttempts, ","))
			}
			if got := resp.Header.Get("X-PolyGateway-Source"); got != "beta_1" {
				t.Errorf("X-PolyGateway-Source = %q", got)
			}
			rt.noFallbacksUpstream(t)
			line := rt.accessLine(t, "req-fb")
			if line["routes"] != "a,b" || line["scope"] != "B" || line["model"] != "a" || line["outcome"] != "ok" {
				t.Errorf("access log line %v, want routes a,b, scope B, model a, ok", line)
			}
		})
	}
}

func TestFallbacksRouteOfAnAnswerWithout(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.OK(), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
	for _, stream := range []bool{false, true} {
		resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", stream, `,"fallbacks":["b"]`))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Route") != "a" || !bytes.Contains(body, []byte(`"route":"a"`)) {
			t.Errorf("stream %v: status %d, route header %q: %s", stream, resp.StatusCode, resp.Header.Get("X-PolyGateway-Route"), body)
		}
		resp, body = rt.do("POST", "/v1/chat/completions", chatBody("c", stream, ""))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Route") != "c" || !bytes.Contains(body, []byte(`"route":"c"`)) {
			t.Errorf("stream %v, no fallbacks: status %d, route header %q: %s", stream, resp.StatusCode, resp.Header.Get("X-PolyGateway-Route"), body)
		}
	}
	if got := rt.requests(); got != [3]int{2, 0, 2} {
		t.Errorf("upstream requests a, b, c = %v", got)
	}
}

func TestFallbacksNeverForARejectedRequest(t *testing.T) {
	t.Parallel()
	rejection := `{"error":{"message":"temperature is out of range","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	for _, stream := range []bool{false, true} {
		rt := threeRoutes(t, fakeupstream.Status(400, rejection, nil), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
		resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", stream, `,"fallbacks":["b","c"]`))
		var e struct {
			Error struct {
				Param string `json:"param"`
				Code  string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != "invalid_value" || e.Error.Param != "temperature" {
			t.Errorf("stream %v: status %d: %s, want A's 400", stream, resp.StatusCode, body)
		}
		if got := rt.requests(); got != [3]int{1, 0, 0} {
			t.Errorf("stream %v: upstream requests a, b, c = %v, want only A's", stream, got)
		}
		if resp.Header.Get("X-PolyGateway-Route") != "" {
			t.Errorf("stream %v: an error names route %q", stream, resp.Header.Get("X-PolyGateway-Route"))
		}
	}
}

func TestFallbacksNeverAfterTheStreamBegan(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.CutAfter(3).WithTokens(10), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
	resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", true, `,"fallbacks":["b"]`), "X-Request-ID", "req-cut")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if got := streamText(t, events); got != fakeupstream.Tokens(3) || countErrorEvents(events) != 1 || strings.Contains(string(body), "[DONE]") {
		t.Errorf("stream %v, want A's 3 tokens and an error event", events)
	}
	if rt.b.Requests() != 0 || rt.c.Requests() != 0 {
		t.Errorf("a stream that had begun fell back: upstream requests a, b, c = %v", rt.requests())
	}
	if resp.Header.Get("X-PolyGateway-Route") != "a" {
		t.Errorf("X-PolyGateway-Route = %q, want a (the route that began the stream)", resp.Header.Get("X-PolyGateway-Route"))
	}
	if line := rt.accessLine(t, "req-cut"); line["routes"] != "a" || line["outcome"] != "stream_interrupted" {
		t.Errorf("access log line %v", line)
	}
}

func TestFallbacksBufferedStreamFallsBackAfterACut(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.CutAfter(3).WithTokens(10), fakeupstream.OK().WithTokens(5), fakeupstream.OK(), proxy.Config{})
	resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", true, `,"fallbacks":["b"],"polygateway":{"stream_commit":"buffer"}`))
	events := sseEvents(body)
	if resp.StatusCode != http.StatusOK || streamText(t, events) != fakeupstream.Tokens(5) || lastEvent(events) != "[DONE]" {
		t.Fatalf("status %d, stream %v, want B's whole answer", resp.StatusCode, events)
	}
	if gw := lastGateway(t, events); gw.Route != "b" || rt.b.Requests() != 1 {
		t.Errorf("gateway %+v, requests %v", gw, rt.requests())
	}
}

func TestFallbacksEveryRouteFailing(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		rt := threeRoutes(t, fakeupstream.ServerError(503), fakeupstream.ServerError(500), fakeupstream.Reset(), proxy.Config{})
		id := "req-all-" + map[bool]string{false: "plain", true: "stream"}[stream]
		resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", stream, `,"fallbacks":["b","c"]`), "X-Request-ID", id)
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    string `json:"code"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		// The last route's error: scope C's, its source reset.
		if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Error.Message, "scope C") ||
			!strings.Contains(e.Error.Message, "gamma_1=network_error") || strings.Contains(e.Error.Message, "alpha_1") {
			t.Errorf("stream %v: status %d: %s, want scope C's error", stream, resp.StatusCode, body)
		}
		n := rt.requests()
		if n[0] == 0 || n[1] == 0 || n[2] == 0 {
			t.Fatalf("stream %v: upstream requests a, b, c = %v, want every route tried", stream, n)
		}
		want := strings.Join(append(append(repeat("alpha_1", n[0]), repeat("beta_1", n[1])...), repeat("gamma_1", n[2])...), ",")
		if got := resp.Header.Get("X-PolyGateway-Attempts"); got != want {
			t.Errorf("stream %v: X-PolyGateway-Attempts = %q, want %q", stream, got, want)
		}
		if resp.Header.Get("X-PolyGateway-Route") != "" {
			t.Errorf("stream %v: a failure names route %q", stream, resp.Header.Get("X-PolyGateway-Route"))
		}
		if line := rt.accessLine(t, id); line["routes"] != "a,b,c" || line["scope"] != "C" || line["status"] != float64(503) {
			t.Errorf("stream %v: access log line %v", stream, line)
		}
	}
}

func TestFallbacksStopAtARejectionOfALaterRoute(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.ServerError(503), fakeupstream.ContextLength(), fakeupstream.OK(), proxy.Config{})
	resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", false, `,"fallbacks":["b","c"]`))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "context_length_exceeded") {
		t.Errorf("status %d: %s, want B's rejection", resp.StatusCode, body)
	}
	if rt.c.Requests() != 0 {
		t.Errorf("a rejection fell back: upstream requests a, b, c = %v", rt.requests())
	}
}

// TestFallbacksShareTheClientsDeadline: a first route that takes the
// client's whole deadline leaves nothing to the next one, which is never
// called after the client gave up.
func TestFallbacksShareTheClientsDeadline(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		rt := threeRoutes(t, fakeupstream.Hang(), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		req, err := http.NewRequestWithContext(ctx, "POST", rt.ts.URL+"/v1/chat/completions", strings.NewReader(chatBody("a", stream, `,"fallbacks":["b","c"]`)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-ID", "req-deadline")
		resp, err := rt.ts.Client().Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			t.Fatalf("stream %v: the client got %d before its deadline", stream, resp.StatusCode)
		}
		// The server is done with the request when it has logged it.
		for msg := range rt.logged {
			if msg == "request" {
				break
			}
		}
		if got := rt.requests(); got[1] != 0 || got[2] != 0 {
			t.Errorf("stream %v: upstream requests a, b, c = %v, want no fallback after the client's deadline", stream, got)
		}
		if line := rt.accessLine(t, "req-deadline"); line["outcome"] != "client_closed_request" || line["routes"] != "a" {
			t.Errorf("stream %v: access log line %v", stream, line)
		}
	}
}

func TestFallbacksValidatedBeforeAnyUpstreamRequest(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.OK(), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
	for _, tc := range []struct {
		extra, param, code string
	}{
		{`,"fallbacks":["b","typo"]`, "fallbacks[1]", "model_not_found"},
		{`,"extra_body":{"fallbacks":["typo"]}`, "extra_body.fallbacks[0]", "model_not_found"},
		{`,"fallbacks":["a","typo"]`, "fallbacks[1]", "model_not_found"},
		{`,"fallbacks":["b","c","b","c","b","c","b","c","b"]`, "fallbacks", "array_above_max_length"},
		{`,"fallbacks":"b"`, "fallbacks", "invalid_type"},
		{`,"fallbacks":["b",{"model":"c"}]`, "fallbacks[1]", "invalid_type"},
		{`,"extra_body":{"fallbacks":{"b":1}}`, "extra_body.fallbacks", "invalid_type"},
		{`,"fallbacks":[""]`, "fallbacks[0]", "invalid_value"},
	} {
		for _, stream := range []bool{false, true} {
			resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", stream, tc.extra))
			var e struct {
				Error struct {
					Type  string `json:"type"`
					Param string `json:"param"`
					Code  string `json:"code"`
				} `json:"error"`
			}
			if err := json.Unmarshal(body, &e); err != nil || resp.StatusCode != http.StatusBadRequest ||
				e.Error.Param != tc.param || e.Error.Code != tc.code || e.Error.Type != "invalid_request_error" {
				t.Errorf("%s (stream %v): status %d: %s, want 400 %s naming %s", tc.extra, stream, resp.StatusCode, body, tc.code, tc.param)
			}
		}
	}
	if got := rt.requests(); got != [3]int{} {
		t.Errorf("upstream requests a, b, c = %v, want none", got)
	}
}

func TestFallbacksNotSentUpstream(t *testing.T) {
	t.Parallel()
	rt := threeRoutes(t, fakeupstream.OK(), fakeupstream.OK(), fakeupstream.OK(), proxy.Config{})
	for _, extra := range []string{
		`,"fallbacks":["b"]`,
		`,"extra_body":{"fallbacks":["b"]}`,
		`,"extra_body":{"top_k":5,"fallbacks":["b"]},"fallbacks":["c"]`,
	} {
		if resp, body := rt.do("POST", "/v1/chat/completions", chatBody("a", false, extra)); resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d: %s", extra, resp.StatusCode, body)
		}
	}
	rt.noFallbacksUpstream(t)
	bodies := rt.a.Bodies()
	var sent map[string]json.RawMessage
	if err := json.Unmarshal(bodies[len(bodies)-1], &sent); err != nil {
		t.Fatal(err)
	}
	if string(sent["extra_body"]) != `{"top_k":5}` {
		t.Errorf("extra_body sent upstream as %s, want its other members", sent["extra_body"])
	}
	var first map[string]json.RawMessage
	if err := json.Unmarshal(bodies[1], &first); err != nil || first["extra_body"] != nil {
		t.Errorf("an extra_body of only fallbacks went upstream: %s", bodies[1])
	}
}

func TestFallbacksRefusedOnEmbeddings(t *testing.T) {
	t.Parallel()
	up := fake(t)
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Embedders:   map[string]proxy.Embedder{"EMBED": embedClient(t, up.URL())},
		EmbedRoutes: map[string]string{"emb": "EMBED"},
	}})
	resp, body := f.do("POST", "/v1/embeddings", `{"model":"emb","input":"x","fallbacks":["other"]}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"param":"fallbacks"`) {
		t.Errorf("status %d: %s, want 400 naming fallbacks", resp.StatusCode, body)
	}
	if up.Requests() != 0 {
		t.Errorf("%d upstream requests", up.Requests())
	}
	if resp, body := f.do("POST", "/v1/embeddings", `{"model":"emb","input":"x","fallbacks":null}`); resp.StatusCode != http.StatusOK {
		t.Errorf("a null fallbacks: status %d: %s", resp.StatusCode, body)
	}
}
