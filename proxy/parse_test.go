package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// parseChatStd is the reference reading of a chat request: encoding/json
// over the whole body, as the server parsed requests before parseChat.
func parseChatStd(body []byte) (*chatRequest, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, badRequest("", "invalid_json", "request body is not a JSON object: %v", err)
	}
	req := &chatRequest{}
	if err := stdScalars(fields, req); err != nil {
		return nil, err
	}
	extraBody, err := stdFallbacks(fields, req)
	if err != nil {
		return nil, err
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
	stdParams(fields, req, extraBody)
	return req, nil
}

// stdScalars reads model, stream, stream_options, n and the gateway's
// own options, as parseChat does.
func stdScalars(fields map[string]json.RawMessage, req *chatRequest) error {
	if raw, ok := fields["model"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.model); err != nil {
			return badRequest("model", "invalid_type", "model must be a string")
		}
	}
	if raw, ok := fields["stream"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &req.stream); err != nil {
			return badRequest("stream", "invalid_type", "stream must be a boolean")
		}
	}
	if raw, ok := fields["stream_options"]; ok && !isNull(raw) {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return badRequest("stream_options", "invalid_type", "stream_options must be an object")
		}
		req.includeUsage = so.IncludeUsage
	}
	if raw, ok := fields["n"]; ok && !isNull(raw) {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil || n != 1 {
			return badRequest("n", "unsupported_value", "only n=1 is supported")
		}
	}
	if raw, ok := fields[gatewayField]; ok && !isNull(raw) {
		if err := req.gatewayOptions(raw); err != nil {
			return err
		}
	}
	return nil
}

// stdFallbacks reads the fallbacks, at the top level and in extra_body,
// and returns extra_body without its fallbacks member (nil when it had
// none).
func stdFallbacks(fields map[string]json.RawMessage, req *chatRequest) (map[string]json.RawMessage, error) {
	// An extra_body object loses its fallbacks member; the top-level
	// fallbacks win over it.
	var extraBody map[string]json.RawMessage
	var top, inner []byte
	if raw, ok := fields[extraBodyField]; ok && !isNull(raw) {
		var eb map[string]json.RawMessage
		if json.Unmarshal(raw, &eb) == nil {
			if fb, ok := eb[fallbacksField]; ok {
				delete(eb, fallbacksField)
				extraBody = eb
				if !isNull(fb) {
					inner = fb
				}
			}
		}
	}
	if raw, ok := fields[fallbacksField]; ok && !isNull(raw) {
		top = raw
	}
	return extraBody, req.setFallbacks(top, inner)
}

// stdParams keeps every field that is not the gateway's own as a
// parameter, extra_body stripped of its fallbacks.
func stdParams(fields map[string]json.RawMessage, req *chatRequest, extraBody map[string]json.RawMessage) {
	for k, v := range fields {
		if ownFields[k] || isNull(v) {
			continue
		}
		if req.params == nil {
			req.params = make(map[string]any, len(fields))
		}
		req.params[k] = v
		if k == extraBodyField && extraBody != nil {
			// Stripped of its fallbacks: the members left, none at all
			// when nothing is.
			if len(extraBody) == 0 {
				delete(req.params, k)
			} else {
				req.params[k] = extraBody
			}
		}
	}
	if len(req.params) == 0 {
		req.params = nil
	}
}

