package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

func TestFailoverReportsTheAnsweringSource(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(500)))
	fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(3)))
	f := sdkFixture(t, primary, fallback, proxy.Config{})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var out struct {
		Model string `json:"model"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Gateway struct {
			Source   string   `json:"source"`
			Attempts []string `json:"attempts"`
		} `json:"gateway"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Model != "fallback-model" || out.Usage.CompletionTokens != 3 || out.Gateway.Source != "fallback_2" ||
		strings.Join(out.Gateway.Attempts, ",") != "primary_1,primary_1,fallback_2" {
		t.Errorf("answer = %s", body)
	}
	// The primary is retried once in its tier (a blip of a healthy source),
	// then the fallback answers.
	if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,primary_1,fallback_2" {
		t.Errorf("X-PolyGateway-Attempts = %q", got)
	}
}

func TestRoutingRewritesModelPerScope(t *testing.T) {
	llm := fake(t)
	fast := fake(t)
	e := baseEnv().
		source("LLM", "big", 1, llm.URL(), secretKey1, "big-model").
		source("FAST", "small", 1, fast.URL(), secretKey2, "small-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e), "FAST": chatClient(t, "FAST", e)},
		Routes:  map[string]string{"gpt-4o": "LLM", "fast": "FAST"},
	}})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("fast", false, `,"top_p":0.5,"seed":7,"stop":["x"],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","response_format":{"type":"text"},"max_completion_tokens":9`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if llm.Requests() != 0 || fast.Requests() != 1 {
		t.Fatalf("requests: LLM %d, FAST %d", llm.Requests(), fast.Requests())
	}
	var sent map[string]any
	if err := json.Unmarshal(fast.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["model"] != "small-model" {
		t.Errorf("upstream model = %v, want the source's MODEL", sent["model"])
	}
	for _, k := range []string{"top_p", "seed", "stop", "tools", "tool_choice", "response_format", "max_completion_tokens"} {
		if _, ok := sent[k]; !ok {
			t.Errorf("%s was not passed upstream: %v", k, sent)
		}
	}
	// /v1/models lists the routing table.
	_, body = f.do("GET", "/v1/models", "")
	if !strings.Contains(string(body), `"id":"fast"`) || !strings.Contains(string(body), `"id":"gpt-4o"`) {
		t.Errorf("/v1/models = %s", body)
	}
	// An unknown model without a default scope is 404 model_not_found.
	resp, body = f.do("POST", "/v1/chat/completions", chatBody("nope", false, ""))
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `"code":"model_not_found"`) || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
		t.Errorf("unknown model: %d %s", resp.StatusCode, body)
	}
}

