package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polygateway/polygateway/core"
)

// decodeBody decodes a Responses request body held in memory.
func decodeBody(body string) (*chatRequest, *responsesAnswer, error) {
	return decodeResponses(strings.NewReader(body))
}

// paramsJSON renders params as JSON (keys sorted) for comparison.
func paramsJSON(t *testing.T, params map[string]any) string {
	t.Helper()
	if params == nil {
		return "{}"
	}
	b, err := json.Marshal(params)
	if err != nil {
		t.Fatalf("params %v: %v", params, err)
	}
	return string(b)
}

func user(s string) core.Message      { return core.Message{Role: core.RoleUser, Content: s} }
func system(s string) core.Message    { return core.Message{Role: core.RoleSystem, Content: s} }
func assistant(s string) core.Message { return core.Message{Role: core.RoleAssistant, Content: s} }

// Every input item kind becomes the chat message the chat completions
// endpoint would have built for the same conversation.
func TestResponsesInputItemsBecomeChatMessages(t *testing.T) {
	t.Parallel()
	call := func(id, name, args string, i int) core.ToolCall {
		return core.ToolCall{Index: i, ID: id, Type: "function", Name: name, Arguments: args}
	}
	img := core.ImageURLPart("data:image/png;base64,AQID")
	img.Detail = "low"
	for _, tc := range []struct {
		name, input string
		extra       string
		want        []core.Message
	}{
		{"a string", `"hello"`, ``, []core.Message{user("hello")}},
		{"instructions first", `"hello"`, `,"instructions":"be terse"`, []core.Message{system("be terse"), user("hello")}},
		{"empty instructions add nothing", `"hello"`, `,"instructions":""`, []core.Message{user("hello")}},
		{"a message without type", `[{"role":"user","content":"hi"}]`, ``, []core.Message{user("hi")}},
		{"a typed message with one input_text part", `[{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}]`, ``, []core.Message{user("hi")}},
		{"several parts stay parts", `[{"role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]}]`, ``,
			[]core.Message{{Role: core.RoleUser, Parts: []core.ContentPart{core.TextPart("a"), core.TextPart("b")}}}},
		{"an image by URL and by data URL", `[{"role":"user","content":[{"type":"input_text","text":"what?"},{"type":"input_image","image_url":"https://x.example/a.png"},{"type":"input_image","image_url":"data:image/png;base64,AQID","detail":"low"}]}]`, ``,
			[]core.Message{{Role: core.RoleUser, Parts: []core.ContentPart{core.TextPart("what?"), core.ImageURLPart("https://x.example/a.png"), img}}}},
		{"developer is system", `[{"role":"developer","content":"rules"},{"role":"system","content":[{"type":"input_text","text":"more"}]},{"role":"user","content":"hi"}]`, ``,
			[]core.Message{system("rules"), system("more"), user("hi")}},
		{"an earlier answer sent back", `[{"role":"user","content":"hi"},{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hello","annotations":[],"logprobs":[]}]},{"role":"user","content":"again"}]`, ``,
			[]core.Message{user("hi"), assistant("hello"), user("again")}},
		{"a refusal sent back", `[{"role":"assistant","content":[{"type":"refusal","refusal":"no"}]}]`, ``, []core.Message{assistant("no")}},
		{"reasoning is dropped", `[{"role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"hm"}],"encrypted_content":null},{"role":"assistant","content":"ok"}]`, ``,
			[]core.Message{user("hi"), assistant("ok")}},
		{"a function call and its output", `[{"role":"user","content":"weather?"},{"type":"function_call","id":"fc_1","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},{"type":"function_call_output","call_id":"c1","output":"21"}]`, ``,
			[]core.Message{user("weather?"), {Role: core.RoleAssistant, ToolCalls: []core.ToolCall{call("c1", "get_weather", `{"city":"Paris"}`, 0)}}, {Role: core.RoleTool, ToolCallID: "c1", Content: "21"}}},
		{"parallel calls share one assistant message", `[{"type":"function_call","call_id":"a","name":"f","arguments":"{}"},{"type":"function_call","call_id":"b","name":"g","arguments":""},{"type":"function_call_output","call_id":"a","output":[{"type":"input_text","text":"1"}]},{"type":"function_call_output","call_id":"b","output":"2"}]`, ``,
			[]core.Message{{Role: core.RoleAssistant, ToolCalls: []core.ToolCall{call("a", "f", "{}", 0), call("b", "g", "", 1)}}, {Role: core.RoleTool, ToolCallID: "a", Content: "1"}, {Role: core.RoleTool, ToolCallID: "b", Content: "2"}}},
		{"a call after the assistant's text joins its message", `[{"role":"assistant","content":"let me look"},{"type":"function_call","call_id":"a","name":"f","arguments":"{}"}]`, ``,
			[]core.Message{{Role: core.RoleAssistant, Content: "let me look", ToolCalls: []core.ToolCall{call("a", "f", "{}", 0)}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := decodeBody(`{"model":"m","input":` + tc.input + tc.extra + `}`)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if !reflect.DeepEqual(req.messages, tc.want) {
				t.Fatalf("messages\n got %+v\nwant %+v", req.messages, tc.want)
			}
		})
	}
}

// Every request field the gateway honours becomes the chat completions
// parameter of the same meaning; the defaults the SDKs send add nothing.
func TestResponsesFieldsBecomeChatParameters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fields, want string
	}{
		{"nothing", ``, `{}`},
		{"sampling and limits", `,"max_output_tokens":64,"temperature":0.2,"top_p":0.9`, `{"max_tokens":64,"temperature":0.2,"top_p":0.9}`},
		{"function tools", `,"tools":[{"type":"function","name":"f","description":"d","parameters":{"type":"object"},"strict":true},{"type":"function","name":"g"}]`,
			`{"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"},"strict":true}},{"type":"function","function":{"name":"g"}}]}`},
		{"no tools", `,"tools":[]`, `{}`},
		{"tool_choice a mode", `,"tool_choice":"required","parallel_tool_calls":false`, `{"parallel_tool_calls":false,"tool_choice":"required"}`},
		{"tool_choice a function", `,"tool_choice":{"type":"function","name":"f"}`, `{"tool_choice":{"type":"function","function":{"name":"f"}}}`},
		{"text format text", `,"text":{"format":{"type":"text"}}`, `{}`},
		{"text format json_object", `,"text":{"format":{"type":"json_object"},"verbosity":"low"}`, `{"response_format":{"type":"json_object"},"verbosity":"low"}`},
		{"text format json_schema", `,"text":{"format":{"type":"json_schema","name":"w","schema":{"type":"object"},"description":"d","strict":true}}`,
			`{"response_format":{"type":"json_schema","json_schema":{"name":"w","description":"d","schema":{"type":"object"},"strict":true}}}`},
		{"reasoning effort", `,"reasoning":{"effort":"low","summary":"auto"}`, `{"reasoning_effort":"low"}`},
		{"reasoning summary alone", `,"reasoning":{"summary":"detailed"}`, `{}`},
		{"metadata and user", `,"metadata":{"k":"v"},"user":"u1"`, `{"metadata":{"k":"v"},"user":"u1"}`},
		{"a service tier", `,"service_tier":"flex"`, `{"service_tier":"flex"}`},
		{"harmless defaults", `,"store":false,"include":["reasoning.encrypted_content"],"truncation":"disabled","service_tier":"auto","stream":false,"stream_options":{"include_obfuscation":false},"background":false,"previous_response_id":null,"conversation":null,"metadata":{}`, `{}`},
		{"nulls are absent", `,"max_output_tokens":null,"temperature":null,"tools":null,"text":null,"reasoning":null,"user":null,"instructions":null`, `{}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _, err := decodeBody(`{"model":"m","input":"hi"` + tc.fields + `}`)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := paramsJSON(t, req.params); got != tc.want {
				t.Fatalf("params\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

// The gateway's own fields and the stream flag reach the chat request.
func TestResponsesGatewayFields(t *testing.T) {
	t.Parallel()
	req, _, err := decodeBody(`{"model":"gpt-4o","input":"hi","stream":true,"fallbacks":["claude","qwen"],"polygateway":{"stream_commit":"buffer"}}`)
	if err != nil {
		t.Fatal(err)
	}
	if req.model != "gpt-4o" || !req.stream || req.commit != CommitBuffer || !reflect.DeepEqual(req.fallbacks, []string{"claude", "qwen"}) || req.fallbacksParam != "fallbacks" {
		t.Fatalf("request %+v", req)
	}
	if req.params != nil {
		t.Fatalf("the gateway's fields went upstream: %v", req.params)
	}
}

// The answer repeats what the request set, and OpenAI's defaults for the
// rest.
func TestResponsesEcho(t *testing.T) {
	t.Parallel()
	_, ans, err := decodeBody(`{"model":"m","input":"hi"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ans.echo)
	if want := `{"instructions":null,"max_output_tokens":null,"metadata":{},"parallel_tool_calls":true,"previous_response_id":null,"reasoning":null,"store":false,"temperature":null,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":null,"truncation":"disabled"}`; string(b) != want {
		t.Fatalf("default echo\n got %s\nwant %s", b, want)
	}
	_, ans, err = decodeBody(`{"model":"m","input":"hi","instructions":"x","max_output_tokens":9,"metadata":{"a":"b"},"parallel_tool_calls":false,"reasoning":{"effort":"low"},"temperature":1,"text":{"format":{"type":"json_object"}},"tool_choice":"none","tools":[{"type":"function","name":"f"}],"top_p":0.5,"user":"u"}`)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(ans.echo)
	if want := `{"instructions":"x","max_output_tokens":9,"metadata":{"a":"b"},"parallel_tool_calls":false,"previous_response_id":null,"reasoning":{"effort":"low"},"store":false,"temperature":1,"text":{"format":{"type":"json_object"}},"tool_choice":"none","tools":[{"type":"function","name":"f"}],"top_p":0.5,"truncation":"disabled","user":"u"}`; string(b) != want {
		t.Fatalf("echo\n got %s\nwant %s", b, want)
	}
}

// What the gateway cannot honour is refused with a 400 naming the field,
// never dropped.
func TestResponsesRefusesWhatItCannotHonour(t *testing.T) {
	t.Parallel()
	pairs := make([]string, 17)
	for i := range pairs {
		pairs[i] = `"k` + string(rune('a'+i)) + `":"v"`
	}
	big := `{` + strings.Join(pairs, ",") + `}`
	for _, tc := range []struct {
		body, param, code string
	}{
		{`{"model":"m","input":"hi","seed":1}`, "seed", "unknown_parameter"},
		{`{"model":"m","input":"hi","prompt":{"id":"p"}}`, "prompt", "unknown_parameter"},
		{`{"model":"m","input":"hi","Model":"x"}`, "Model", "unknown_parameter"},
		{`{"model":"m","input":"hi","previous_response_id":"resp_1"}`, "previous_response_id", "unsupported_parameter"},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation", "unsupported_parameter"},
		{`{"model":"m","input":"hi","background":true}`, "background", "unsupported_value"},
		{`{"model":"m","input":"hi","store":true}`, "store", "unsupported_value"},
		{`{"model":"m","input":"hi","include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, "include[1]", "unsupported_value"},
		{`{"model":"m","input":"hi","truncation":"auto"}`, "truncation", "unsupported_value"},
		{`{"model":"m","input":"hi","tools":[{"type":"web_search"}]}`, "tools[0].type", "unsupported_value"},
		{`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","defer_loading":true}]}`, "tools[0].defer_loading", "unknown_parameter"},
		{`{"model":"m","input":"hi","tools":[{"type":"function"}]}`, "tools[0].name", "missing_required_parameter"},
		{`{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":[]}]}`, "tools[0].parameters", "invalid_type"},
		{`{"model":"m","input":"hi","tool_choice":{"type":"file_search"}}`, "tool_choice.type", "unsupported_value"},
		{`{"model":"m","input":"hi","tool_choice":"sometimes"}`, "tool_choice", "invalid_value"},
		{`{"model":"m","input":"hi","text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", "missing_required_parameter"},
		{`{"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"n"}}}`, "text.format.schema", "missing_required_parameter"},
		{`{"model":"m","input":"hi","text":{"format":{"type":"text","name":"n"}}}`, "text.format.name", "unknown_parameter"},
		{`{"model":"m","input":"hi","text":{"format":{"type":"grammar"}}}`, "text.format.type", "unsupported_value"},
		{`{"model":"m","input":"hi","reasoning":{"effort":1}}`, "reasoning.effort", "invalid_type"},
		{`{"model":"m","input":"hi","metadata":` + big + `}`, "metadata", "invalid_value"},
		{`{"model":"m","input":"hi","metadata":{"k":1}}`, "metadata", "invalid_type"},
		{`{"model":"m","input":"hi","max_output_tokens":0}`, "max_output_tokens", "invalid_value"},
		{`{"model":"m","input":"hi","max_output_tokens":1.5}`, "max_output_tokens", "invalid_type"},
		{`{"model":"m","input":"hi","temperature":"hot"}`, "temperature", "invalid_type"},
		{`{"model":1,"input":"hi"}`, "model", "invalid_type"},
		{`{"model":"m","input":"hi","stream":"yes"}`, "stream", "invalid_type"},
		{`{"model":"m","input":"hi","stream_options":{"include_usage":true}}`, "stream_options.include_usage", "unknown_parameter"},
		{`{"model":"m","input":"hi","fallbacks":"x"}`, "fallbacks", "invalid_type"},
		{`{"model":"m","input":"hi","polygateway":{"stream_commit":"soon"}}`, "polygateway.stream_commit", "invalid_value"},
		{`{"model":"m"}`, "input", "missing_required_parameter"},
		{`{"model":"m","input":null}`, "input", "missing_required_parameter"},
		{`{"model":"m","input":[]}`, "input", "empty_array"},
		{`{"model":"m","input":[{"type":"reasoning","summary":[]}]}`, "input", "empty_array"},
		{`{"model":"m","input":7}`, "input", "invalid_type"},
		{`{"model":"m","input":["hi"]}`, "input[0]", "invalid_type"},
		{`{"model":"m","input":[{"content":"hi"}]}`, "input[0].type", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"item_reference","id":"msg_1"}]}`, "input[0].type", "unsupported_value"},
		{`{"model":"m","input":[{"type":"web_search_call","id":"ws_1"}]}`, "input[0].type", "unsupported_value"},
		{`{"model":"m","input":[{"role":"user","content":"hi","phase":"x"}]}`, "input[0].phase", "unknown_parameter"},
		{`{"model":"m","input":[{"role":"robot","content":"hi"}]}`, "input[0].role", "invalid_value"},
		{`{"model":"m","input":[{"type":"message","content":"hi"}]}`, "input[0].role", "missing_required_parameter"},
		{`{"model":"m","input":[{"role":"user"}]}`, "input[0].content", "missing_required_parameter"},
		{`{"model":"m","input":[{"role":"user","content":[]}]}`, "input[0].content", "empty_array"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]}`, "input[0].content[0].type", "unsupported_value"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"f"}]}]}`, "input[0].content[0].file_id", "unsupported_parameter"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_image"}]}]}`, "input[0].content[0].image_url", "missing_required_parameter"},
		{`{"model":"m","input":[{"role":"assistant","content":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].content[0].type", "invalid_value"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"output_text","text":"x"}]}]}`, "input[0].content[0].type", "invalid_value"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text", "missing_required_parameter"},
		{`{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"x","cache":true}]}]}`, "input[0].content[0].cache", "unknown_parameter"},
		{`{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0].call_id", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","arguments":"{}"}]}`, "input[0].name", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f"}]}`, "input[0].arguments", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c"}]}`, "input[0].output", "missing_required_parameter"},
		{`{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://x"}]}]}`, "input[0].output[0].type", "invalid_value"},
		{`{"model":"m","input":"hi"} {}`, "", "invalid_json"},
		{`{"model":"m","input":"hi"`, "", "invalid_json"},
		{`[]`, "", "invalid_json"},
		{`null`, "", "invalid_json"},
		{``, "", "invalid_json"},
	} {
		_, _, err := decodeBody(tc.body)
		var re *requestError
		if !errors.As(err, &re) {
			t.Errorf("%s: err = %v, want a refusal", tc.body, err)
			continue
		}
		if re.param != tc.param || re.code != tc.code || re.msg == "" {
			t.Errorf("%s: refused with param %q code %q (%s), want param %q code %q", tc.body, re.param, re.code, re.msg, tc.param, tc.code)
		}
	}
}