// FuzzParseChat holds the parser to the encoding/json reading of the whole
// body: the body, read as the server reads one in reads of the sizes split
// gives, is the body sent; the same bodies are refused, and an accepted
// body means the same request.
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
		`{"model":"a","fallbacks":["b","c"],"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"a","extra_body":{"fallbacks":["b"]},"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"a","extra_body":{ "top_k" : 5 ,"fallbacks":["b"], "x":[1,{"y":"}"}]},"fallbacks":null,"messages":[{"role":"user","content":"x"}]}`,
		`{"fallbacks":["b"],"extra_body":{"fallback\u0073":[1],"fallbacks":null},"messages":[{"role":"user","content":"x"}]}`,
		`{"fallbacks":"b","messages":[{"role":"user","content":"x"}]}`, `{"fallbacks":["b",2],"messages":[{"role":"user","content":"x"}]}`,
		`{"fallbacks":["a","b","c","d","e","f","g","h","i"],"messages":[{"role":"user","content":"x"}]}`,
		`{"fallbacks":[""],"extra_body":[1],"messages":[{"role":"user","content":"x"}]}`,
		`{"extra_body":{"fallbacks":{}},"messages":[{"role":"user","content":"x"}]}`,
	} {
		f.Add([]byte(seed), []byte{2, 200})
	}
	f.Fuzz(func(t *testing.T, body, split []byte) {
		read, aerr := readVia(&testkit.SplitReader{Data: body, Sizes: split, Mod: 61}, -1)
		if aerr != nil || !bytes.Equal(read, body) {
			t.Fatalf("%q read in pieces %v: %q, %+v", body, split, read, aerr)
		}
		got, gerr := parseChat(read)
		want, werr := parseChatStd(body)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("parseChat error %v, encoding/json reading error %v, for %q", gerr, werr, body)
		}
		if gerr != nil {
			var re *requestError
			if !errors.As(gerr, &re) {
				t.Fatalf("parseChat error %T is not a request error", gerr)
			}
			return
		}
		if got.model != want.model || got.stream != want.stream || got.includeUsage != want.includeUsage || got.commit != want.commit ||
			!slices.Equal(got.fallbacks, want.fallbacks) || got.fallbacksParam != want.fallbacksParam {
			t.Fatalf("fields differ: %+v vs %+v", got, want)
		}
		if !reflect.DeepEqual(got.messages, want.messages) {
			t.Fatalf("messages differ for %q:\n%#v\n%#v", body, got.messages, want.messages)
		}
		if len(got.params) != len(want.params) {
			t.Fatalf("params differ: %v vs %v", got.params, want.params)
		}
		for k, v := range want.params {
			g, ok := got.params[k].(json.RawMessage)
			if !ok {
				t.Fatalf("param %q missing or not raw JSON: %#v", k, got.params[k])
			}
			if members, ok := v.(map[string]json.RawMessage); ok {
				// An extra_body without its fallbacks: the same members
				// with the same values.
				var gm map[string]json.RawMessage
				if err := json.Unmarshal(g, &gm); err != nil || len(gm) != len(members) {
					t.Fatalf("param %q differs: %s vs %v (%v)", k, g, members, err)
				}
				for mk, mv := range members {
					if !bytes.Equal(bytes.TrimSpace(gm[mk]), bytes.TrimSpace(mv)) {
						t.Fatalf("param %q member %q differs: %s vs %s", k, mk, gm[mk], mv)
					}
				}
				continue
			}
			if !bytes.Equal(g, v.(json.RawMessage)) {
				t.Fatalf("param %q differs: %s vs %s", k, g, v)
			}
		}
	})
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