func TestDefaultScopeServesUnknownModels(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("whatever", false, ""))
	if resp.StatusCode != http.StatusOK || up.Requests() != 1 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestRequestParsing(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, Routes: map[string]string{"m": "LLM"},
	}})
	// Multimodal parts, names, tool results and unknown fields are accepted.
	ok := `{"model":"m","messages":[
		{"role":"system","content":"s","name":"sys","x_unknown":1},
		{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA","detail":"low"}}]},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"answer","arguments":"{\"q\":1}"}}]},
		{"role":"tool","content":"42","tool_call_id":"call_1"}]}`
	resp, body := f.do("POST", "/v1/chat/completions", ok)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	var sent struct {
		Messages []map[string]any `json:"messages"`
	}
	if err := json.Unmarshal(up.LastBody(), &sent); err != nil || len(sent.Messages) != 4 {
		t.Fatalf("upstream body %s", up.LastBody())
	}
	parts, _ := sent.Messages[1]["content"].([]any)
	if len(parts) != 2 || !strings.Contains(fmt.Sprint(parts[1]), "data:image/png;base64,AAAA") || sent.Messages[3]["tool_call_id"] != "call_1" || sent.Messages[0]["name"] != "sys" {
		t.Errorf("upstream messages = %v", sent.Messages)
	}
	// The assistant's tool call goes upstream as it came in.
	calls, _ := sent.Messages[2]["tool_calls"].([]any)
	if len(calls) != 1 || !strings.Contains(fmt.Sprint(calls[0]), "answer") || !strings.Contains(fmt.Sprint(calls[0]), `{"q":1}`) {
		t.Errorf("assistant tool_calls upstream = %v", sent.Messages[2])
	}
	for name, tc := range map[string]struct {
		body, code string
	}{
		"not json":           {`{"model":`, "invalid_json"},
		"no messages":        {`{"model":"m"}`, "missing_required_parameter"},
		"empty messages":     {`{"model":"m","messages":[]}`, "empty_array"},
		"bad role":           {`{"model":"m","messages":[{"role":"wizard","content":"x"}]}`, "invalid_value"},
		"audio part":         {`{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{}}]}]}`, "unsupported_value"},
		"n=2":                {`{"model":"m","n":2,"messages":[{"role":"user","content":"x"}]}`, "unsupported_value"},
		"nameless tool call": {`{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]}]}`, "missing_required_parameter"},
	} {
		resp, body := f.do("POST", "/v1/chat/completions", tc.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"`+tc.code+`"`) || !strings.Contains(string(body), `"type":"invalid_request_error"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
}

func TestPerClientLimitsIsolateClients(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		ClientRate: 0.5, ClientBurst: 2,
	})
	for i := range 2 {
		if resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "X-Client-Id", "A"); resp.StatusCode != http.StatusOK {
			t.Fatalf("A request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "X-Client-Id", "A")
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"code":"rate_limit_exceeded"`) {
		t.Fatalf("A over its limit: %d %s", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After = %q, want 2 (one token at 0.5/s)", ra)
	}
	if resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "X-Client-Id", "B"); resp.StatusCode != http.StatusOK {
		t.Fatalf("B was throttled by A's traffic: %d %s", resp.StatusCode, body)
	}
	// Without X-Client-Id the peer address is the key: a fresh bucket here.
	if resp, _ := f.do("POST", "/v1/chat/completions", chatBody("m", false, "")); resp.StatusCode != http.StatusOK {
		t.Fatalf("peer-keyed client: %d", resp.StatusCode)
	}
	if up.Requests() != 4 {
		t.Errorf("upstream saw %d requests, want 4 (the throttled one never left)", up.Requests())
	}
}

func TestClientKeys(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		ClientKeys: []string{"client-key-1", "client-key-2"},
	})
	for _, auth := range []string{"", "Bearer wrong", "Basic client-key-1", "Bearer client-key-1x"} {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "Authorization", auth)
		if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), `"code":"invalid_api_key"`) {
			t.Errorf("auth %q: %d %s", auth, resp.StatusCode, body)
		}
	}
	if resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "Authorization", "Bearer client-key-2"); resp.StatusCode != http.StatusOK {
		t.Fatalf("valid key refused: %d %s", resp.StatusCode, body)
	}
	if resp, _ := f.do("GET", "/healthz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("/healthz needs no key, got %d", resp.StatusCode)
	}
	if up.Requests() != 1 {
		t.Errorf("upstream saw %d requests", up.Requests())
	}
}

func TestRequestID(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""), "X-Request-ID", "trace-42.a:b_c")
	if resp.Header.Get("X-Request-ID") != "trace-42.a:b_c" || !strings.Contains(string(body), `"request_id":"trace-42.a:b_c"`) {
		t.Errorf("request id not echoed: %v %s", resp.Header, body)
	}
	if !strings.Contains(f.logs.String(), `"request_id":"trace-42.a:b_c"`) {
		t.Errorf("request id not logged")
	}
	for _, bad := range []string{"has space", strings.Repeat("x", 200), "evil\u00e9"} {
		resp, _ := f.do("GET", "/v1/models", "", "X-Request-ID", bad)
		if got := resp.Header.Get("X-Request-ID"); got == bad || len(got) != 32 {
			t.Errorf("bad id %q became %q", bad, got)
		}
	}
}

func TestAdminBreakerResetNeedsToken(t *testing.T) {
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	e := baseEnv().source("LLM", "primary", 1, down.URL(), secretKey1, "primary-model").
		set("LLM__RETRY__MAX_ATTEMPTS", "1", "LLM__BREAKER__FAIL_THRESHOLD", "1", "LLM__BREAKER__COOLDOWN_S", "60")
	f := serve(t, proxy.Config{
		Backends:   proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		AdminToken: "admin-token-xyz",
	})
	f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if resp, body := f.do("GET", "/readyz", ""); resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the only breaker open: %d %s", resp.StatusCode, body)
	}
	for _, auth := range []string{"", "Bearer wrong", "Bearer admin-token-xy"} {
		resp, _ := f.do("POST", "/admin/breakers/primary_1/reset", "", "Authorization", auth)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("reset with %q: %d", auth, resp.StatusCode)
		}
	}
	resp, body := f.do("POST", "/admin/breakers/nosuch/reset", "", "Authorization", "Bearer admin-token-xyz")
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("unknown source: %d %s", resp.StatusCode, body)
	}
	resp, body = f.do("POST", "/admin/breakers/primary_1/reset?scope=LLM", "", "Authorization", "Bearer admin-token-xyz")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"reset":true`) {
		t.Fatalf("reset: %d %s", resp.StatusCode, body)
	}
	if resp, body := f.do("GET", "/readyz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz after reset: %d %s", resp.StatusCode, body)
	}
	if !strings.Contains(f.logs.String(), "breaker reset by admin") || strings.Contains(f.logs.String(), "admin-token-xyz") {
		t.Errorf("admin action log: %s", f.logs.String())
	}
}