// The request is read the same whatever the sizes of the reads that
// deliver it, and a body that cannot be read whole is refused.
func TestResponsesRequestReadAtEveryBoundary(t *testing.T) {
	t.Parallel()
	body := `{"model":"gpt-4o","instructions":"é be terse","input":[{"role":"user","content":[{"type":"input_text","text":"weather in Paris? 🌧"}]},` +
		`{"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"c1","output":"21"}],` +
		`"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"max_output_tokens":64,"stream":true}`
	want, _, err := decodeBody(body)
	if err != nil {
		t.Fatal(err)
	}
	same := func(name string, r io.Reader) {
		t.Helper()
		got, _, err := decodeResponses(r)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got.messages, want.messages) || paramsJSON(t, got.params) != paramsJSON(t, want.params) || got.model != want.model || got.stream != want.stream {
			t.Fatalf("%s: read differently", name)
		}
	}
	same("one byte at a time", iotest.OneByteReader(strings.NewReader(body)))
	same("half reads", iotest.HalfReader(strings.NewReader(body)))
	same("EOF with the data", iotest.DataErrReader(strings.NewReader(body)))
	for cut := 1; cut < len(body); cut++ {
		same("split", io.MultiReader(strings.NewReader(body[:cut]), strings.NewReader(body[cut:])))
	}
	broken := errors.New("connection reset")
	for _, cut := range []int{0, 1, len(body) / 2, len(body) - 1} {
		_, _, err := decodeResponses(io.MultiReader(strings.NewReader(body[:cut]), iotest.ErrReader(broken)))
		var re *requestError
		if !errors.As(err, &re) || re.code != "invalid_body" {
			t.Fatalf("an error after %d bytes: %v, want invalid_body", cut, err)
		}
	}
	_, _, err = decodeResponses(iotest.TimeoutReader(bytes.NewReader([]byte(body))))
	if re := (*requestError)(nil); !errors.As(err, &re) || re.code != "invalid_body" {
		t.Fatalf("a timeout after the first read: %v, want invalid_body", err)
	}
}

