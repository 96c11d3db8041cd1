package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// encodeRequest appends the chat completions request body to b (see
// encodeRequestAfter).
func encodeRequest(b []byte, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) ([]byte, error) {
	return encodeRequestAfter(b, modelHead(src.Model), src, call, prof)
}

func boolPtr(b bool) *bool { return &b }

func TestRequestShape(t *testing.T) {
	t.Parallel()
	cp := &capture{}
	srv := newServer(t, cp.wrap(jsonResp(200, `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`)))
	c := newClient(t, Config{})
	call := &core.Call{
		Messages: []core.Message{
			core.System("be brief"),
			{Role: core.RoleUser, Content: "hi \"there\"\n\u2028<tag>", Name: "alice"},
			core.UserParts(core.TextPart("what is this?"), core.ImageURLPart("https://x/y.png"), core.ImageBytesPart("image/png", []byte{1, 2, 3})),
			{Role: core.RoleTool, Content: "42", ToolCallID: "call_1"},
		},
		Params: map[string]any{
			"temperature":     0.2,
			"max_tokens":      128,
			"model":           "evil",
			"messages":        "evil",
			"stream":          true,
			"tools":           []any{map[string]any{"type": "function", "function": map[string]any{"name": "f"}}},
			"top_p":           float32(0.5),
			"stop":            []string{"END"},
			"seed":            json.Number("7"),
			"response_format": json.RawMessage(`{"type":"json_object"}`),
		},
	}
	src := source(srv, "openai")
	if _, err := c.Do(context.Background(), src, call); err != nil {
		t.Fatal(err)
	}
	m := cp.lastBody(t)
	if m["model"] != "test-model" || m["stream"] != false {
		t.Fatalf("model/stream overridden: %v %v", m["model"], m["stream"])
	}
	if _, ok := m["stream_options"]; ok {
		t.Fatal("stream_options sent without streaming")
	}
	msgs := m["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("messages = %v", msgs)
	}
	want1 := map[string]any{"role": "user", "content": "hi \"there\"\n\u2028<tag>", "name": "alice"}
	if !reflect.DeepEqual(msgs[1], want1) {
		t.Fatalf("message 1 = %#v", msgs[1])
	}
	parts := msgs[2].(map[string]any)["content"].([]any)
	if len(parts) != 3 || parts[0].(map[string]any)["text"] != "what is this?" ||
		parts[1].(map[string]any)["image_url"].(map[string]any)["url"] != "https://x/y.png" ||
		parts[2].(map[string]any)["image_url"].(map[string]any)["url"] != "data:image/png;base64,AQID" {
		t.Fatalf("parts = %#v", parts)
	}
	if msgs[3].(map[string]any)["tool_call_id"] != "call_1" {
		t.Fatalf("tool message = %#v", msgs[3])
	}
	if m["temperature"] != json.Number("0.2") || m["max_tokens"] != json.Number("128") || m["top_p"] != json.Number("0.5") || m["seed"] != json.Number("7") {
		t.Fatalf("params = %v %v %v %v", m["temperature"], m["max_tokens"], m["top_p"], m["seed"])
	}
	if !reflect.DeepEqual(m["response_format"], map[string]any{"type": "json_object"}) {
		t.Fatalf("response_format = %#v", m["response_format"])
	}
	if len(m["tools"].([]any)) != 1 || !reflect.DeepEqual(m["stop"], []any{"END"}) {
		t.Fatalf("tools/stop = %#v %#v", m["tools"], m["stop"])
	}
	h := cp.headers[0]
	if h.Get("Authorization") != "Bearer "+testKey || h.Get("Content-Type") != "application/json" {
		t.Fatalf("headers = %v", h)
	}
	if cp.paths[0] != "/v1/chat/completions" {
		t.Fatalf("path = %q", cp.paths[0])
	}
}

