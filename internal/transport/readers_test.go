package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"testing"
	"testing/iotest"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// readerTransport answers every request with a response whose body is
// made by body, with the given status and Content-Type; a declared length
// is sent when length ≥ 0.
type readerTransport struct {
	status int
	ctype  string
	length int64
	body   func() io.Reader
}

func (rt readerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: rt.status, Header: http.Header{"Content-Type": {rt.ctype}},
		Body: io.NopCloser(rt.body()), ContentLength: rt.length, Request: r}, nil
}

// doWith runs one attempt against a source answering through rt.
func doWith(t testing.TB, rt readerTransport, stream bool) (*core.LLMResponse, error) {
	t.Helper()
	c := New(Config{HTTPClient: &http.Client{Transport: rt}})
	defer c.Close()
	src := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", APIKey: testKey,
		Model: "test-model", Timeout: 5 * time.Second}
	return c.Do(context.Background(), src, chatCall(stream))
}

// answerOf is what a test compares of an attempt's outcome.
type answerOf struct {
	content, thinking, finish, model string
	prompt, completion               int
	tools                            int
	class, msg                       string
}

func outcome(r *core.LLMResponse, err error) answerOf {
	if err != nil {
		return answerOf{class: core.ErrorClass(err), msg: err.Error()}
	}
	return answerOf{content: r.Content, thinking: r.Thinking, finish: r.FinishReason, model: r.Model,
		prompt: r.PromptTokens, completion: r.CompletionTokens, tools: len(r.ToolCalls)}
}

