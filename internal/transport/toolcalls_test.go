package transport

import (
	"bytes"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// toolChunk is a streamed chunk whose delta carries the tool-call
// fragments calls (JSON objects); finish, when set, is its finish_reason.
func toolChunk(finish string, calls ...string) string {
	f := "null"
	if finish != "" {
		f = jsonStr(finish)
	}
	return `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[` +
		strings.Join(calls, ",") + `]},"finish_reason":` + f + `}]}`
}

// toolBody is the non-streamed body of the same answer: its message
// carries the whole calls.
func toolBody(calls ...string) string {
	return `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[` +
		strings.Join(calls, ",") + `]},"finish_reason":"tool_calls"}]}`
}

const toolsDone = `{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`

// weather is a get_weather call for city under id.
func weather(id, city string) core.ToolCall {
	return core.ToolCall{ID: id, Type: "function", Name: "get_weather", Arguments: `{"city":"` + city + `"}`}
}

// toolCallAnswers are the tool calls of one answer as providers stream
// them, and the same answer sent whole.
var toolCallAnswers = []struct {
	name   string
	stream []string
	body   string
	want   []core.ToolCall
}{
	{"openai parallel, interleaved, arguments split mid-escape and mid-character",
		[]string{
			toolChunk("", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}`),
			toolChunk("", `{"index":0,"function":{"arguments":"{\"city\":\"Par"}}`),
			toolChunk("", `{"index":1,"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"ci"}}`),
			toolChunk("", `{"index":0,"function":{"arguments":"is\\"}}`, `{"index":1,"function":{"arguments":"ty\":\"K\u00f6"}}`),
			toolChunk("", `{"index":1,"function":{"arguments":"ln\"}"}}`, `{"index":0,"function":{"arguments":"u00e9\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\\u00e9\"}"}}`,
			`{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Köln\"}"}}`),
		[]core.ToolCall{weather("call_a", `Paris\u00e9`), weather("call_b", "Köln")}},
	{"ollama: each call whole, every one at index 0",
		[]string{
			toolChunk("", `{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`),
			toolChunk("", `{"id":"call_b","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			`{"id":"call_b","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris"), weather("call_b", "Rome")}},
	{"every call at index 0, its arguments in fragments after it",
		[]string{
			toolChunk("", `{"id":"call_a","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
			toolChunk("", `{"index":0,"function":{"arguments":"\"Paris\"}"}}`),
			toolChunk("", `{"id":"call_b","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
			toolChunk("", `{"index":0,"function":{"arguments":"\"Rome\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			`{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris"), weather("call_b", "Rome")}},
	{"one call whole in the finish chunk",
		[]string{toolChunk("tool_calls", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`)},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris")}},
	{"no index: a call is its id, fragments continue the last",
		[]string{
			toolChunk("", `{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
			toolChunk("", `{"function":{"arguments":"\"Paris\"}"}}`),
			toolChunk("", `{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`,
			`{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Rome\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris"), weather("call_b", "Rome")}},
	{"the id and name repeated in every chunk",
		[]string{
			toolChunk("", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
			toolChunk("", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"\"Paris\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris")}},
	{"empty id and name after the first chunk (DashScope)",
		[]string{
			toolChunk("", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}`),
			toolChunk("", `{"index":0,"id":"","type":"function","function":{"name":"","arguments":"\"Paris\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris")}},
	{"another id without a name after the first chunk continues the call",
		[]string{
			toolChunk("", `{"index":0,"id":"call_a","type":"function","function":{"name":"get_weather","arguments":""}}`),
			toolChunk("", `{"index":0,"id":"chunk_2","function":{"arguments":"{\"city\":"}}`),
			toolChunk("", `{"index":0,"id":"chunk_3","function":{"arguments":"\"Paris\"}"}}`),
			toolsDone,
		},
		toolBody(`{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}`),
		[]core.ToolCall{weather("call_a", "Paris")}},
}

// TestToolCallsReadAsTheProvidersSendThem reads the tool calls of one
// answer as real providers stream them, and as the same answer sent
// whole: both give the calls the model made, whatever the read boundaries.
func TestToolCallsReadAsTheProvidersSendThem(t *testing.T) {
	t.Parallel()
	for _, tt := range toolCallAnswers {
		tt.want = slices.Clone(tt.want)
		for i := range tt.want {
			tt.want[i].Index = i
		}
		stream, body := sseBody(append(tt.stream, "[DONE]")...), []byte(tt.body)
		readers := map[string]func(b []byte) io.Reader{
			"whole":    func(b []byte) io.Reader { return bytes.NewReader(b) },
			"one byte": func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) },
			"half":     func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) },
			"data+EOF": func(b []byte) io.Reader { return iotest.DataErrReader(bytes.NewReader(b)) },
			"random": func(b []byte) io.Reader {
				return &testkit.SplitReader{Data: b, Sizes: []byte{3, 250, 17, 0, 99}, Mod: 61}
			},
		}
		for rname, r := range readers {
			for _, c := range []struct {
				how    string
				ctype  string
				b      []byte
				stream bool
			}{{"streamed", "text/event-stream", stream, true}, {"sent whole", "application/json", body, false}} {
				resp, err := doWith(t, readerTransport{status: 200, ctype: c.ctype, length: -1,
					body: func() io.Reader { return r(c.b) }}, c.stream)
				if err != nil {
					t.Fatalf("%s, %s, %s reads: %v", tt.name, c.how, rname, err)
				}
				if !slices.Equal(resp.ToolCalls, tt.want) || resp.FinishReason != "tool_calls" || resp.Content != "" {
					t.Errorf("%s, %s, %s reads: tool calls %+v (finish %q, content %q), want %+v",
						tt.name, c.how, rname, resp.ToolCalls, resp.FinishReason, resp.Content, tt.want)
				}
			}
		}
	}
}

// TestManyToolCallsAreReadInLinearTime folds 100,000 tool-call
// fragments — each at its own index, and each under its own id without an
// index — into one answer: each finds its call at once, instead of after
// every call before it (quadratic: a stream of them took hours, deaf to
// the attempt's timeout; here, far beyond the test binary's timeout).
func TestManyToolCallsAreReadInLinearTime(t *testing.T) {
	t.Parallel()
	const n = 100_000
	for _, form := range []string{"index", "id"} {
		var a assembler
		a.reset(&core.ProviderProfile{}, false, "m", nil)
		for i := range n {
			td := wireToolCall{Index: count{n: int64(n - 1 - i), ok: true}}
			if form == "id" {
				td = wireToolCall{ID: "call_" + strconv.Itoa(i)}
			}
			a.applyTool(&td, 0)
		}
		if len(a.tools) != n {
			t.Fatalf("by %s: %d tool calls, want %d", form, len(a.tools), n)
		}
	}
}