func TestRequestStreamOptionsAndAuth(t *testing.T) {
	t.Parallel()
	cp := &capture{}
	srv := newServer(t, cp.wrap(sse(openAIStream...)))
	c := newClient(t, Config{})
	for _, key := range []string{"none", "NONE", ""} {
		src := source(srv, "openai")
		src.APIKey = key
		src.BaseURL += "/" // trailing slash tolerated
		if _, err := c.Do(context.Background(), src, chatCall(true)); err != nil {
			t.Fatal(err)
		}
		m := cp.lastBody(t)
		if m["stream"] != true || !reflect.DeepEqual(m["stream_options"], map[string]any{"include_usage": true}) {
			t.Fatalf("stream fields = %v %v", m["stream"], m["stream_options"])
		}
		cp.mu.Lock()
		h := cp.headers[len(cp.headers)-1]
		p := cp.paths[len(cp.paths)-1]
		cp.mu.Unlock()
		if _, ok := h["Authorization"]; ok {
			t.Fatalf("key %q: Authorization sent", key)
		}
		if h.Get("Accept") != "text/event-stream" || p != "/v1/chat/completions" {
			t.Fatalf("accept/path = %q %q", h.Get("Accept"), p)
		}
	}
	// Caller's stream_options replace ours.
	call := chatCall(true)
	call.Params = map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	if _, err := c.Do(context.Background(), source(srv, "vllm"), call); err != nil {
		t.Fatal(err)
	}
	if so := cp.lastBody(t)["stream_options"].(map[string]any); so["continuous_usage_stats"] != true {
		t.Fatalf("stream_options = %v", so)
	}
}

func TestRequestThinkingDialects(t *testing.T) {
	t.Parallel()
	cp := &capture{}
	srv := newServer(t, cp.wrap(jsonResp(200, `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`)))
	c := newClient(t, Config{})
	tests := []struct {
		provider string
		on       *bool
		key      string
		want     any // nil: key absent
	}{
		{"qwen", boolPtr(true), "enable_thinking", true},
		{"dashscope", boolPtr(false), "enable_thinking", false},
		{"deepseek", boolPtr(true), "thinking", map[string]any{"type": "enabled"}},
		{"zhipu", boolPtr(false), "thinking", map[string]any{"type": "disabled"}},
		{"kimi", boolPtr(true), "thinking", map[string]any{"type": "enabled"}},
		{"minimax", boolPtr(true), "thinking", map[string]any{"type": "adaptive"}},
		{"minimax", boolPtr(false), "thinking", map[string]any{"type": "disabled"}},
		{"vllm", boolPtr(true), "chat_template_kwargs", map[string]any{"enable_thinking": true}},
		{"vllm", boolPtr(false), "chat_template_kwargs", map[string]any{"enable_thinking": false}},
		{"openai", boolPtr(true), "reasoning_effort", "medium"},
		{"ollama", boolPtr(false), "reasoning_effort", "none"},
		{"azure", boolPtr(true), "reasoning_effort", nil},
		{"qwen", nil, "enable_thinking", nil},
		{"unknown-provider", boolPtr(true), "reasoning_effort", "medium"},
	}
	for _, tt := range tests {
		src := source(srv, tt.provider)
		src.EnableThinking = tt.on
		if _, err := c.Do(context.Background(), src, chatCall(false)); err != nil {
			t.Fatal(err)
		}
		m := cp.lastBody(t)
		got, ok := m[tt.key]
		if tt.want == nil {
			if ok {
				t.Errorf("%s: %s = %v, want absent", tt.provider, tt.key, got)
			}
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s on=%v: %s = %#v, want %#v", tt.provider, *tt.on, tt.key, got, tt.want)
		}
	}
}