func TestAdminDisabledWithoutToken(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}})
	for _, auth := range []string{"", "Bearer ", "Bearer anything"} {
		if resp, _ := f.do("POST", "/admin/breakers/primary_1/reset", "", "Authorization", auth); resp.StatusCode != http.StatusNotFound {
			t.Errorf("admin endpoint without a configured token answered %d", resp.StatusCode)
		}
	}
}

func TestProvidersHealthAndLogsNeverContainKeys(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.BadKey()))
	fallback := fake(t)
	emb := fake(t, fakeupstream.WithHandler("/embeddings", embeddingsHandler(t)))
	e := baseEnv().
		source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model", "RPM", "600", "MAX_CONCURRENCY", "4", "WEIGHT", "2").
		source("LLM", "fallback", 2, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	f := serve(t, proxy.Config{
		Backends: proxy.Backends{
			Clients:   map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
			Embedders: map[string]proxy.Embedder{"EMBED": embedClient(t, emb.URL())},
			Routes:    map[string]string{"gpt-4o": "LLM"}, EmbedRoutes: map[string]string{"emb": "EMBED"},
		},
		AdminToken: "admin-secret-token", ClientKeys: []string{"client-secret-key"},
	})
	auth := []string{"Authorization", "Bearer client-secret-key"}
	var all strings.Builder
	for _, req := range [][2]string{
		{"/v1/chat/completions", chatBody("gpt-4o", false, "")},
		{"/v1/chat/completions", chatBody("gpt-4o", true, "")},
		{"/v1/embeddings", `{"model":"emb","input":["x"]}`},
	} {
		resp, body := f.do("POST", req[0], req[1], auth...)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", req[0], resp.StatusCode, body)
		}
		fmt.Fprintf(&all, "%v %s\n", resp.Header, body)
	}
	resp, body := f.do("GET", "/v1/providers", "", auth...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/providers: %d %s", resp.StatusCode, body)
	}
	all.Write(body)
	var prov struct {
		Data []struct {
			Scope, Kind, Name string
			Priority          int
			Weight            float64
			Breaker           struct{ State string }
			Limits            map[string]int
			InFlight          *int `json:"in_flight"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &prov); err != nil || len(prov.Data) != 3 {
		t.Fatalf("providers %s (%v)", body, err)
	}
	p := prov.Data[0]
	if p.Name != "fallback_2" && p.Name != "primary_1" || p.InFlight == nil {
		t.Errorf("provider %+v", p)
	}
	for _, p := range prov.Data {
		if p.Name == "primary_1" && (p.Breaker.State != "open" || p.Weight != 2 || p.Limits["rpm"] != 600 || p.Limits["max_concurrency"] != 4) {
			t.Errorf("primary (401 → source dead → open) = %+v", p)
		}
		if p.Name == "fallback_2" && p.Priority != 1 {
			t.Errorf("fallback = %+v", p)
		}
	}
	_, body = f.do("GET", "/healthz", "")
	all.Write(body)
	if string(body) != `{"draining":false,"ok":true}` {
		t.Errorf("/healthz = %s", body)
	}
	_, body = f.do("GET", "/readyz", "", "Authorization", "Bearer admin-secret-token")
	all.Write(body)
	if !strings.Contains(string(body), `"primary_1":false`) || !strings.Contains(string(body), `"fallback_2":true`) {
		t.Errorf("/readyz with the admin token = %s", body)
	}
	all.WriteString(f.logs.String())
	for _, secret := range []string{secretKey1, secretKey2, secretEmbed, "admin-secret-token", "client-secret-key"} {
		if strings.Contains(all.String(), secret) {
			t.Errorf("a response or log line contains %q", secret)
		}
	}
	if !strings.Contains(f.logs.String(), `"path":"/v1/chat/completions"`) {
		t.Errorf("no request log lines: %s", f.logs.String())
	}
}

func TestOversizedBodyGets413(t *testing.T) {
	up := fake(t)
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{
		Backends:     proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		MaxBodyBytes: 1024,
	})
	big := chatBody("m", false, `,"pad":"`+strings.Repeat("x", 2048)+`"`)
	resp, body := f.do("POST", "/v1/chat/completions", big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), `"code":"request_too_large"`) {
		t.Errorf("declared length: %d %s", resp.StatusCode, body)
	}
	// Chunked, without a Content-Length: caught while reading.
	req, _ := http.NewRequest("POST", f.ts.URL+"/v1/chat/completions", io.MultiReader(strings.NewReader(big)))
	req.ContentLength = -1
	r2, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := io.ReadAll(r2.Body)
	r2.Body.Close()
	if r2.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked: %d %s", r2.StatusCode, b2)
	}
	if up.Requests() != 0 {
		t.Errorf("an oversized request went upstream")
	}
}

func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(400000)))
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model", "TIMEOUT_S", "120")
	f := serve(t, proxy.Config{
		Backends:          proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		WriteTimeout:      300 * time.Millisecond,
		ReadTimeout:       400 * time.Millisecond,
		ReadHeaderTimeout: 300 * time.Millisecond,
	})
	addr := f.ts.Listener.Addr().String()

	t.Run("reader that stops reading a stream", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.(*net.TCPConn).SetReadBuffer(4096)
		body := chatBody("m", true, "")
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		// Read the first line, then never again.
		if _, err := bufio.NewReader(conn).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		testkit.WaitFor(t, 15*time.Second, 5*time.Millisecond, "the stalled stream to be dropped", func() bool { return f.srv.InFlight() == 0 && up.InFlight() == 0 })
		t.Logf("stalled reader dropped after %v", time.Since(start).Round(time.Millisecond))
		testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the log line", func() bool { return strings.Contains(f.logs.String(), `"error_code":"client_write_failed"`) })
	})

	t.Run("body sent too slowly", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"model\":")
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		b, _ := io.ReadAll(conn) // the server answers and/or closes
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("slow body held the connection for %v", el)
		}
		if len(b) > 0 && !strings.Contains(string(b), "400") {
			t.Errorf("answer to a timed-out body: %q", b)
		}
	})

	t.Run("headers sent too slowly", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n")
		start := time.Now()
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, _ = io.ReadAll(conn)
		if el := time.Since(start); el > 3*time.Second {
			t.Fatalf("slow headers held the connection for %v", el)
		}
	})
	t.Run("long answers outlive ReadTimeout", func(t *testing.T) {
		slow := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(10).WithInterTokenDelay(100*time.Millisecond)))
		e := baseEnv().source("SLOW", "slow", 1, slow.URL(), secretKey1, "slow-model")
		if err := f.srv.Swap(proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"SLOW": chatClient(t, "SLOW", e)}, DefaultScope: "SLOW"}); err != nil {
			t.Fatal(err)
		}
		for _, stream := range []bool{true, false} {
			start := time.Now()
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", stream, ""))
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "tok9") || time.Since(start) < 900*time.Millisecond {
				t.Fatalf("stream=%v after %v: %d %s", stream, time.Since(start), resp.StatusCode, body)
			}
			if stream && lastEvent(sseEvents(body)) != "[DONE]" {
				t.Fatalf("long stream cut: %s", body)
			}
		}
	})
}

func TestSwapDrainsAndClosesReplacedClients(t *testing.T) {
	oldUp := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(10).WithInterTokenDelay(50*time.Millisecond).WithModel("old-model")))
	newUp := fake(t)
	oldClient := chatClient(t, "LLM", baseEnv().source("LLM", "old", 1, oldUp.URL(), secretKey1, "old-model"))
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": oldClient}, Routes: map[string]string{"m": "LLM"}}})

	type result struct {
		resp *http.Response
		body []byte
	}
	got := make(chan result, 1)
	go func() {
		resp, err := f.ts.Client().Post(f.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("m", true, "")))
		if err != nil {
			got <- result{}
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- result{resp, b}
	}()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the old stream to start", func() bool { return oldUp.InFlight() == 1 })

	// A bad generation is refused and changes nothing.
	if err := f.srv.Swap(proxy.Backends{Routes: map[string]string{"m": "NOPE"}}); err == nil {
		t.Fatal("Swap accepted a route to a missing scope")
	}
	newClient := chatClient(t, "LLM", baseEnv().source("LLM", "new", 1, newUp.URL(), secretKey2, "new-model"))
	if err := f.srv.Swap(proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": newClient}, Routes: map[string]string{"m": "LLM", "m2": "LLM"}}); err != nil {
		t.Fatal(err)
	}
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m2", false, ""))
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"model":"new-model"`) {
		t.Fatalf("after swap: %d %s", resp.StatusCode, body)
	}
	// The old client is still open while its stream runs.
	if _, err := oldClient.Chat(context.Background(), []polygateway.Message{polygateway.User("x")}); errors.Is(err, polygateway.ErrClientClosed) {
		t.Fatal("the replaced client was closed while a call still ran on it")
	}
	r := <-got
	if r.resp == nil || r.resp.StatusCode != http.StatusOK {
		t.Fatal("in-flight stream failed across the swap")
	}
	events := sseEvents(r.body)
	if streamText(t, events) != fakeupstream.Tokens(10) || lastEvent(events) != "[DONE]" {
		t.Fatalf("in-flight stream was disturbed: %v", events)
	}
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the replaced client to be closed", func() bool {
		_, err := oldClient.Chat(context.Background(), []polygateway.Message{polygateway.User("x")})
		return errors.Is(err, polygateway.ErrClientClosed)
	})
}