// readerShapes are the upstream answers every reader test reads: a
// non-streamed body, a stream, and an error body (in a 4xx and inside a
// 200 stream).
var readerShapes = []struct {
	name   string
	status int
	ctype  string
	stream bool
	body   string
}{
	{"body", 200, "application/json", false,
		`{"id":"x","model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \u00e9\ud83d\ude00 \"q\"\n","reasoning_content":"why","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`},
	{"stream", 200, "text/event-stream", true, string(sseBody(
		`{"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"},"finish_reason":null}]}`,
		`{"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"content":"lo \u00e9\ud83d\ude00","reasoning_content":"r"},"finish_reason":null}]}`,
		`{"id":"c","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"id":"c","model":"gpt-4o","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`,
		`[DONE]`))},
	{"error body", 429, "application/json", false,
		`{"error":{"message":"Rate limit reached \u00e9","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
	{"error in stream", 200, "text/event-stream", true, string(sseBody(
		`{"id":"c","choices":[{"index":0,"delta":{"content":"partial"}}]}`,
		`{"error":{"message":"engine died","type":"InternalServerError","code":500}}`,
		`[DONE]`))},
}

// TestReadersReadTheSameWhateverTheReads reads every answer shape through
// every kind of read boundary — one byte at a time, half reads, data
// returned with io.EOF, a split at every offset, and random read sizes —
// with and without a declared length: the outcome is always the one of the
// body read whole.
func TestReadersReadTheSameWhateverTheReads(t *testing.T) {
	t.Parallel()
	for _, sh := range readerShapes {
		body := []byte(sh.body)
		run := func(r func() io.Reader, length int64) answerOf {
			return outcome(doWith(t, readerTransport{status: sh.status, ctype: sh.ctype, length: length, body: r}, sh.stream))
		}
		want := run(func() io.Reader { return bytes.NewReader(body) }, int64(len(body)))
		if sh.status == 200 && !sh.stream || sh.name == "stream" {
			if want.class != "" || want.content == "" {
				t.Fatalf("%s: whole body: %+v", sh.name, want)
			}
		} else if want.class == "" {
			t.Fatalf("%s: whole body read as a success %+v", sh.name, want)
		}
		readers := map[string]func() io.Reader{
			"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
			"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
			"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
			"random":   func() io.Reader { return &testkit.SplitReader{Data: body, Sizes: []byte{3, 250, 17, 0, 99}, Mod: 61} },
		}
		for name, r := range readers {
			for _, length := range []int64{int64(len(body)), -1} {
				if got := run(r, length); got != want {
					t.Errorf("%s, %s reads, length %d: %+v, read whole %+v", sh.name, name, length, got, want)
				}
			}
		}
		for at := 1; at < len(body); at++ {
			if got := run(func() io.Reader { return &testkit.CutAtReader{B: body, At: at} }, -1); got != want {
				t.Fatalf("%s split at %d: %+v, read whole %+v", sh.name, at, got, want)
			}
		}
	}
}

// TestAReadErrorMidBodyIsNeverASuccess cuts every answer shape by a read
// error at every offset (and by a timeout error): the attempt fails, or —
// for a stream cut after its answer was complete — succeeds with the whole
// answer; never with part of it.
func TestAReadErrorMidBodyIsNeverASuccess(t *testing.T) {
	t.Parallel()
	boom := errors.New("connection reset by peer")
	for _, sh := range readerShapes {
		body := []byte(sh.body)
		whole := outcome(doWith(t, readerTransport{status: sh.status, ctype: sh.ctype, length: -1,
			body: func() io.Reader { return bytes.NewReader(body) }}, sh.stream))
		for at := 0; at < len(body); at += max(1, len(body)/97) {
			for _, e := range []error{boom, iotest.ErrTimeout} {
				r, err := doWith(t, readerTransport{status: sh.status, ctype: sh.ctype, length: -1,
					body: func() io.Reader { return &testkit.FailAtReader{B: body, At: at, Err: e} }}, sh.stream)
				if err == nil {
					if got := outcome(r, nil); !sh.stream || got != whole {
						t.Fatalf("%s cut at %d by %v: success %+v, the whole answer is %+v", sh.name, at, e, got, whole)
					}
					continue
				}
				if !isClass(err) {
					t.Fatalf("%s cut at %d: %T %v is none of the four classes", sh.name, at, err, err)
				}
			}
		}
	}
}

// TestADuplicateKeyIsReadAsEncodingJSONReadsIt: a key given twice is read
// once, its last value winning — in a body's message, in a stream's delta
// and for choices itself.
func TestADuplicateKeyIsReadAsEncodingJSONReadsIt(t *testing.T) {
	t.Parallel()
	body := func(s string) readerTransport {
		return readerTransport{status: 200, ctype: "application/json", length: -1, body: func() io.Reader { return bytes.NewReader([]byte(s)) }}
	}
	stream := func(events ...string) readerTransport {
		b := sseBody(events...)
		return readerTransport{status: 200, ctype: "text/event-stream", length: -1, body: func() io.Reader { return bytes.NewReader(b) }}
	}
	for _, tc := range []struct {
		name   string
		rt     readerTransport
		stream bool
		want   string
	}{
		{"message content", body(`{"choices":[{"index":0,"message":{"content":"A","content":"B"},"finish_reason":"stop"}]}`), false, "B"},
		{"delta content", stream(`{"choices":[{"index":0,"delta":{"content":"A","content":"B"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`), true, "B"},
		{"choices", body(`{"choices":[{"index":0,"message":{"content":"first"},"finish_reason":"stop"}],"choices":[{"index":0,"message":{"content":"last"},"finish_reason":"stop"}]}`), false, "last"},
		{"choices in a chunk", stream(`{"choices":[{"index":0,"delta":{"content":"first"}}],"choices":[{"index":0,"delta":{"content":"last"}}]}`,
			`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`), true, "last"},
	} {
		r, err := doWith(t, tc.rt, tc.stream)
		if err != nil || r.Content != tc.want {
			t.Errorf("%s: (%+v, %v), want content %q", tc.name, r, err, tc.want)
		}
	}
}

// TestAStreamWithoutAChoiceToReadIsAFault: a stream whose only choice has
// index 1 holds no answer, as the same non-streamed body holds none: a
// transient fault, never an empty success. So is a stream of no chunk.
func TestAStreamWithoutAChoiceToReadIsAFault(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"index 1 then DONE":       sseBody(`{"choices":[{"index":1,"delta":{"content":"x"}}]}`, `{"choices":[{"index":1,"delta":{},"finish_reason":"stop"}]}`, `[DONE]`),
		"index 1 with its finish": sseBody(`{"choices":[{"index":1,"delta":{"content":"x"},"finish_reason":"stop"}]}`),
		"no chunk":                sseBody(`[DONE]`),
	} {
		r, err := doWith(t, readerTransport{status: 200, ctype: "text/event-stream", length: -1, body: func() io.Reader { return bytes.NewReader(b) }}, true)
		if e := asTransient(t, err); r != nil || e.Reason != core.ReasonNetworkError {
			t.Errorf("%s: (%+v, %+v), want a transient network_error", name, r, e)
		}
	}
	// The non-streamed twin, for comparison.
	_, err := doWith(t, readerTransport{status: 200, ctype: "application/json", length: -1,
		body: func() io.Reader {
			return bytes.NewReader([]byte(`{"choices":[{"index":1,"message":{"content":"x"},"finish_reason":"stop"}]}`))
		}}, false)
	_ = asTransient(t, err) // the assertion is the check
}

// TestTheAnswerNamesTheUpstreamsModelElseTheSources: streamed or not, an
// answer names the model the upstream reports, and the source's MODEL
// when the upstream reports none.
func TestTheAnswerNamesTheUpstreamsModelElseTheSources(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ctype string
		stream      bool
		body        []byte
		want        string
	}{
		{"body", "application/json", false, []byte(`{"model":"gpt-4o-2024","choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]}`), "gpt-4o-2024"},
		{"stream", "text/event-stream", true, sseBody(`{"model":"gpt-4o-2024","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`), "gpt-4o-2024"},
		{"body without", "application/json", false, []byte(`{"choices":[{"index":0,"message":{"content":"x"},"finish_reason":"stop"}]}`), "test-model"},
		{"stream without", "text/event-stream", true, sseBody(`{"model":"","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`), "test-model"},
	} {
		r, err := doWith(t, readerTransport{status: 200, ctype: tc.ctype, length: -1, body: func() io.Reader { return bytes.NewReader(tc.body) }}, tc.stream)
		if err != nil || r.Model != tc.want {
			t.Errorf("%s: (%+v, %v), want model %q", tc.name, r, err, tc.want)
		}
	}
}

// modelSink records the models and deltas a stream passes on.
type modelSink struct {
	events []string
}

func (s *modelSink) Delta(content, thinking string) error {
	s.events = append(s.events, "delta:"+content+"|"+thinking)
	return nil
}
func (s *modelSink) Committed() bool                       { return len(s.events) > 0 }
func (s *modelSink) Reset()                                {}
func (s *modelSink) Delivered() (content, thinking string) { return "", "" }
func (s *modelSink) SetModel(m string)                     { s.events = append(s.events, "model:"+m) }

// TestAStreamNamesItsModelBeforeItsDeltas: a DeltaModel sink learns the
// answer's model before the first delta, and again when the upstream
// names another.
func TestAStreamNamesItsModelBeforeItsDeltas(t *testing.T) {
	t.Parallel()
	b := sseBody(`{"model":"m-1","choices":[{"index":0,"delta":{"content":"a"}}]}`, `{"model":"m-1","choices":[{"index":0,"delta":{"content":"b"}}]}`,
		`{"model":"m-2","choices":[{"index":0,"delta":{"content":"c"},"finish_reason":"stop"}]}`)
	c := New(Config{HTTPClient: &http.Client{Transport: readerTransport{status: 200, ctype: "text/event-stream", length: -1,
		body: func() io.Reader { return bytes.NewReader(b) }}}})
	defer c.Close()
	sink := &modelSink{}
	call := chatCall(true)
	call.Deltas = sink
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", Model: "conf", Timeout: 5 * time.Second}
	r, err := c.Do(context.Background(), src, call)
	if err != nil || r.Model != "m-2" {
		t.Fatalf("(%+v, %v)", r, err)
	}
	want := []string{"model:m-1", "delta:a|", "delta:b|", "model:m-2", "delta:c|"}
	if strconv.Quote(joinEvents(sink.events)) != strconv.Quote(joinEvents(want)) {
		t.Fatalf("events %q, want %q", sink.events, want)
	}
}

func joinEvents(e []string) string {
	var b bytes.Buffer
	for _, s := range e {
		b.WriteString(s)
		b.WriteByte(';')
	}
	return b.String()
}

// TestAByteOrderMarkBeforeAStreamLosesNoEvent: a stream that begins with
// a UTF-8 byte order mark is read whole, whatever the reads; the mark
// once hid the first event, whose text the answer then lacked.
func TestAByteOrderMarkBeforeAStreamLosesNoEvent(t *testing.T) {
	t.Parallel()
	body := append([]byte("\xEF\xBB\xBF"), sseBody(
		`{"choices":[{"index":0,"delta":{"role":"assistant","content":"Hello"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":" world"},"finish_reason":"stop"}]}`,
		`[DONE]`)...)
	for name, r := range splitReaders(body) {
		got := outcome(doWith(t, readerTransport{status: 200, ctype: "text/event-stream", length: -1, body: r}, true))
		if got.class != "" || got.content != "Hello world" || got.finish != "stop" {
			t.Errorf("%s reads: %+v, want the whole answer", name, got)
		}
	}
}

// TestAByteOrderMarkBeforeABodyIsSkipped: a non-streamed answer whose
// body opens with a UTF-8 byte order mark (which JSON readers may
// ignore) is read whole, however its bytes arrive, as a stream's is.
func TestAByteOrderMarkBeforeABodyIsSkipped(t *testing.T) {
	t.Parallel()
	body := []byte("\xEF\xBB\xBF" + `{"choices":[{"index":0,"message":{"role":"assistant","content":"Hello world"},"finish_reason":"stop"}]}`)
	for name, r := range splitReaders(body) {
		got := outcome(doWith(t, readerTransport{status: 200, ctype: "application/json", length: -1, body: r}, false))
		if got.class != "" || got.content != "Hello world" || got.finish != "stop" {
			t.Errorf("%s reads: %+v, want the whole answer", name, got)
		}
	}
}

// splitReaders returns readers of body that hand it over whole, one byte
// at a time, in halves, and with io.EOF beside its last data.
func splitReaders(body []byte) map[string]func() io.Reader {
	return map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(body) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(body)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) },
	}
}