func TestRequestMergeLayers(t *testing.T) {
	t.Parallel()
	cp := &capture{}
	srv := newServer(t, cp.wrap(jsonResp(200, `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`)))
	c := newClient(t, Config{})

	// Thinking on: a Params value for the switch key is kept (more specific).
	src := source(srv, "deepseek")
	src.EnableThinking = boolPtr(true)
	call := chatCall(false)
	call.Params = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": 512}, "temperature": 1}
	if _, err := c.Do(context.Background(), src, call); err != nil {
		t.Fatal(err)
	}
	m := cp.lastBody(t)
	if th := m["thinking"].(map[string]any); th["budget_tokens"] != json.Number("512") {
		t.Fatalf("thinking = %v", th)
	}

	// Thinking off: the switch replaces the Params value.
	src.EnableThinking = boolPtr(false)
	if _, err := c.Do(context.Background(), src, call); err != nil {
		t.Fatal(err)
	}
	if th := cp.lastBody(t)["thinking"]; !reflect.DeepEqual(th, map[string]any{"type": "disabled"}) {
		t.Fatalf("thinking = %v", th)
	}

	// ExtraBody wins over Params and the switch, but never over model/messages/stream.
	src.ExtraBody = map[string]any{"thinking": map[string]any{"type": "custom"}, "temperature": 0, "model": "evil", "stream": true, "messages": nil, "x_extra": "y"}
	if _, err := c.Do(context.Background(), src, call); err != nil {
		t.Fatal(err)
	}
	m = cp.lastBody(t)
	if !reflect.DeepEqual(m["thinking"], map[string]any{"type": "custom"}) || m["temperature"] != json.Number("0") || m["x_extra"] != "y" {
		t.Fatalf("extra body not applied: %v", m)
	}
	if m["model"] != "test-model" || m["stream"] != false || len(m["messages"].([]any)) != 1 {
		t.Fatalf("protected keys overridden: %v", m)
	}
	// No key appears twice.
	cp.mu.Lock()
	raw := string(cp.bodies[len(cp.bodies)-1])
	cp.mu.Unlock()
	for _, k := range []string{`"thinking"`, `"temperature"`, `"model"`, `"stream"`} {
		if n := strings.Count(raw, k); n != 1 {
			t.Fatalf("%s appears %d times in %s", k, n, raw)
		}
	}
	// The caller's maps are untouched.
	if len(call.Params) != 2 || len(src.ExtraBody) != 6 {
		t.Fatal("caller maps modified")
	}
}

func TestRequestEncodeErrors(t *testing.T) {
	t.Parallel()
	srv := newServer(t, jsonResp(200, `{"choices":[{"message":{"content":"ok"}}]}`))
	c := newClient(t, Config{})
	for _, v := range []any{math.NaN(), math.Inf(1), json.RawMessage(`{bad`), make(chan int), json.Number("1x")} {
		call := chatCall(false)
		call.Params = map[string]any{"bad": v}
		_, err := c.Do(context.Background(), source(srv, "openai"), call)
		_ = asRejected(t, err) // the assertion is the check
	}
}

// appendJSONString appends s as a JSON string the way request bodies
// encode strings (encoding/json without HTML escaping); tests build
// expected upstream text with it.
func appendJSONString(b []byte, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
}

// TestEncodeRequestMatchesEncodingJSON checks that strings and numbers of a
// request body are what encoding/json makes of them: strings round-trip
// as encoding/json's do (invalid UTF-8 as U+FFFD), numbers are
// byte-identical to json.Marshal, json.Number is kept as written.
func TestEncodeRequestMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	strs := []string{"", "plain", "q\"b\\s/", "\x00\x01\x1f\x7f", "é中文🙂", "\u2028\u2029", "bad\xffutf8\xc3", "<>&", "\t\r\n"}
	params := map[string]any{}
	floats := []float64{0, 1, -1.5, 1e-7, 1e21, 123456789.125, 5e-324, math.MaxFloat64}
	for i, f := range floats {
		params["f64_"+strconv.Itoa(i)] = f
	}
	floats32 := []float32{0.1, 1e-7, 3.4e38}
	for i, f := range floats32 {
		params["f32_"+strconv.Itoa(i)] = f
	}
	params["exact"] = json.Number("0.10000000000000000000001")
	params["html"] = map[string]any{"a": "<b>&"}
	var msgs []core.Message
	for _, s := range strs {
		msgs = append(msgs, core.Message{Role: core.RoleUser, Content: s, Name: s})
	}
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", Model: "m<&>"}
	prof := ProfileFor(DefaultProfiles(), "openai")
	body, err := encodeRequest(nil, src, &core.Call{Messages: msgs, Params: params}, &prof)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Model    string
		Messages []struct{ Content, Name string }
	}
	if err := json.Unmarshal(body, &back); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	for i, s := range strs {
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back.Messages[i].Content != wantBack || back.Messages[i].Name != wantBack {
			t.Errorf("%q round-trips to %q, encoding/json gives %q", s, back.Messages[i].Content, wantBack)
		}
	}
	if back.Model != "m<&>" || !bytes.Contains(body, []byte(`"m<&>"`)) || !bytes.Contains(body, []byte(`"<b>&"`)) {
		t.Errorf("HTML escaped: %s", body)
	}
	for k, v := range params {
		want, _ := json.Marshal(v)
		if k == "html" {
			continue
		}
		if !bytes.Contains(body, []byte(`"`+k+`":`+string(want))) {
			t.Errorf("%s = %v: body lacks %s", k, v, want)
		}
	}
}

