package proxy

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/core"
)

// parseChatStd is the reference reading of a chat request: encoding/json
// over the whole body, as the server parsed requests before parseChat.
func parseChatStd(body []byte) (*chatRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("", "invalid_json", "request body is not a JSON object: %v", err)
	}
	req := &chatRequest{}
	if raw, ok := fields["model"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.model); err != nil {
			return nil, badRequest("model", "invalid_type", "model must be a string")
		}
	}
	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.stream); err != nil {
			return nil, badRequest("stream", "invalid_type", "stream must be a boolean")
		}
	}
	if raw, ok := fields["stream_options"]; ok && !isNull(raw) {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return nil, badRequest("stream_options", "invalid_type", "stream_options must be an object")
		}
		req.includeUsage = so.IncludeUsage
	}
	if raw, ok := fields["n"]; ok && !isNull(raw) {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil || n != 1 {
			return nil, badRequest("n", "unsupported_value", "only n=1 is supported")
		}
	}
	if raw, ok := fields[gatewayField]; ok && !isNull(raw) {
		if err := req.gatewayOptions(raw); err != nil {
			return nil, err
		}
	}
	raw, ok := fields["messages"]
	if !ok || isNull(raw) {
		return nil, badRequest("messages", "missing_required_parameter", "messages is required")
	}
	var msgs []wireMessage
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, badRequest("messages", "invalid_type", "messages must be an array of message objects: %v", err)
	}
	if len(msgs) == 0 {
		return nil, badRequest("messages", "empty_array", "messages must not be empty")
	}
	req.messages = make([]core.Message, len(msgs))
	for i := range msgs {
		m, err := convertMessage(&msgs[i], i)
		if err != nil {
			return nil, err
		}
		req.messages[i] = m
	}
	for k, v := range fields {
		if ownFields[k] || isNull(v) {
			continue
		}
		if req.params == nil {
			req.params = make(map[string]any, len(fields))
		}
		req.params[k] = v
	}
	return req, nil
}

// FuzzParseChat holds the one-pass parser to the encoding/json reading: the
// same bodies are refused, and an accepted body means the same request.
func FuzzParseChat(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","stream":true,"stream_options":{"include_usage":true},"temperature":0.2,"messages":[{"role":"system","content":"s","name":"n"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:x","detail":"low"}}]}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"4\u00e9\n","tool_call_id":"c"}],"tools":[{"type":"function"}]}`,
		`{"model":"m","polygateway":{"stream_commit":"buffer"},"messages":[{"Role":"user","CONTENT":"x","x":[1,{"a":"}"}]}]}`,
		` {"model" : "m" , "messages" : [ {"role":"user","content":"\"q\""} ] , "n" : 1 } `,
		`{"model":"m","messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
		`{"model":5,"messages":[]}`, `{"messages":[null]}`, `null`, `[]`, `{"model":"m","messages":[{"role":"user","content":"x"}]}x`,
		`{"messages":[{"role":"user","content":"\xff"}]}`, "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}",
		`{"messages":[{"role":"user","content":"x",}]}`, `{"a":[}],"messages":[{"role":"user","content":"x"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, gerr := parseChat(body)
		want, werr := parseChatStd(body)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("parseChat error %v, encoding/json reading error %v, for %q", gerr, werr, body)
		}
		if gerr != nil {
			var re *requestError
			if !errorsAs(gerr, &re) {
				t.Fatalf("parseChat error %T is not a request error", gerr)
			}
			return
		}
		if got.model != want.model || got.stream != want.stream || got.includeUsage != want.includeUsage || got.commit != want.commit {
			t.Fatalf("fields differ: %+v vs %+v", got, want)
		}
		if !reflect.DeepEqual(got.messages, want.messages) {
			t.Fatalf("messages differ for %q:\n%#v\n%#v", body, got.messages, want.messages)
		}
		if len(got.params) != len(want.params) {
			t.Fatalf("params differ: %v vs %v", got.params, want.params)
		}
		for k, v := range want.params {
			if !bytes.Equal(got.params[k].(json.RawMessage), v.(json.RawMessage)) {
				t.Fatalf("param %q differs: %s vs %s", k, got.params[k], v)
			}
		}
	})
}

func errorsAs(err error, re **requestError) bool {
	e, ok := err.(*requestError)
	*re = e
	return ok
}

// TestParseChatAllocatesLittle pins the parser's allocations for a plain
// request: the messages, the strings it keeps and the params, nothing per
// byte.
func TestParseChatAllocatesLittle(t *testing.T) {
	body := []byte(`{"model":"gpt-4o","temperature":0.2,"messages":[{"role":"system","content":"be terse"},{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 100) + `"}]}`)
	var req *chatRequest
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if req, err = parseChat(body); err != nil {
			t.Fatal(err)
		}
	})
	std := testing.AllocsPerRun(100, func() { _, _ = parseChatStd(body) })
	if req.messages[1].Content != strings.Repeat("lorem ipsum ", 100) || req.messages[0].Role != "system" {
		t.Fatalf("parsed %+v", req.messages)
	}
	if allocs >= std {
		t.Errorf("parseChat allocates %.0f times per request, the encoding/json reading %.0f", allocs, std)
	}
	t.Logf("allocations per request: %.0f (encoding/json reading: %.0f)", allocs, std)
}
