package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// responsesSeeds are bodies of the shapes the SDKs send, and broken ones.
var responsesSeeds = []string{
	`{"model":"gpt-4o","input":"hello","instructions":"be terse","max_output_tokens":64,"temperature":0.2,"store":false}`,
	`{"model":"gpt-4o","input":[{"role":"user","content":[{"type":"input_text","text":"what is this?"},{"type":"input_image","image_url":"data:image/png;base64,AQID","detail":"low"}]}],"stream":true}`,
	`{"model":"tools","input":[{"role":"user","content":"weather?"},{"type":"function_call","id":"fc_1","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},{"type":"function_call_output","call_id":"c1","output":"21"}],"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"},"strict":true}],"tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false}`,
	`{"model":"json","input":"x","text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"strict":true},"verbosity":"low"},"reasoning":{"effort":"low","summary":"auto"},"metadata":{"k":"v"},"user":"u"}`,
	`{"model":"m","input":[{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[],"logprobs":[]}]},{"type":"reasoning","id":"rs_1","summary":[]}],"include":["reasoning.encrypted_content"],"truncation":"disabled","service_tier":"auto"}`,
	`{"model":"m","input":"hi","fallbacks":["claude"],"polygateway":{"stream_commit":"buffer"},"stream_options":{"include_obfuscation":false}}`,
	`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, `{"model":"m","input":[{"type":"item_reference","id":"x"}]}`,
	`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, `{"model":"m","input":[]}`, `{"model":"m","input":"hi"} x`,
	`[]`, `{"input":"\ud800"}`, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`,
}

// FuzzResponsesRequest reads random Responses request bodies, each
// through a reader split at fuzzed boundaries. It never panics; it reads
// what it reads from the whole body at once; a failure is a *requestError
// with a code and a message; an accepted body is valid JSON, becomes chat
// messages of chat roles with what each needs, and parameters that are
// valid JSON and never the fields the server owns; its answer encodes.
func FuzzResponsesRequest(f *testing.F) {
	for i, s := range responsesSeeds {
		f.Add([]byte(s), []byte{byte(i), 3, 17, 1})
	}
	f.Fuzz(func(t *testing.T, body, sizes []byte) {
		req, ans, err := decodeResponses(&testkit.SplitReader{Data: body, Sizes: sizes, Mod: 61})
		wreq, _, werr := decodeResponses(bytes.NewReader(body))
		if (err == nil) != (werr == nil) || err != nil && err.Error() != werr.Error() {
			t.Fatalf("split reads: %v; whole: %v", err, werr)
		}
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.code == "" || re.msg == "" {
				t.Fatalf("decodeResponses: %T %v, want a *requestError with code and message", err, err)
			}
			return
		}
		if !reflect.DeepEqual(req, wreq) {
			t.Fatalf("split reads read\n%+v\nthe whole body\n%+v", req, wreq)
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON %q accepted", body)
		}
		checkChatMessages(t, req.messages)
		for k, v := range req.params {
			switch k {
			case "model", "messages", "stream", "stream_options", "input", gatewayField, fallbacksField:
				t.Fatalf("params hold %q", k)
			}
			b, err := json.Marshal(v)
			if err != nil || !json.Valid(b) || string(b) == "null" {
				t.Fatalf("param %s = %s (%v)", k, b, err)
			}
		}
		resp := &polygateway.LLMResponse{CallID: "c", Content: "x", ToolCalls: []polygateway.ToolCall{{Name: "f"}}}
		if _, err := ans.body(&reqInfo{}, resp, 1); err != nil {
			t.Fatalf("the answer does not encode: %v", err)
		}
	})
}

// checkChatMessages checks that msgs are chat messages an upstream takes.
func checkChatMessages(t *testing.T, msgs []core.Message) {
	t.Helper()
	if len(msgs) == 0 {
		t.Fatal("accepted without messages")
	}
	for i, m := range msgs {
		switch m.Role {
		case core.RoleSystem, core.RoleUser, core.RoleAssistant:
		case core.RoleTool:
			if m.ToolCallID == "" {
				t.Fatalf("message %d: a tool message without tool_call_id", i)
			}
		default:
			t.Fatalf("message %d has role %q", i, m.Role)
		}
		for j, p := range m.Parts {
			if p.Type == core.PartImageURL && (p.ImageURL == "" || m.Role != core.RoleUser) {
				t.Fatalf("message %d part %d: an image without a URL or outside a user message", i, j)
			}
		}
		for j, c := range m.ToolCalls {
			if c.Name == "" || c.ID == "" || m.Role != core.RoleAssistant {
				t.Fatalf("message %d tool call %d: %+v", i, j, c)
			}
		}
	}
}