// TestEncodeRequestShape pins the body of a typical call byte for byte and
// counts the allocations of encoding it again into the same buffer (not
// parallel: AllocsPerRun needs the process to itself).
func TestEncodeRequestShape(t *testing.T) {
	src := &core.SourceConfig{Name: "s_1", Provider: "deepseek", Model: "m", EnableThinking: boolPtr(false),
		ExtraBody: map[string]any{"top_k": json.Number("40"), "raw": json.RawMessage(` { "a" : [1, 2] } `), "none": json.RawMessage(nil)}}
	prof := ProfileFor(DefaultProfiles(), "deepseek")
	call := &core.Call{Stream: true, Params: map[string]any{"temperature": 0.2, "max_tokens": 64}, Messages: []core.Message{
		core.System("be brief"),
		core.UserParts(core.TextPart(""), core.ImageURLPart("https://x/y.png")),
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "c1", Name: "f", Arguments: `{"x":1}`}}},
		{Content: "no role", ToolCallID: "c1", Name: "n"},
	}}
	call.Messages[1].Parts[1].Detail = "low"
	body, err := encodeRequest([]byte("kept:"), src, call, &prof)
	if err != nil {
		t.Fatal(err)
	}
	want := `kept:{"model":"m","messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"https://x/y.png","detail":"low"}}]},` +
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},` +
		`{"role":"user","content":"no role","name":"n","tool_call_id":"c1"}],` +
		`"stream":true,"stream_options":{"include_usage":true},"max_tokens":64,"temperature":0.2,"thinking":{"type":"disabled"},` +
		`"none":null,"raw":{"a":[1,2]},"top_k":40}`
	if string(body) != want {
		t.Fatalf("body\n%s\nwant\n%s", body, want)
	}
	// Text-only messages take the other wire form.
	text := &core.Call{Messages: []core.Message{core.User("hi"), {Role: core.RoleAssistant, Content: "a\u2028<b>"}}}
	plain, err := encodeRequest(nil, &core.SourceConfig{Model: "m"}, text, &prof)
	if want := `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a\u2028<b>"}],"stream":false}`; err != nil || string(plain) != want {
		t.Fatalf("body\n%s (%v)\nwant\n%s", plain, err, want)
	}
	if testkit.RaceEnabled {
		return
	}
	// As an attempt encodes: with its endpoint's opening made once.
	head := modelHead(src.Model)
	for _, c := range []*core.Call{call, text} {
		allocs := testing.AllocsPerRun(50, func() {
			body, _ = encodeRequestAfter(body[:0], head, src, c, &prof)
		})
		if allocs > 1 {
			t.Errorf("encodeRequestAfter: %v allocations, want at most 1", allocs)
		}
	}
}

func TestEndpointURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://api.openai.com/v1":   "https://api.openai.com/v1/chat/completions",
		"https://api.openai.com/v1/ ": "https://api.openai.com/v1/chat/completions", //nolint:gocritic // the trailing space is the case: a base URL is trimmed
		"https://x.openai.azure.com/openai/deployments/gpt4o?api-version=2024-10-21": "https://x.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
	} {
		if got := endpointURL(in); got != want {
			t.Errorf("endpointURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAzureAPIKeyHeader(t *testing.T) {
	t.Parallel()
	cp := &capture{}
	srv := newServer(t, cp.wrap(jsonResp(200, `{"choices":[{"message":{"content":"ok"}}]}`)))
	c := newClient(t, Config{})
	src := source(srv, "azure")
	src.BaseURL += "?api-version=2024-10-21"
	if _, err := c.Do(context.Background(), src, chatCall(false)); err != nil {
		t.Fatal(err)
	}
	if h := cp.headers[0]; h.Get("Api-Key") != testKey || h.Get("Authorization") != "Bearer "+testKey {
		t.Fatalf("headers = %v", h)
	}
	if cp.paths[0] != "/v1/chat/completions" {
		t.Fatalf("path = %q", cp.paths[0])
	}
}

func TestNativeJSONSchemaGoesUpstreamOnlyWhereSupported(t *testing.T) {
	t.Parallel()
	schema := []byte(`{"type":"object"}`)
	for _, tc := range []struct {
		provider string
		params   map[string]any
		want     bool
	}{
		{"openai", nil, true},
		{"vllm", nil, true},
		{"deepseek", nil, false},
		{"openai", map[string]any{"response_format": map[string]any{"type": "json_object"}}, false},
	} {
		src := &core.SourceConfig{Name: "s_1", Provider: tc.provider, Model: "m"}
		prof := ProfileFor(DefaultProfiles(), tc.provider)
		call := &core.Call{Messages: []core.Message{core.User("x")}, JSONSchema: schema, Params: tc.params}
		body, err := encodeRequest(nil, src, call, &prof)
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Contains(string(body), `"json_schema":{"name":"response","schema":{"type":"object"}}`)
		if got != tc.want {
			t.Errorf("%s params=%v: native schema sent = %v, want %v\n%s", tc.provider, tc.params, got, tc.want, body)
		}
	}
}

func TestAssistantToolCallsAreSentBack(t *testing.T) {
	t.Parallel()
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", Model: "m"}
	prof := ProfileFor(DefaultProfiles(), "openai")
	call := &core.Call{Messages: []core.Message{
		core.User("weather in Paris?"),
		{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{{ID: "call_1", Name: "weather", Arguments: `{"city":"Paris"}`}}},
		{Role: core.RoleTool, ToolCallID: "call_1", Content: "18C"},
	}}
	body, err := encodeRequest(nil, src, call, &prof)
	if err != nil {
		t.Fatal(err)
	}
	want := `"tool_calls":[{"id":"call_1","type":"function","function":{"name":"weather","arguments":"{\"city\":\"Paris\"}"}}]`
	if !strings.Contains(string(body), want) || !json.Valid(body) {
		t.Fatalf("body %s lacks %s", body, want)
	}
}

// TestEncodeRequestMessageShapes pins the messages of each wire form (a
// role and a text; with a name or a tool call id; with content parts) and
// the prefill flag of a continuation, which only the trailing assistant
// message of a PrefixFlag dialect carries, in every form.
func TestEncodeRequestMessageShapes(t *testing.T) {
	t.Parallel()
	deepseek := ProfileFor(DefaultProfiles(), "deepseek")
	openai := ProfileFor(DefaultProfiles(), "openai")
	asst := core.Message{Role: core.RoleAssistant, Content: "so far"}
	tests := []struct {
		name string
		msgs []core.Message
		cont bool
		prof *core.ProviderProfile
		want string
	}{
		{"plain", []core.Message{core.System("s"), {Content: "no role"}, asst}, false, &deepseek,
			`[{"role":"system","content":"s"},{"role":"user","content":"no role"},{"role":"assistant","content":"so far"}]`},
		{"plain continued", []core.Message{core.User("q"), asst}, true, &deepseek,
			`[{"role":"user","content":"q"},{"role":"assistant","content":"so far","prefix":true}]`},
		{"continued without a trailing assistant", []core.Message{asst, core.User("q")}, true, &deepseek,
			`[{"role":"assistant","content":"so far"},{"role":"user","content":"q"}]`},
		{"continued on a dialect without the flag", []core.Message{core.User("q"), asst}, true, &openai,
			`[{"role":"user","content":"q"},{"role":"assistant","content":"so far"}]`},
		{"named", []core.Message{{Role: core.RoleUser, Content: "q", Name: "n"}, asst}, true, &deepseek,
			`[{"role":"user","content":"q","name":"n"},{"role":"assistant","content":"so far","prefix":true}]`},
		{"tool result", []core.Message{{Role: core.RoleTool, Content: "42", ToolCallID: "c1"}}, false, &deepseek,
			`[{"role":"tool","content":"42","tool_call_id":"c1"}]`},
		{"parts continued", []core.Message{core.UserParts(core.TextPart("t")), asst}, true, &deepseek,
			`[{"role":"user","content":[{"type":"text","text":"t"}]},{"role":"assistant","content":"so far","prefix":true}]`},
		{"none", nil, false, &deepseek, `[]`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			call := &core.Call{Messages: tc.msgs, Continuation: tc.cont}
			body, err := encodeRequest(nil, &core.SourceConfig{Model: "m"}, call, tc.prof)
			if err != nil {
				t.Fatal(err)
			}
			if want := `{"model":"m","messages":` + tc.want + `,"stream":false`; !strings.HasPrefix(string(body), want) {
				t.Fatalf("body\n%s\nwant it to start\n%s", body, want)
			}
		})
	}
}

// FuzzEncodeRequest encodes a request of fuzzed strings — model, a
// message's content and name, a parameter's key and string value — and
// reads the body back with a json.Decoder, in reads of the sizes split
// gives: it is one valid JSON object whose strings are what encoding/json
// makes of the fuzzed ones (invalid UTF-8 as U+FFFD), never HTML-escaped.
func FuzzEncodeRequest(f *testing.F) {
	for _, s := range []string{"", "plain", "q\"b\\s/", "\x00\x01\x1f\x7f", "é中文🙂", "\u2028\u2029", "bad\xffutf8\xc3", "<>&", "\t\r\n"} {
		f.Add("m"+s, s, s, "k"+s, s, []byte{2, 9, 0})
	}
	f.Fuzz(func(t *testing.T, model, content, name, key, value string, split []byte) {
		if protectedKey(key) || key == "stream_options" {
			return
		}
		src := &core.SourceConfig{Name: "s_1", Provider: "openai", Model: model}
		prof := ProfileFor(DefaultProfiles(), "openai")
		call := &core.Call{Messages: []core.Message{{Role: core.RoleUser, Content: content, Name: name}}, Params: map[string]any{key: value}}
		body, err := encodeRequest(nil, src, call, &prof)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(&testkit.SplitReader{Data: body, Sizes: split, Mod: 61})
		var m map[string]json.RawMessage
		if err := dec.Decode(&m); err != nil || dec.More() {
			t.Fatalf("body %q: %v", body, err)
		}
		// What encoding/json makes of a string: it round-trips so.
		same := func(got json.RawMessage, want string) {
			t.Helper()
			var g, w string
			enc, _ := json.Marshal(want)
			_ = json.Unmarshal(enc, &w)
			if err := json.Unmarshal(got, &g); err != nil || g != w {
				t.Fatalf("body %q: %s reads %q, encoding/json %q (%v)", body, got, g, w, err)
			}
		}
		same(m["model"], model)
		var k string
		kenc, _ := json.Marshal(key)
		_ = json.Unmarshal(kenc, &k)
		same(m[k], value)
		var msgs []struct{ Content, Name json.RawMessage }
		if err := json.Unmarshal(m["messages"], &msgs); err != nil || len(msgs) != 1 {
			t.Fatalf("messages %s: %v", m["messages"], err)
		}
		same(msgs[0].Content, content)
		if name != "" {
			same(msgs[0].Name, name)
		}
		if bytes.Contains(body, []byte(`\u003c`)) || bytes.Contains(body, []byte(`\u0026`)) {
			t.Fatalf("HTML escaped: %s", body)
		}
	})
}

// TestAnOwnedFieldInAnotherCaseNeverReachesTheUpstream: model, messages
// and stream belong to the transport in any case. A server that decodes
// its body as encoding/json does (Ollama, other Go servers) matches member
// names case-insensitively, the last one winning: "Model" or "ſtream"
// from Params or ExtraBody (a gateway client's field, passed through)
// would replace the source's model, the messages or the stream flag.
func TestAnOwnedFieldInAnotherCaseNeverReachesTheUpstream(t *testing.T) {
	t.Parallel()
	type seen struct {
		Model    string
		Stream   bool
		Messages []struct{ Content string }
	}
	got := make(chan seen, 1)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s seen
		_ = json.NewDecoder(r.Body).Decode(&s)
		got <- s
		jsonResp(200, `{"choices":[{"message":{"content":"ok"},"finish_reason":"stop"}]}`)(w, r)
	}))
	c := newClient(t, Config{})
	owned := map[string]any{"Model": "other-model", "STREAM": true, "Messages": []map[string]string{{"role": "user", "content": "other"}}}
	folded := map[string]any{"MODEL": "other-model", "ſtream": true, "messageS": []map[string]string{{"role": "user", "content": "other"}}}
	for _, tc := range []struct {
		name          string
		params, extra map[string]any
	}{
		{"params", owned, nil},
		{"extra body", nil, owned},
		{"unicode folding", folded, nil},
	} {
		src := source(srv, "ollama")
		src.ExtraBody = tc.extra
		call := chatCall(false)
		call.Params = tc.params
		if _, err := c.Do(context.Background(), src, call); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		s := <-got
		if s.Model != src.Model || s.Stream || len(s.Messages) != 1 || s.Messages[0].Content != "hello" {
			t.Errorf("%s: the upstream read %+v, want the source's model, stream false and the call's message", tc.name, s)
		}
	}
}

