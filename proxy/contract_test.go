package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

func TestNonStreamingClientStillFailsOverOnASilentFirstTokenWithAWatchdog(t *testing.T) {
	t.Parallel()
	silent := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4).WithFirstTokenDelay(20*time.Second)))
	healthy := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4)))
	e := baseEnv().
		source("LLM", "primary", 1, silent.URL(), secretKey1, "primary-model", "TTFT_TIMEOUT_S", "0.3", "INTER_TOKEN_TIMEOUT_S", "0.2", "TIMEOUT_S", "30").
		source("LLM", "fallback", 2, healthy.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:  map[string]string{"gpt-4o": "LLM"},
	}})
	start := time.Now()
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the answer took %v: the silent first token was not cut by the watchdog", took)
	}
	if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,fallback_2" {
		t.Fatalf("X-PolyGateway-Attempts = %q, want the failover primary_1,fallback_2", got)
	}
	var sent map[string]any
	if err := json.Unmarshal(silent.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["stream"] != true {
		t.Errorf("a source with a TTFT watchdog was not asked to stream: %v", sent["stream"])
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Choices[0].Message.Content != fakeupstream.Tokens(4) {
		t.Fatalf("body %s (%v)", body, err)
	}
}

func TestPerRequestBufferCommitRescuesALateCutOnAFirstTokenGateway(t *testing.T) {
	t.Parallel()
	for name, how := range map[string]struct {
		extra string
		hdr   []string
	}{
		"header":     {"", []string{"X-PolyGateway-Stream-Commit", "buffer"}},
		"body field": {`,"polygateway":{"stream_commit":"buffer"}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(4).WithTokens(10)))
			fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(7)))
			f := sdkFixture(t, primary, fallback, proxy.Config{StreamCommit: proxy.CommitFirstToken})
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, how.extra), how.hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			events := sseEvents(body)
			if got := streamText(t, events); got != fakeupstream.Tokens(7) {
				t.Fatalf("client saw %q, want only the fallback's complete answer %q", got, fakeupstream.Tokens(7))
			}
			if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
				t.Fatalf("stream does not end cleanly: %v", events)
			}
			// A cut is retried once on the preferred source (it may have
			// been one bad connection), then the call fails over.
			if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,primary_1,fallback_2" {
				t.Errorf("X-PolyGateway-Attempts = %q, want primary_1,primary_1,fallback_2", got)
			}
			if bytes.Contains(primary.LastBody(), []byte("polygateway")) || bytes.Contains(primary.LastBody(), []byte("stream_commit")) {
				t.Errorf("the gateway's own field went upstream: %s", primary.LastBody())
			}
		})
	}
	// The server's default still holds without the override: the late cut
	// ends the stream with an error event.
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(4).WithTokens(10)))
	f := sdkFixture(t, primary, fake(t), proxy.Config{StreamCommit: proxy.CommitFirstToken})
	_, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
	if countErrorEvents(sseEvents(body)) != 1 {
		t.Fatalf("without the override a late cut should end in an error event: %s", body)
	}
}

func TestInvalidPerRequestCommitIs400(t *testing.T) {
	t.Parallel()
	up := fake(t)
	f := sdkFixture(t, up, fake(t), proxy.Config{})
	for name, tc := range map[string]struct {
		extra string
		hdr   []string
		param string
	}{
		"header":     {"", []string{"X-PolyGateway-Stream-Commit", "later"}, "X-PolyGateway-Stream-Commit"},
		"body field": {`,"polygateway":{"stream_commit":"later"}`, nil, "polygateway.stream_commit"},
		"not object": {`,"polygateway":"buffer"`, nil, "polygateway"},
	} {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, tc.extra), tc.hdr...)
		var e struct {
			Error struct {
				Type  string `json:"type"`
				Param string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	if up.Requests() != 0 {
		t.Errorf("an invalid commit policy reached the upstream (%d requests)", up.Requests())
	}
}

// errorShape is OpenAI's error envelope, every field present.
type errorShape struct {
	Error struct {
		Message *string `json:"message"`
		Type    *string `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// assertOpenAIError checks an OpenAI-shaped error body with code (and
// param when not "").
func assertOpenAIError(t *testing.T, body []byte, code, param string) {
	t.Helper()
	var e errorShape
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == nil || e.Error.Type == nil || e.Error.Code == nil {
		t.Fatalf("not an OpenAI error: %s (%v)", body, err)
	}
	if *e.Error.Code != code {
		t.Errorf("code = %q, want %q: %s", *e.Error.Code, code, body)
	}
	if param != "" && (e.Error.Param == nil || *e.Error.Param != param) {
		t.Errorf("param = %v, want %q: %s", e.Error.Param, param, body)
	}
	if !bytes.Contains(body, []byte(`"param":`)) {
		t.Errorf("the error has no param key: %s", body)
	}
}

func TestRetrieveModelIsOpenAIsModelObjectAnd404ForUnknownIDs(t *testing.T) {
	t.Parallel()
	f := sdkFixture(t, fake(t), fake(t), proxy.Config{})
	resp, body := f.do("GET", "/v1/models/gpt-4o", "")
	var m struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created *int64 `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &m) != nil || m.ID != "gpt-4o" || m.Object != "model" || m.Created == nil || m.OwnedBy == "" {
		t.Fatalf("GET /v1/models/gpt-4o: %d %s", resp.StatusCode, body)
	}
	resp, body = f.do("GET", "/v1/models/no-such-model", "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, body)
	}
	assertOpenAIError(t, body, "model_not_found", "model")
}

func TestWrongMethodOnAKnownPathIs405WithAllow(t *testing.T) {
	t.Parallel()
	f := sdkFixture(t, fake(t), fake(t), proxy.Config{})
	for _, tc := range []struct{ method, path, allow string }{
		{"GET", "/v1/chat/completions", "POST"},
		{"PUT", "/v1/embeddings", "POST"},
		{"POST", "/v1/models", "GET, HEAD"},
		{"DELETE", "/v1/models/gpt-4o", "GET, HEAD"},
		{"POST", "/healthz", "GET, HEAD"},
	} {
		resp, body := f.do(tc.method, tc.path, "")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tc.allow || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d Allow %q %s", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Allow"), body)
			continue
		}
		assertOpenAIError(t, body, "method_not_allowed", "")
	}
	resp, body := f.do("GET", "/v1/no-such-endpoint", "")
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Allow") != "" {
		t.Fatalf("unknown path: %d Allow %q %s", resp.StatusCode, resp.Header.Get("Allow"), body)
	}
	assertOpenAIError(t, body, "not_found", "")
}

func TestChatWithoutAModelIs400EvenWithADefaultScope(t *testing.T) {
	t.Parallel()
	up := fake(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	for _, body := range []string{
		`{"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":null,"messages":[{"role":"user","content":"hi"}]}`,
	} {
		resp, b := f.do("POST", "/v1/chat/completions", body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
			continue
		}
		assertOpenAIError(t, b, "missing_required_parameter", "model")
	}
	if up.Requests() != 0 {
		t.Errorf("a request without a model reached the upstream")
	}
	// Any named model still goes to the default scope.
	if resp, b := f.do("POST", "/v1/chat/completions", chatBody("anything", false, "")); resp.StatusCode != http.StatusOK {
		t.Fatalf("default scope: %d %s", resp.StatusCode, b)
	}
}

// TestEmbeddingsWithoutAModelIs400EvenWithADefaultScope: as on chat
// completions, an embeddings request without a model is OpenAI's 400
// missing_required_parameter — not a 404 for the model "" without a
// default scope, nor served by the default scope.
func TestEmbeddingsWithoutAModelIs400EvenWithADefaultScope(t *testing.T) {
	t.Parallel()
	emb := fake(t, fakeupstream.WithHandler("/embeddings", embeddingsHandler(t)))
	for _, def := range []string{"", "EMBED"} {
		f := serve(t, proxy.Config{Backends: proxy.Backends{
			Embedders:   map[string]proxy.Embedder{"EMBED": embedClient(t, emb.URL())},
			EmbedRoutes: map[string]string{"emb": "EMBED"}, DefaultEmbedScope: def,
		}})
		for _, body := range []string{`{"input":"hi"}`, `{"model":"","input":["hi"]}`, `{"model":null,"input":"hi"}`} {
			resp, b := f.do("POST", "/v1/embeddings", body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Errorf("default scope %q, %s: %d %s", def, body, resp.StatusCode, b)
				continue
			}
			assertOpenAIError(t, b, "missing_required_parameter", "model")
		}
		if resp, b := f.do("POST", "/v1/embeddings", `{"model":"emb","input":"hi"}`); resp.StatusCode != http.StatusOK {
			t.Fatalf("default scope %q, a routed model: %d %s", def, resp.StatusCode, b)
		}
	}
}

func TestUpstreamErrorParamReachesTheClient(t *testing.T) {
	t.Parallel()
	const upstreamErr = `{"error":{"message":"Invalid value for 'temperature': must be at most 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`
	for _, stream := range []bool{false, true} {
		up := fake(t, fakeupstream.WithBehavior(fakeupstream.Status(http.StatusBadRequest, upstreamErr, nil)))
		f := sdkFixture(t, up, fake(t), proxy.Config{})
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", stream, `,"temperature":7`))
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("stream=%v: %d %s", stream, resp.StatusCode, body)
		}
		assertOpenAIError(t, body, "invalid_value", "temperature")
	}
}

func TestEveryChunkOfAStreamNamesTheSameModel(t *testing.T) {
	t.Parallel()
	for _, commit := range []string{proxy.CommitFirstToken, proxy.CommitBuffer} {
		// The upstream reports a dated model name of its own.
		up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(6).WithModel("primary-model-2025-01-01")))
		f := sdkFixture(t, up, fake(t), proxy.Config{StreamCommit: commit})
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, `,"stream_options":{"include_usage":true}`))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", commit, resp.StatusCode, body)
		}
		models := map[string]int{}
		for _, ev := range sseEvents(body) {
			if ev == "[DONE]" {
				continue
			}
			var c struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal([]byte(ev), &c); err != nil {
				t.Fatalf("bad chunk %q", ev)
			}
			models[c.Model]++
		}
		if len(models) != 1 {
			t.Errorf("%s: chunks name %d models: %v", commit, len(models), models)
		}
		// One rule, streamed or not: the model the upstream reports (else
		// the source's MODEL).
		if models["primary-model-2025-01-01"] == 0 {
			t.Errorf("%s: chunks do not name the model the upstream reports: %v", commit, models)
		}
		resp, body = f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
		var whole struct {
			Model string `json:"model"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &whole) != nil || whole.Model != "primary-model-2025-01-01" {
			t.Errorf("%s: the answer not streamed names %q (%d %s), the stream %v", commit, whole.Model, resp.StatusCode, body, models)
		}
	}
}

func TestAccessLogRecordsTheWireStatusAndTheOutcome(t *testing.T) {
	t.Parallel()
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	f := sdkFixture(t, primary, fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10))), proxy.Config{})
	resp, _ := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""), "X-Request-ID", "cut-stream-1")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	failed, _ := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""), "X-Request-ID", "plain-1")
	if failed.StatusCode < 500 {
		t.Fatalf("a cut non-streamed answer on both sources: %d", failed.StatusCode)
	}
	lines := map[string]map[string]any{}
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			lines[m["request_id"].(string)] = m
		}
	}
	cut := lines["cut-stream-1"]
	if cut == nil || cut["status"] != float64(200) || cut["outcome"] != "stream_interrupted" || cut["level"] != "WARN" {
		t.Errorf("log of the cut stream = %v, want status 200, outcome stream_interrupted, level WARN", cut)
	}
	plain := lines["plain-1"]
	if plain == nil || plain["status"] != float64(failed.StatusCode) || plain["outcome"] == "ok" {
		t.Errorf("log of the failed plain request = %v", plain)
	}
	ok := map[string]any(nil)
	if resp, _ := f.do("GET", "/v1/models", "", "X-Request-ID", "models-1"); resp.StatusCode == http.StatusOK {
		for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
			if strings.Contains(l, `"request_id":"models-1"`) {
				_ = json.Unmarshal([]byte(l), &ok)
			}
		}
	}
	if ok == nil || ok["status"] != float64(200) || ok["outcome"] != "ok" {
		t.Errorf("log of a plain success = %v", ok)
	}
}

// A scope whose upstream throttles it (a 429 with a Retry-After the call
// will not wait for) answers 429 rate_limited with that Retry-After, as
// the errors table says: the client is over a quota, not facing an outage.
func TestAThrottledScopeIs429RateLimitedWithRetryAfter(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.RateLimited("30")))
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:  map[string]string{"gpt-4o": "LLM"},
	}})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	assertOpenAIError(t, body, "rate_limited", "")
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q, want the upstream's wait", ra)
	}
	t.Logf("Retry-After %s: %s", resp.Header.Get("Retry-After"), body)
}

// TestAHugeUnknownModelNameIsCutInTheErrorAndTheLog: a client's model name
// is bounded before the gateway quotes it back (the 404 body) or writes it
// to the access log, on chat, embeddings and the model lookup alike.
func TestAHugeUnknownModelNameIsCutInTheErrorAndTheLog(t *testing.T) {
	t.Parallel()
	f := sdkFixture(t, fake(t), fake(t), proxy.Config{})
	huge := strings.Repeat("m", 100_000)
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/chat/completions", chatBody(huge, false, "")},
		{"POST", "/v1/embeddings", `{"model":"` + huge + `","input":"x"}`},
		{"GET", "/v1/models/" + huge[:1500], ""}, // a longer path is refused with the headers (431)
	} {
		resp, body := f.do(tc.method, tc.path, tc.body)
		if resp.StatusCode != http.StatusNotFound || len(body) > 1024 {
			t.Errorf("%s %s: %d with %d bytes, want a 404 of at most 1 KiB", tc.method, tc.path[:min(len(tc.path), 30)], resp.StatusCode, len(body))
		}
	}
	for _, l := range strings.Split(strings.TrimSpace(f.logs.String()), "\n") {
		if len(l) > 4096 {
			t.Errorf("a log line of %d bytes: %.200s…", len(l), l)
		}
	}
}