func TestShutdownDrainsInFlightStreams(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(10).WithInterTokenDelay(50*time.Millisecond)))
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}})
	got := startStream(f)
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the stream to start", func() bool { return up.InFlight() == 1 })
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- f.srv.Shutdown(ctx)
	}()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "draining", func() bool {
		resp, body := f.do("GET", "/readyz", "")
		return resp.StatusCode == http.StatusServiceUnavailable && string(body) == `{"ready":false}`
	})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), "server_shutting_down") {
		t.Errorf("new call while draining: %d %s", resp.StatusCode, body)
	}
	b := <-got
	events := sseEvents(b)
	if streamText(t, events) != fakeupstream.Tokens(10) || lastEvent(events) != "[DONE]" {
		t.Fatalf("drained stream incomplete: %v", events)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func TestShutdownDeadlineCutsStreamsHonestly(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(100).WithInterTokenDelay(50*time.Millisecond)))
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}})
	got := startStream(f)
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the stream to start", func() bool { return up.InFlight() == 1 })
	time.Sleep(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := f.srv.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want the deadline", err)
	}
	events := sseEvents(<-got)
	if lastEvent(events) == "[DONE]" || countErrorEvents(events) != 1 || !strings.Contains(lastEvent(events), "server_shutting_down") {
		t.Fatalf("cut stream: %v", events)
	}
}

