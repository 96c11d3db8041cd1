package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
	"github.com/polygateway/polygateway/telemetry"
)

// responsesGateway routes "gpt-4o" to scope LLM on up (without a stream
// watchdog) and "tools" to scope TOOLS on the tool-calling upstream.
func responsesGateway(t *testing.T, up *fakeupstream.Server, cfg proxy.Config) *fixture {
	t.Helper()
	tools := toolUpstream(t)
	off := []string{"TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0"}
	e := baseEnv().
		source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model", off...).
		source("TOOLS", "tools", 1, tools.URL+"/v1", secretKey1, "tool-model", off...)
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e), "TOOLS": chatClient(t, "TOOLS", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM", "tools": "TOOLS"}
	return serve(t, cfg)
}

// responseEvent is an SSE event of a Responses stream.
type responseEvent struct {
	name string // the event: line
	data map[string]any
	raw  string
}

// responseEvents splits a Responses stream into its events, checking that
// every one has its event: line, its type and the next sequence number.
func responseEvents(t *testing.T, body []byte) []responseEvent {
	t.Helper()
	var out []responseEvent
	for _, block := range strings.Split(strings.TrimSpace(string(body)), "\n\n") {
		var ev responseEvent
		for _, line := range strings.Split(block, "\n") {
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				ev.name = v
			} else if v, ok := strings.CutPrefix(line, "data: "); ok {
				ev.raw = v
			}
		}
		if err := json.Unmarshal([]byte(ev.raw), &ev.data); err != nil {
			t.Fatalf("event %q: %v", block, err)
		}
		if ev.name == "" || ev.data["type"] != ev.name {
			t.Fatalf("event %q: the event: line and the type differ", block)
		}
		if seq, _ := ev.data["sequence_number"].(float64); int(seq) != len(out) {
			t.Fatalf("event %d has sequence_number %v", len(out), ev.data["sequence_number"])
		}
		out = append(out, ev)
	}
	return out
}

// eventNames lists the names of evs.
func eventNames(evs []responseEvent) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.name
	}
	return out
}