// An unknown field's name is repeated in the error at most maxShown
// bytes long.
func TestResponsesUnknownFieldNameIsBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 1000)
	_, _, err := decodeBody(`{"model":"m","input":"hi","` + long + `":1}`)
	var re *requestError
	if !errors.As(err, &re) || re.code != "unknown_parameter" || len(re.param) > maxShown+len("…") || !strings.HasPrefix(long, strings.TrimSuffix(re.param, "…")) {
		t.Fatalf("refusal %+v", re)
	}
}

// A request without tools sends no tool options upstream unless its
// tool_choice asks for a call: chat completions refuses
// parallel_tool_calls and tool_choice without tools, where the Responses
// API takes them (the Agents SDK sends "tools": [] with
// "parallel_tool_calls": false). The answer still repeats them.
func TestResponsesToolOptionsWithoutTools(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, fields, want string
	}{
		{"empty tools and parallel_tool_calls", `,"tools":[],"parallel_tool_calls":false`, `{}`},
		{"parallel_tool_calls alone", `,"parallel_tool_calls":true`, `{}`},
		{"empty tools and tool_choice auto", `,"tools":[],"tool_choice":"auto"`, `{}`},
		{"tool_choice none and parallel_tool_calls", `,"tool_choice":"none","parallel_tool_calls":false`, `{}`},
		{"with tools they go upstream", `,"tools":[{"type":"function","name":"f"}],"tool_choice":"auto","parallel_tool_calls":false`,
			`{"parallel_tool_calls":false,"tool_choice":"auto","tools":[{"type":"function","function":{"name":"f"}}]}`},
		{"a call asked for without tools goes upstream, which refuses it", `,"tool_choice":{"type":"function","name":"f"}`,
			`{"tool_choice":{"type":"function","function":{"name":"f"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, ans, err := decodeBody(`{"model":"m","input":"hi"` + tc.fields + `}`)
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			if got := paramsJSON(t, req.params); got != tc.want {
				t.Fatalf("params\n got %s\nwant %s", got, tc.want)
			}
			if strings.Contains(tc.fields, `"parallel_tool_calls":false`) && ans.echo.ParallelToolCalls {
				t.Fatal("the answer does not repeat parallel_tool_calls: false")
			}
		})
	}
}

// The metadata limits count characters, as OpenAI's do, not bytes.
func TestResponsesMetadataLimitsCountCharacters(t *testing.T) {
	t.Parallel()
	key, value := strings.Repeat("ü", maxMetadataKeyLen), strings.Repeat("é", maxMetadataValueLen)
	req, ans, err := decodeBody(`{"model":"m","input":"hi","metadata":{"` + key + `":"` + value + `"}}`)
	if err != nil {
		t.Fatalf("metadata at the limits refused: %v", err)
	}
	if ans.echo.Metadata[key] != value || req.params["metadata"] == nil {
		t.Fatalf("metadata echo %v, params %v", ans.echo.Metadata, req.params)
	}
	for _, m := range []string{`{"` + key + `ü":"v"}`, `{"k":"` + value + `é"}`} {
		var re *requestError
		if _, _, err := decodeBody(`{"model":"m","input":"hi","metadata":` + m + `}`); !errors.As(err, &re) || re.param != "metadata" || re.code != "invalid_value" {
			t.Errorf("metadata over a limit: err = %v", err)
		}
	}
}
