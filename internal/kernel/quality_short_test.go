package kernel

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/transport"
)

// serving returns a transport and a source whose upstream answers every
// chat request with body, as ctype.
func serving(t *testing.T, ctype, body string) (*transport.Client, *core.SourceConfig) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", ctype)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	tc := transport.New(transport.Config{})
	t.Cleanup(func() { tc.Close() })
	return tc, &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: srv.URL + "/v1", APIKey: "sk-k", Model: "m", Timeout: 10 * time.Second}
}

const (
	jsonType = "application/json"
	sseType  = "text/event-stream"
)

// completion is a non-streamed answer whose message is message.
func completion(message, finish string) string {
	return `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":` + message + `,"finish_reason":"` + finish + `"}]}`
}

// TestTheGuardJudgesLegitimatelyShortAnswers sends answers that are short
// or empty through the chat upstream with the guard on (MIN_CHARS 10),
// streamed and not: an answer made only of tool calls is taken; one whose
// content is only a <think> block or reasoning is empty, as is a refusal
// whatever field carries it, and one cut at its token limit is refused
// even when it holds a tool call — each a low_quality ResultInvalidError
// that returns the answer beside it.
func TestTheGuardJudgesLegitimatelyShortAnswers(t *testing.T) {
	t.Parallel()
	const toolCall = `{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}`
	cases := []struct {
		name, ctype, body string
		stream            bool
		bad               string // the start of the guard's message; "" = taken
	}{
		{"tool calls only", jsonType, completion(`{"role":"assistant","content":null,"tool_calls":[`+toolCall+`]}`, "tool_calls"), false, ""},
		{"tool calls only, streamed", sseType, `data: {"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[` + toolCall + `]}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n", true, ""},
		{"tool calls cut at the token limit", jsonType, completion(`{"role":"assistant","content":null,"tool_calls":[`+toolCall+`]}`, "length"), false, "the answer was cut"},
		{"a <think> block only", jsonType, completion(`{"role":"assistant","content":"<think>a long thought about it</think>"}`, "stop"), false, "the answer has 0 characters"},
		{"reasoning only, streamed", sseType, `data: {"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"a long thought about it"}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true, "the answer has 0 characters"},
		{"a refusal field", jsonType, completion(`{"role":"assistant","content":null,"refusal":"I'm sorry, but I can't help with that."}`, "stop"), false, "the answer is a refusal"},
		{"a short streamed answer", sseType, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Paris."}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true, "the answer has 6 characters, fewer than 10"},
		{"a streamed answer", sseType, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"Paris is the capital."}}]}` + "\n\n" +
			`data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tc, src := serving(t, c.ctype, c.body)
			up := chatUpstream{t: tc, quality: core.QualitySettings{Guard: true, MinChars: 10}}
			resp, err := up.Do(context.Background(), src, &core.Call{Messages: []core.Message{core.User("hi")}, Stream: c.stream})
			if resp == nil {
				t.Fatalf("no answer (err %v)", err)
			}
			if c.bad == "" {
				if err != nil {
					t.Fatalf("err = %v, want the answer taken", err)
				}
				return
			}
			var inv *core.ResultInvalidError
			if !errors.As(err, &inv) || inv.Reason != core.ReasonLowQuality || len(inv.Message) < len(c.bad) || inv.Message[:len(c.bad)] != c.bad {
				t.Fatalf("err = %v, want a low_quality ResultInvalidError %q…", err, c.bad)
			}
		})
	}
}

// TestAContinuationIsJudgedWhole continues a prefill "Paris is the capital
// of France" with the guard on (MIN_CHARS 10) and a check: a tail that is
// short or empty is taken, since the guard and the check judge the whole
// answer, and the check's decoded data comes back on the tail's response;
// a tail cut at its token limit is refused.
func TestAContinuationIsJudgedWhole(t *testing.T) {
	t.Parallel()
	const prefill = "Paris is the capital of France"
	for _, c := range []struct {
		name, tail, finish string
		ok                 bool
	}{
		{"a short tail", ".", "stop", true},
		{"an empty tail", "", "stop", true},
		{"a tail cut at the token limit", " and", "length", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tc, src := serving(t, jsonType, completion(`{"role":"assistant","content":"`+c.tail+`"}`, c.finish))
			var judged string
			call := &core.Call{Continuation: true, Messages: []core.Message{core.User("capital?"), core.Assistant(prefill)},
				Check: func(r *core.LLMResponse) error { judged, r.StructuredData = r.Content, len(r.Content); return nil }}
			up := chatUpstream{t: tc, quality: core.QualitySettings{Guard: true, MinChars: 10}}
			resp, err := up.Do(context.Background(), src, call)
			if !c.ok {
				var inv *core.ResultInvalidError
				if !errors.As(err, &inv) || inv.Reason != core.ReasonLowQuality || inv.Raw != prefill+c.tail {
					t.Fatalf("err = %v, want a low_quality ResultInvalidError over the whole answer", err)
				}
				return
			}
			if err != nil || resp == nil {
				t.Fatalf("(%v, %v), want the tail taken", resp, err)
			}
			if resp.Content != c.tail || judged != prefill+c.tail || resp.StructuredData != len(prefill+c.tail) {
				t.Errorf("content %q, check saw %q, data %v; want the tail returned and the whole judged", resp.Content, judged, resp.StructuredData)
			}
		})
	}
}