func TestResponsesThroughTheGoSDK(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(5).WithThinking("let me think")))
	f := responsesGateway(t, up, proxy.Config{})
	client := f.sdk()
	var raw *http.Response
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model:           "gpt-4o",
		Instructions:    openai.String("be terse"),
		Input:           responses.ResponseNewParamsInputUnion{OfString: openai.String("hello")},
		MaxOutputTokens: openai.Int(64),
		Temperature:     openai.Float(0.2),
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	if resp.OutputText() != fakeupstream.Tokens(5) || resp.Status != "completed" || resp.Model != "primary-model" || !strings.HasPrefix(resp.ID, "resp_") {
		t.Fatalf("response %s", resp.RawJSON())
	}
	if u := resp.Usage; u.OutputTokens != 5 || u.InputTokens == 0 || u.TotalTokens != u.InputTokens+5 {
		t.Errorf("usage %+v", u)
	}
	if r := resp.Output[0].AsReasoning(); r.Type != "reasoning" || len(r.Summary) != 1 || r.Summary[0].Text != "let me think" {
		t.Errorf("the reasoning item is %s", resp.Output[0].RawJSON())
	}
	var body struct {
		OutputText string `json:"output_text"`
		Gateway    struct {
			Scope  string `json:"scope"`
			CallID string `json:"call_id"`
		} `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &body); err != nil || body.OutputText != fakeupstream.Tokens(5) || body.Gateway.Scope != "LLM" || body.Gateway.CallID == "" || "resp_"+body.Gateway.CallID != resp.ID {
		t.Errorf("output_text %q, gateway %+v (%v)", body.OutputText, body.Gateway, err)
	}
	for h, want := range map[string]string{"X-PolyGateway-Source": "primary_1", "X-PolyGateway-Attempts": "primary_1", "X-PolyGateway-Cache": "miss",
		"X-PolyGateway-Degraded": "false", "X-PolyGateway-Breaker": "closed", "X-PolyGateway-Route": "gpt-4o"} {
		if got := raw.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	// The upstream got a chat completion request: the instructions as the
	// system message, max_output_tokens as max_tokens.
	var sent struct {
		Messages    []struct{ Role, Content string }
		MaxTokens   int     `json:"max_tokens"`
		Temperature float64 `json:"temperature"`
	}
	at := up.Attempts()
	if len(at) != 1 || at[0].Path != "/v1/chat/completions" || json.Unmarshal(at[0].Body, &sent) != nil {
		t.Fatalf("upstream attempts %+v", at)
	}
	if len(sent.Messages) != 2 || sent.Messages[0].Role != "system" || sent.Messages[0].Content != "be terse" || sent.Messages[1].Content != "hello" || sent.MaxTokens != 64 || sent.Temperature != 0.2 {
		t.Errorf("upstream request %s", at[0].Body)
	}
}

func TestResponsesStreamThroughTheGoSDK(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(6).WithThinking("hmm")))
	f := responsesGateway(t, up, proxy.Config{})
	client := f.sdk()
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("hello", responses.EasyInputMessageRoleUser),
		}},
	})
	var text, reasoning string
	var completed *responses.Response
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.output_text.delta":
			text += ev.Delta
		case "response.reasoning_summary_text.delta":
			reasoning += ev.Delta
		case "response.completed":
			r := ev.Response
			completed = &r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if text != fakeupstream.Tokens(6) || reasoning != "hmm" || completed == nil || completed.OutputText() != text || completed.Usage.OutputTokens != 6 {
		t.Fatalf("text %q, reasoning %q, completed %+v", text, reasoning, completed)
	}
}

func TestResponsesToolCallsThroughTheGoSDK(t *testing.T) {
	t.Parallel()
	f := responsesGateway(t, fake(t), proxy.Config{})
	params := responses.ResponseNewParams{
		Model: "tools",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("weather in Paris?")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)},
	}
	client := f.sdk()
	resp, err := client.Responses.New(context.Background(), params)
	if err != nil {
		t.Fatal(err)
	}
	call := resp.Output[0].AsFunctionCall()
	if len(resp.Output) != 1 || call.Type != "function_call" || call.CallID != "call_1" || call.Name != "get_weather" || call.Arguments != `{"city":"Paris"}` || resp.Usage.OutputTokens != 7 {
		t.Fatalf("response %s", resp.RawJSON())
	}
	stream := client.Responses.NewStreaming(context.Background(), params)
	var args string
	var done responses.ResponseFunctionToolCall
	for stream.Next() {
		switch ev := stream.Current(); ev.Type {
		case "response.function_call_arguments.delta":
			args += ev.Delta
		case "response.output_item.done":
			done = ev.Item.AsFunctionCall()
		}
	}
	if err := stream.Err(); err != nil || args != `{"city":"Paris"}` || done.Name != "get_weather" || done.CallID != "call_1" || done.Status != "completed" {
		t.Fatalf("stream: %v; arguments %q, item %+v", err, args, done)
	}
}

// The Responses endpoint answers errors in OpenAI's envelope, as chat
// completions does.
func TestResponsesErrors(t *testing.T) {
	t.Parallel()
	rejects := fake(t, fakeupstream.WithBehavior(fakeupstream.Status(http.StatusBadRequest,
		`{"error":{"message":"Invalid value for 'temperature': must be at most 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, nil)))
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	e := baseEnv().
		source("REJECTS", "strict", 1, rejects.URL(), secretKey1, "strict-model").
		source("DOWN", "down", 1, down.URL(), secretKey1, "down-model").
		set("DOWN__RETRY__MAX_ATTEMPTS", "2", "DOWN__BREAKER__FAIL_THRESHOLD", "1", "DOWN__BREAKER__COOLDOWN_S", "7")
	cases := []struct {
		name, body          string
		status              int
		code, param         string
		retryAfter, secrets bool
	}{
		{"unknown model", `{"model":"nope","input":"hi"}`, 404, "model_not_found", "model", false, false},
		{"no model", `{"input":"hi"}`, 400, "missing_required_parameter", "model", false, false},
		{"malformed body", `{"model":"rejects","input":`, 400, "invalid_json", "", false, false},
		{"unknown field", `{"model":"rejects","input":"hi","top_logprobs":2}`, 400, "unknown_parameter", "top_logprobs", false, false},
		{"a stored response", `{"model":"rejects","input":"hi","previous_response_id":"resp_1"}`, 400, "unsupported_parameter", "previous_response_id", false, false},
		{"too large", `{"model":"rejects","input":"` + strings.Repeat("x", 5<<10) + `"}`, 413, "request_too_large", "", false, false},
		{"the upstream refuses", `{"model":"rejects","input":"hi","temperature":7}`, 400, "invalid_value", "temperature", false, true},
		{"no source", `{"model":"down","input":"hi"}`, 503, "", "", true, true},
		{"no source, streamed", `{"model":"down","input":"hi","stream":true}`, 503, "", "", true, true},
	}
	// The client's bucket holds one request per case, and refills never.
	cfg := proxy.Config{MaxBodyBytes: 4 << 10, ClientRate: 1e-9, ClientBurst: len(cases)}
	cfg.Clients = map[string]*polygateway.GatewayClient{"REJECTS": chatClient(t, "REJECTS", e), "DOWN": chatClient(t, "DOWN", e)}
	cfg.Routes = map[string]string{"rejects": "REJECTS", "down": "DOWN"}
	f := serve(t, cfg)
	for _, tc := range cases {
		resp, body := f.do("POST", "/v1/responses", tc.body)
		var env struct {
			Error struct {
				Message, Type string
				Code, Param   *string
			}
		}
		if resp.StatusCode != tc.status || json.Unmarshal(body, &env) != nil || env.Error.Message == "" || env.Error.Type == "" {
			t.Errorf("%s: %d %s, want %d with an error envelope", tc.name, resp.StatusCode, body, tc.status)
			continue
		}
		if tc.code != "" && (env.Error.Code == nil || *env.Error.Code != tc.code) || tc.param != "" && (env.Error.Param == nil || *env.Error.Param != tc.param) {
			t.Errorf("%s: %s, want code %q param %q", tc.name, body, tc.code, tc.param)
		}
		if (resp.Header.Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s: Retry-After %q", tc.name, resp.Header.Get("Retry-After"))
		}
		if strings.Contains(string(body), secretKey1) || strings.Contains(string(body), "127.0.0.1") {
			t.Errorf("%s: the error names a key or an address: %s", tc.name, body)
		}
	}
	// The client's own rate limit, before the body is read: 429 with Retry-After.
	resp, body := f.do("POST", "/v1/responses", `{"model":"rejects","input":"hi"}`)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(body), `"rate_limit_exceeded"`) {
		t.Fatalf("over the client's limit: %d %s, want 429 with Retry-After", resp.StatusCode, body)
	}
}

// A stream cut after part of the answer went out ends with
// response.failed and an error event, never response.completed; where a
// continuation is configured it completes the answer instead.
func TestResponsesStreamCutIsAFailureNeverACompletedResponse(t *testing.T) {
	t.Parallel()
	cut := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	e := baseEnv().source("LLM", "primary", 1, cut.URL(), secretKey1, "primary-model").set("LLM__RETRY__MAX_ATTEMPTS", "1")
	cfg := proxy.Config{}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	f := serve(t, cfg)
	resp, body := f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`)
	evs := responseEvents(t, body)
	names := eventNames(evs)
	if resp.StatusCode != http.StatusOK || len(evs) < 3 || names[len(names)-2] != "response.failed" || names[len(names)-1] != "error" {
		t.Fatalf("%d, events %v", resp.StatusCode, names)
	}
	var text string
	for _, ev := range evs {
		if ev.name == "response.completed" || ev.name == "response.incomplete" {
			t.Fatalf("a cut stream sent %s", ev.name)
		}
		if ev.name == "response.output_text.delta" {
			text += ev.data["delta"].(string)
		}
	}
	if text != fakeupstream.Tokens(3) {
		t.Errorf("relayed %q before the cut, want %q", text, fakeupstream.Tokens(3))
	}
	if !strings.Contains(f.logs.String(), `"path":"/v1/responses"`) || !strings.Contains(f.logs.String(), `"outcome":"stream_interrupted"`) {
		t.Errorf("the access log does not tell the cut: %s", f.logs.String())
	}
	// The Go SDK sees the failure.
	client := f.sdk()
	stream := client.Responses.NewStreaming(context.Background(), responses.ResponseNewParams{
		Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")},
	})
	for stream.Next() {
		if stream.Current().Type == "response.completed" {
			t.Fatal("the Go SDK saw response.completed")
		}
	}
	if stream.Err() == nil {
		t.Fatal("the Go SDK saw no error in a cut stream")
	}

	// With a source that continues a prefill, the answer completes whole.
	cf := continuationGateway(t, false)
	resp, body = cf.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`)
	evs = responseEvents(t, body)
	last := evs[len(evs)-1]
	text = ""
	for _, ev := range evs {
		if ev.name == "response.output_text.delta" {
			text += ev.data["delta"].(string)
		}
	}
	if resp.StatusCode != http.StatusOK || last.name != "response.completed" || text != fakeupstream.Tokens(60) ||
		last.data["response"].(map[string]any)["output_text"] != fakeupstream.Tokens(60) {
		t.Fatalf("continued stream: %d, last %s, text %q", resp.StatusCode, last.name, text)
	}
}

