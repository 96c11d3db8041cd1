package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
)

// FuzzParseChatProperties parses random chat completion request bodies,
// read as the server reads them in reads of the sizes split gives. It never
// panics; a failure is a *requestError with a code and a message; a body
// that encoding/json finds invalid is refused; an accepted request has
// messages with chat roles, and its params hold neither the fields the
// server owns nor nulls, each value valid JSON.
func FuzzParseChatProperties(f *testing.F) {
	for _, s := range []string{
		`{"model":"gpt-4o","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hi"}],"temperature":0.2,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AQID","detail":"low"}}]}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"42"}],"n":1}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}],"user":null,"tools":[{"type":"function"}]}`,
		`{"messages":[]}`, `{"messages":[{"role":"robot","content":"x"}]}`, `{"messages":[{"content":"x"}]}`, `{"model":1,"messages":[]}`,
		`{"messages":[{"role":"user","content":{"a":1}}],"n":2}`, `[]`, `{"messages":"x"}`, `{"messages":[{"role":"user","content":"\ud800"}]}`,
		`{"model":"gpt-4o","fallbacks":["claude","qwen"],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"gpt-4o","extra_body":{"fallbacks":["claude"],"top_k":3},"messages":[{"role":"user","content":"hi"}]}`,
		`{"fallbacks":[1],"messages":[{"role":"user","content":"hi"}]}`, `{"extra_body":{"fallbacks":"x"},"messages":[{"role":"user","content":"hi"}]}`,
	} {
		f.Add([]byte(s), []byte{9})
	}
	f.Fuzz(func(t *testing.T, body, split []byte) {
		read, aerr := readVia(&testkit.SplitReader{Data: body, Sizes: split, Mod: 61}, int64(len(body)))
		if aerr != nil || !bytes.Equal(read, body) {
			t.Fatalf("%q read in pieces %v: %q, %+v", body, split, read, aerr)
		}
		req, err := parseChat(read)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.code == "" || re.msg == "" {
				t.Fatalf("parseChat: %T %v, want a *requestError with code and message", err, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON %q accepted", body)
		}
		if len(req.messages) == 0 {
			t.Fatal("accepted without messages")
		}
		for i, m := range req.messages {
			switch m.Role {
			case "system", "user", "assistant", "tool", "developer":
			default:
				t.Fatalf("message %d has role %q", i, m.Role)
			}
			for j, p := range m.Parts {
				if p.Type == "image_url" && p.ImageURL == "" {
					t.Fatalf("message %d part %d: image without a URL", i, j)
				}
			}
			for j, c := range m.ToolCalls {
				if c.Name == "" {
					t.Fatalf("message %d tool call %d without a name", i, j)
				}
			}
		}
		if len(req.fallbacks) > maxFallbacks || len(req.fallbacks) > 0 && req.fallbacksParam == "" {
			t.Fatalf("fallbacks %q from %q", req.fallbacks, req.fallbacksParam)
		}
		for i, m := range req.fallbacks {
			if m == "" {
				t.Fatalf("fallback %d is empty", i)
			}
		}
		if raw, ok := req.params[extraBodyField].(json.RawMessage); ok {
			var eb map[string]json.RawMessage
			if json.Unmarshal(raw, &eb) == nil {
				if _, ok := eb[fallbacksField]; ok {
					t.Fatalf("extra_body %s passed upstream with its fallbacks", raw)
				}
			}
		}
		for k, v := range req.params {
			if ownFields[k] {
				t.Fatalf("own field %q passed upstream", k)
			}
			raw, ok := v.(json.RawMessage)
			if !ok || !json.Valid(raw) || isNull(raw) {
				t.Fatalf("param %q = %#v is not a non-null raw JSON value", k, v)
			}
		}
	})
}

// FuzzParseEmbed parses random embeddings request bodies, read as the
// server reads them in reads of the sizes split gives: never a panic, a
// *requestError on failure, and an accepted request is valid JSON with at
// least one input and only dimensions and user as params.
func FuzzParseEmbed(f *testing.F) {
	for _, s := range []string{
		`{"model":"text-embedding-3-small","input":["a","b"],"encoding_format":"base64","dimensions":256,"user":"u"}`,
		`{"model":"m","input":"one"}`, `{"input":[]}`, `{"input":[1,2,3]}`, `{"input":null}`, `{"input":"x","encoding_format":"int8"}`,
		`{"input":{"a":1}}`, `{"input":"\u00e9","model":null,"dimensions":null}`, `"x"`, `{"input":["a",null]}`,
		`{"model":"m","input":"x","fallbacks":["n"]}`, `{"input":"x","fallbacks":null}`,
	} {
		f.Add([]byte(s), []byte{0, 33})
	}
	f.Fuzz(func(t *testing.T, body, split []byte) {
		read, aerr := readVia(&testkit.SplitReader{Data: body, Sizes: split, Mod: 61}, -1)
		if aerr != nil || !bytes.Equal(read, body) {
			t.Fatalf("%q read in pieces %v: %q, %+v", body, split, read, aerr)
		}
		req, err := parseEmbed(read)
		if err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.code == "" || re.msg == "" {
				t.Fatalf("parseEmbed: %T %v, want a *requestError with code and message", err, err)
			}
			return
		}
		if !json.Valid(body) {
			t.Fatalf("invalid JSON %q accepted", body)
		}
		// The input is decoded once the route (and its bound) is known.
		if err := req.decodeInput(2048); err != nil {
			var re *requestError
			if !errors.As(err, &re) || re.code == "" || re.msg == "" {
				t.Fatalf("decodeInput: %T %v, want a *requestError with code and message", err, err)
			}
			return
		}
		if len(req.input) == 0 {
			t.Fatal("accepted without input")
		}
		for k, v := range req.params {
			raw, ok := v.(json.RawMessage)
			if k != "dimensions" && k != "user" || !ok || !json.Valid(raw) || isNull(raw) {
				t.Fatalf("param %q = %#v", k, v)
			}
		}
	})
}
