package proxy

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
)

func TestAppendCompletionMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	cost, tiny, huge := 0.0123, 3e-9, 4e22
	ri := &reqInfo{id: "req-1", scope: "LLM", route: "gpt-4o"}
	for name, resp := range map[string]*polygateway.LLMResponse{
		"plain": {Content: "hello <b>&</b> \u2028 \"q\" \\ \n\t\x01 é 😀", Model: "m", SourceName: "s_1", CallID: "c1",
			Attempts: []string{"a_1", "s_1"}, PromptTokens: 3, CompletionTokens: 5, Latency: 1234567 * time.Nanosecond, UsageSource: "measured"},
		"thinking and cost": {Content: "x", Thinking: "hmm", Model: "m", Provider: "openai", Cost: &cost, TTFT: 42 * time.Millisecond,
			FinishReason: "length", CacheHit: true},
		"tool calls":        {Model: "m", ToolCalls: []polygateway.ToolCall{{ID: "call_1", Name: "f", Arguments: `{"a":1}`}, {ID: "call_2", Type: "function", Name: "g"}}},
		"content and tools": {Content: "sure", ToolCalls: []polygateway.ToolCall{{ID: "c", Name: "f"}}},
		"degraded":          {Content: "stale", Degraded: true, DegradedBy: "stale", Cost: &tiny},
		"huge cost":         {Content: "", Cost: &huge},
		"invalid utf-8":     {Content: "a\xffb", Model: "m\xfe"},
	} {
		want, err := json.Marshal(completion(ri, resp, 1700000000))
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendCompletion(nil, ri, resp, 1700000000)
		if err != nil {
			t.Fatal(err)
		}
		var w, g any
		if err := json.Unmarshal(want, &w); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &g); err != nil {
			t.Fatalf("%s: appendCompletion wrote invalid JSON %s: %v", name, got, err)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestWriteDeltaMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	a := &streamSink{out: sseWriter{w: rec, rc: http.NewResponseController(rec), timeout: time.Second}, id: "chatcmpl-x", created: 17}
	b := &streamSink{id: "chatcmpl-x", created: 17}
	pieces := []struct{ model, content, thinking string }{
		{"m1", "he said \"hi\" <now> & \u2028", ""}, {"m1", "", "thinking…"}, {"m2", "both", "too"}, {"m2", "", ""}, {"m\xff", "a\x00b\xfe", ""},
	}
	for _, p := range pieces {
		a.writeDelta(p.model, p.content, p.thinking)
		want, err := json.Marshal(b.delta(p.model, p.content, p.thinking))
		if err != nil {
			t.Fatal(err)
		}
		ev, ok := strings.CutPrefix(string(a.out.buf), "data: ")
		if !ok || !strings.HasSuffix(ev, "\n\n") {
			t.Fatalf("not an SSE event: %q", a.out.buf)
		}
		var w, g any
		_ = json.Unmarshal(want, &w)
		if err := json.Unmarshal([]byte(ev), &g); err != nil {
			t.Fatalf("invalid JSON %q: %v", ev, err)
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("got %s\nwant %s", ev, want)
		}
	}
}