// Under the buffer commit policy a stream cut before the answer is whole
// fails over: the client gets the fallback's answer, complete.
func TestResponsesBufferedStreamFailsOverBeforeCommitting(t *testing.T) {
	t.Parallel()
	cut := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	fb := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4)))
	e := baseEnv().source("LLM", "primary", 1, cut.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 2, fb.URL(), secretKey2, "fallback-model", "PRIORITY", "1").
		set("LLM__RETRY__TIER_PATIENCE_S", "0")
	cfg := proxy.Config{}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	f := serve(t, cfg)
	resp, body := f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true,"polygateway":{"stream_commit":"buffer"}}`)
	evs := responseEvents(t, body)
	last := evs[len(evs)-1].data["response"].(map[string]any)
	if resp.StatusCode != http.StatusOK || evs[len(evs)-1].name != "response.completed" || last["output_text"] != fakeupstream.Tokens(4) || last["model"] != "fallback-model" {
		t.Fatalf("%d %v %v", resp.StatusCode, eventNames(evs), last)
	}
	if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,fallback_2" {
		t.Errorf("attempts %q", got)
	}
}

// An answer stopped at its token limit is an incomplete response, streamed
// or not.
func TestResponsesTokenLimitIsIncomplete(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b, _ := io.ReadAll(r.Body); strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"cut sh"},"finish_reason":null}]}`+"\n\n"+
				`data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\ndata: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"cut sh"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`)
	}))
	t.Cleanup(srv.Close)
	e := baseEnv().source("LLM", "primary", 1, srv.URL+"/v1", secretKey1, "primary-model", "TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0")
	cfg := proxy.Config{}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	f := serve(t, cfg)
	client := f.sdk()
	resp, err := client.Responses.New(context.Background(), responses.ResponseNewParams{
		Model: "gpt-4o", Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, MaxOutputTokens: openai.Int(2),
	})
	if err != nil || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" || resp.OutputText() != "cut sh" {
		t.Fatalf("%v %s", err, resp.RawJSON())
	}
	_, body := f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","stream":true}`)
	evs := responseEvents(t, body)
	last := evs[len(evs)-1]
	r := last.data["response"].(map[string]any)
	if last.name != "response.incomplete" || r["status"] != "incomplete" || r["incomplete_details"].(map[string]any)["reason"] != "max_output_tokens" {
		t.Fatalf("last event %s %v", last.name, r)
	}
}