// TestParseChatFallbacks pins how both readings take the fallbacks: from
// the top level or extra_body (the top level winning), never as a param,
// extra_body going upstream without them.
func TestParseChatFallbacks(t *testing.T) {
	t.Parallel()
	const msgs = `"messages":[{"role":"user","content":"x"}]`
	for _, tc := range []struct {
		name, body string
		fallbacks  []string
		param      string
		extraBody  string // "" = no extra_body param
		errParam   string // "" = accepted
		errCode    string
	}{
		{name: "top level", body: `{"model":"a","fallbacks":["b","c"],` + msgs + `}`, fallbacks: []string{"b", "c"}, param: "fallbacks"},
		{name: "empty", body: `{"fallbacks":[],` + msgs + `}`},
		{name: "null", body: `{"fallbacks":null,` + msgs + `}`},
		{name: "extra_body alone", body: `{"extra_body":{"fallbacks":["b"]},` + msgs + `}`, fallbacks: []string{"b"}, param: "extra_body.fallbacks"},
		{name: "extra_body keeps its other members", body: `{"extra_body":{ "top_k" : 5 ,"fallbacks":["b"],"x":[1]},` + msgs + `}`,
			fallbacks: []string{"b"}, param: "extra_body.fallbacks", extraBody: `{"top_k" : 5,"x":[1]}`},
		{name: "extra_body without fallbacks unchanged", body: `{"extra_body":{"top_k":5},` + msgs + `}`, extraBody: `{"top_k":5}`},
		{name: "extra_body not an object unchanged", body: `{"extra_body":[1],` + msgs + `}`, extraBody: `[1]`},
		{name: "top level wins", body: `{"fallbacks":["b"],"extra_body":{"fallbacks":["c"],"k":1},` + msgs + `}`,
			fallbacks: []string{"b"}, param: "fallbacks", extraBody: `{"k":1}`},
		{name: "top level wins even when the other is wrong", body: `{"fallbacks":["b"],"extra_body":{"fallbacks":7},` + msgs + `}`,
			fallbacks: []string{"b"}, param: "fallbacks"},
		{name: "top level null leaves extra_body's", body: `{"fallbacks":null,"extra_body":{"fallbacks":["c"]},` + msgs + `}`,
			fallbacks: []string{"c"}, param: "extra_body.fallbacks"},
		{name: "escaped key", body: `{"extra_body":{"fallback\u0073":["c"]},` + msgs + `}`, fallbacks: []string{"c"}, param: "extra_body.fallbacks"},
		{name: "not an array", body: `{"fallbacks":"b",` + msgs + `}`, errParam: "fallbacks", errCode: "invalid_type"},
		{name: "not a string", body: `{"fallbacks":["b",2],` + msgs + `}`, errParam: "fallbacks[1]", errCode: "invalid_type"},
		{name: "null entry", body: `{"fallbacks":[null],` + msgs + `}`, errParam: "fallbacks[0]", errCode: "invalid_type"},
		{name: "empty name", body: `{"fallbacks":[""],` + msgs + `}`, errParam: "fallbacks[0]", errCode: "invalid_value"},
		{name: "too many", body: `{"fallbacks":["a","b","c","d","e","f","g","h","i"],` + msgs + `}`, errParam: "fallbacks", errCode: "array_above_max_length"},
		{name: "at the bound", body: `{"fallbacks":["a","b","c","d","e","f","g","h"],` + msgs + `}`,
			fallbacks: []string{"a", "b", "c", "d", "e", "f", "g", "h"}, param: "fallbacks"},
		{name: "extra_body wrong type", body: `{"extra_body":{"fallbacks":[["b"]]},` + msgs + `}`, errParam: "extra_body.fallbacks[0]", errCode: "invalid_type"},
	} {
		for reading, parse := range map[string]func([]byte) (*chatRequest, error){"parseChat": parseChat, "encoding/json": parseChatStd} {
			req, err := parse([]byte(tc.body))
			if tc.errParam != "" {
				var re *requestError
				if !errors.As(err, &re) || re.param != tc.errParam || re.code != tc.errCode {
					t.Errorf("%s, %s: error %#v, want param %q code %q", tc.name, reading, err, tc.errParam, tc.errCode)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s, %s: %v", tc.name, reading, err)
				continue
			}
			if !slices.Equal(req.fallbacks, tc.fallbacks) || req.fallbacksParam != tc.param {
				t.Errorf("%s, %s: fallbacks %q from %q, want %q from %q", tc.name, reading, req.fallbacks, req.fallbacksParam, tc.fallbacks, tc.param)
			}
			if _, ok := req.params[fallbacksField]; ok {
				t.Errorf("%s, %s: fallbacks passed upstream", tc.name, reading)
			}
			eb, has := req.params[extraBodyField]
			switch {
			case tc.extraBody == "" && has:
				t.Errorf("%s, %s: extra_body %s passed upstream, want none", tc.name, reading, eb)
			case tc.extraBody != "" && !has:
				t.Errorf("%s, %s: no extra_body, want %s", tc.name, reading, tc.extraBody)
			case tc.extraBody != "" && reading == "parseChat" && string(eb.(json.RawMessage)) != tc.extraBody:
				t.Errorf("%s: extra_body %s, want %s", tc.name, eb, tc.extraBody)
			}
		}
	}
}