// TestStreamOptionsGoOnlyWithAStreamingRequest: stream_options set by a
// source's EXTRA_BODY (vLLM's continuous_usage_stats) or by Params go
// with a streaming request only; OpenAI and vLLM refuse a body with
// stream_options and "stream": false (400 "The 'stream_options' parameter
// is only allowed when 'stream' is enabled"), so every non-streaming
// call to such a source would be rejected.
func TestStreamOptionsGoOnlyWithAStreamingRequest(t *testing.T) {
	t.Parallel()
	opts := map[string]any{"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}}
	prof := ProfileFor(DefaultProfiles(), "vllm")
	for _, tc := range []struct {
		name          string
		params, extra map[string]any
	}{
		{"extra body", nil, opts},
		{"params", opts, nil},
		{"both", opts, opts},
	} {
		for _, stream := range []bool{false, true} {
			src := &core.SourceConfig{Name: "vllm_1", Provider: "vllm", Model: "m", ExtraBody: tc.extra}
			call := &core.Call{Messages: []core.Message{core.User("hi")}, Params: tc.params, Stream: stream}
			body, err := encodeRequest(nil, src, call, &prof)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("%s: %s: %v", tc.name, body, err)
			}
			so, sent := m["stream_options"]
			switch {
			case !stream && sent:
				t.Errorf("%s: a non-streaming body carries stream_options: %s", tc.name, body)
			case stream && string(so) != `{"continuous_usage_stats":true,"include_usage":true}`:
				t.Errorf("%s: a streaming body carries stream_options %s, want the configured ones", tc.name, so)
			case strings.Count(string(body), `"stream_options"`) > 1:
				t.Errorf("%s: stream_options twice: %s", tc.name, body)
			}
		}
	}
}