// POST /v1/responses is the chat route under another face: the same
// scope's budget counts calls of both endpoints and refuses both, the
// call writes its telemetry row, the access log has its line, fallbacks
// and client keys apply.
func TestResponsesShareTheChatRoutesGovernance(t *testing.T) {
	t.Parallel()
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"primary-model": {"input_per_1m": 0, "output_per_1m": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	// Every answer is 1000 tokens, 2000 micro-USD: the budget holds two.
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(1000)))
	backup := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(2)))
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model").
		source("BACKUP", "backup", 1, backup.URL(), secretKey2, "backup-model").
		set("PGW_PRICING_PATH", prices, "LLM__BUDGET__USD", "0.0041", "LLM__BUDGET__WINDOW_S", "3600", "LLM__RETRY__MAX_ATTEMPTS", "1")
	rows := telemetry.NewMemory()
	cfg := proxy.Config{ClientKeys: []string{"client-key"}}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e, polygateway.WithTelemetry(rows)), "BACKUP": chatClient(t, "BACKUP", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM", "backup": "BACKUP"}
	f := serve(t, cfg)
	auth := []string{"Authorization", "Bearer client-key"}
	if resp, _ := f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi"}`); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the client key: %d", resp.StatusCode)
	}
	if resp, body := f.do("POST", "/v1/chat/completions", `{"model":"gpt-4o","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`, auth...); resp.StatusCode != http.StatusOK {
		t.Fatalf("chat: %d %s", resp.StatusCode, body)
	}
	resp, body := f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","max_output_tokens":1000}`, append(auth, "X-Request-ID", "req-responses-1")...)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("responses: %d %s", resp.StatusCode, body)
	}
	var answer struct {
		Gateway struct {
			CallID string `json:"call_id"`
		} `json:"gateway"`
	}
	_ = json.Unmarshal(body, &answer)
	// The scope's budget is spent by both endpoints: each refuses now.
	for _, req := range [][2]string{
		{"/v1/responses", `{"model":"gpt-4o","input":"hi","max_output_tokens":1000}`},
		{"/v1/chat/completions", `{"model":"gpt-4o","max_tokens":1000,"messages":[{"role":"user","content":"hi"}]}`},
	} {
		resp, body := f.do("POST", req[0], req[1], auth...)
		if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(body), `"budget_exhausted"`) || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s over the budget: %d %s", req[0], resp.StatusCode, body)
		}
	}
	// Its telemetry row, with the request id as its session.
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the telemetry row", func() bool {
		for _, r := range rows.Records() {
			if r.CallID == answer.Gateway.CallID {
				return true
			}
		}
		return false
	})
	for _, r := range rows.Records() {
		if r.CallID == answer.Gateway.CallID && (r.Scope != "LLM" || r.SessionID != "req-responses-1" || r.CompletionTokens != 1000 || r.Cost == nil) {
			t.Errorf("telemetry row %+v", r)
		}
	}
	// Its access log line.
	var line map[string]any
	for _, l := range strings.Split(f.logs.String(), "\n") {
		if strings.Contains(l, `"request_id":"req-responses-1"`) && strings.Contains(l, `"msg":"request"`) {
			_ = json.Unmarshal([]byte(l), &line)
		}
	}
	if line["path"] != "/v1/responses" || line["status"] != 200.0 || line["model"] != "gpt-4o" || line["scope"] != "LLM" || line["source"] != "primary_1" || line["outcome"] != "ok" {
		t.Errorf("access log line %v", line)
	}
	// The spent scope's route falls back to another one named in the request.
	resp, body = f.do("POST", "/v1/responses", `{"model":"gpt-4o","input":"hi","max_output_tokens":1000,"fallbacks":["backup"]}`, auth...)
	var fell struct {
		OutputText string `json:"output_text"`
		Model      string
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &fell) != nil || fell.OutputText != fakeupstream.Tokens(2) || fell.Model != "backup-model" || resp.Header.Get("X-PolyGateway-Route") != "backup" {
		t.Fatalf("fallback: %d %s", resp.StatusCode, body)
	}
}