func TestMaxInFlightShedsLoad(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(10).WithInterTokenDelay(30*time.Millisecond)))
	e := baseEnv().source("LLM", "big", 1, up.URL(), secretKey1, "big-model")
	f := serve(t, proxy.Config{
		Backends:    proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		MaxInFlight: 1,
	})
	done := make(chan int, 1)
	go func() {
		resp, err := f.ts.Client().Post(f.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("m", true, "")))
		if err != nil {
			done <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the first call", func() bool { return up.InFlight() == 1 })
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !strings.Contains(string(body), "server_overloaded") {
		t.Fatalf("over MaxInFlight: %d %s", resp.StatusCode, body)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("first call: %d", code)
	}
	if resp, _ := f.do("POST", "/v1/chat/completions", chatBody("m", false, "")); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the first call ended: %d", resp.StatusCode)
	}
}

// startStream posts a streaming chat request in the background; the channel
// receives the whole response body (nil if the request failed).
func startStream(f *fixture) <-chan []byte {
	got := make(chan []byte, 1)
	go func() {
		resp, err := f.ts.Client().Post(f.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("m", true, "")))
		if err != nil {
			got <- nil
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- b
	}()
	return got
}

// closeSignal is an embeddings client that only reports its Close.
type closeSignal struct {
	proxy.Embedder
	closed chan struct{}
}

func (c *closeSignal) Close() error {
	close(c.closed)
	return nil
}

// TestAClientKeptAcrossSwapsStaysOpenForTheOldestCall: a client that a
// second generation kept is still used by a call of the first; a third
// generation without it must not close it when the second drains, only
// once that call is done.
func TestAClientKeptAcrossSwapsStaysOpenForTheOldestCall(t *testing.T) {
	up, shared, hang := hangingLLM(t)
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": shared}, DefaultScope: "LLM"}})
	release := hold(t, f, up, []byte(chatBody("m", true, "")))
	defer release()

	// Generation two keeps the client (and has one of its own, which
	// tells when it has drained); generation three drops both.
	second := &closeSignal{closed: make(chan struct{})}
	if err := f.srv.Swap(proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": shared},
		Embedders: map[string]proxy.Embedder{"EMBED": second}, DefaultScope: "LLM"}); err != nil {
		t.Fatal(err)
	}
	other := chatClient(t, "LLM", baseEnv().source("LLM", "other", 1, fake(t).URL(), secretKey2, "other-model"))
	if err := f.srv.Swap(proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": other}, DefaultScope: "LLM"}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-second.closed: // generation two, which had no call, is retired
	case <-time.After(5 * time.Second):
		t.Fatal("the second generation's own client was never closed")
	}
	hang.Store(false)
	closed := func() bool {
		_, err := shared.Chat(context.Background(), []polygateway.Message{polygateway.User("x")})
		return errors.Is(err, polygateway.ErrClientClosed)
	}
	if closed() {
		t.Fatal("a client was closed while a call of an older generation still ran on it")
	}
	release()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the shared client to be closed", closed)
}

// valueEmbedder is an Embedder of a type == cannot compare (it holds a
// map): its Close is counted through the pointer it carries.
type valueEmbedder struct {
	proxy.Embedder
	tags   map[string]string
	closes *atomic.Int32
}

func (v valueEmbedder) Close() error {
	v.closes.Add(1)
	return nil
}

// TestAnEmbedderThatCannotBeComparedIsClosedWithItsGeneration: a client
// of a type == would panic on is no generation's shared client: swapping
// it out and shutting down close each copy once, without a panic.
func TestAnEmbedderThatCannotBeComparedIsClosedWithItsGeneration(t *testing.T) {
	var closes atomic.Int32
	e := valueEmbedder{tags: map[string]string{"a": "b"}, closes: &closes}
	f := serve(t, proxy.Config{Backends: proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": e}, DefaultEmbedScope: "EMBED"}})
	if err := f.srv.Swap(proxy.Backends{Embedders: map[string]proxy.Embedder{"EMBED": e}, DefaultEmbedScope: "EMBED"}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the first generation's copy to be closed", func() bool { return closes.Load() == 1 })
	if err := f.srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := closes.Load(); n != 2 {
		t.Fatalf("closed %d times, want 2 (once per generation)", n)
	}
}
