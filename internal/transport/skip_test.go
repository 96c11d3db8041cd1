package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// wordChunk is a real chat.completion.chunk event carrying one word.
func wordChunk(w string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":` + jsonStr(w) + `},"finish_reason":null}]}`
}

const finishChunk = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`

func TestSkippableOnlyProvesEmptinessWithoutAnObject(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		data string
		want bool
	}{
		{"ping", true},
		{"keep-alive", true},
		{`"annotation"`, true},
		{"42", true},
		{"null", true},
		{"[1,2,3]", true},
		{"[DONE", true},
		{"{", false},
		{`{"id":"chatcmpl-1","obj`, false},
		{`{"choices":[{"del`, false},
		{`x"choices":[{"delta":{"content":"w"}}]}`, false},
		{`[{"choices":[{"delta":{"content":"w"}}]}]`, false},
		{`"{\"content\":\"w\"}"`, false},
		{"internal error", false},
		{"ERROR: upstream", false},
		{"", true},
	} {
		if got := skippable([]byte(tt.data)); got != tt.want {
			t.Errorf("skippable(%q) = %v, want %v", tt.data, got, tt.want)
		}
	}
}

// memTransport answers every request with body as an SSE stream, in
// memory, in reads of the sizes sizes gives (see testkit.SplitReader).
type memTransport struct{ body, sizes []byte }

func (m memTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(&testkit.SplitReader{Data: m.body, Sizes: m.sizes, Mod: 61}), Request: r, ProtoMajor: 1, ProtoMinor: 1}, nil
}

// streamOf runs one streaming call whose upstream sends body.
func streamOf(t testing.TB, body []byte, sizes ...byte) (*core.LLMResponse, error) {
	t.Helper()
	c := New(Config{HTTPClient: &http.Client{Transport: memTransport{body, sizes}}})
	defer c.Close()
	src := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", APIKey: testKey,
		Model: "test-model", Timeout: 5 * time.Second}
	return c.Do(context.Background(), src, chatCall(true))
}

func sseBody(events ...string) []byte {
	var b bytes.Buffer
	for _, e := range events {
		b.WriteString("data: ")
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

func TestATokenChunkCutAtEveryByteIsNeverASuccessWithOtherText(t *testing.T) {
	t.Parallel()
	mid := wordChunk("word")
	for cut := 1; cut < len(mid); cut++ {
		for _, last := range []bool{false, true} {
			events := []string{wordChunk("one "), mid[:cut], wordChunk(" two"), finishChunk, "[DONE]"}
			if last {
				// The cut event ends the body.
				events = events[:2]
			}
			body := sseBody(events...)
			if last {
				body = bytes.TrimSuffix(body, []byte("\n\n"))
			}
			r, err := streamOf(t, body)
			if err == nil {
				t.Fatalf("cut at %d/%d (last=%v): success %q, want a transient error", cut, len(mid), last, r.Content)
			}
			if e := asTransient(t, err); e.Source != "openai_1" {
				t.Fatalf("cut at %d: %+v", cut, e)
			}
		}
	}
}

func TestAGarbageEventBetweenTwoChunksIsSkippedAndCounted(t *testing.T) {
	t.Parallel()
	for _, garbage := range []string{"hello", "keep-alive", "42", `"note"`, "null", "[1,2]", "true", `{"type":"ping"}`, `{}`} {
		r, err := streamOf(t, sseBody(wordChunk("one"), garbage, wordChunk(" two"), finishChunk, "[DONE]"))
		if err != nil {
			t.Fatalf("garbage %q: %v", garbage, err)
		}
		if r.Content != "one two" {
			t.Fatalf("garbage %q: content %q", garbage, r.Content)
		}
		skipped := 1
		if strings.HasPrefix(garbage, "{") {
			skipped = 0 // a valid chunk without choices is a chunk, not a skip
		}
		if r.SkippedEvents != skipped {
			t.Fatalf("garbage %q: SkippedEvents = %d, want %d", garbage, r.SkippedEvents, skipped)
		}
	}
}

func TestACutUsageChunkAfterTheFinishFailsTheAttempt(t *testing.T) {
	t.Parallel()
	usage := `{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`
	fin := `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`
	for cut := 1; cut < len(usage); cut++ {
		for _, last := range []bool{false, true} {
			body := sseBody(wordChunk("a"), fin, usage[:cut])
			if !last {
				body = append(body, sseBody("[DONE]")...)
			} else {
				body = bytes.TrimSuffix(body, []byte("\n\n"))
			}
			if r, err := streamOf(t, body); err == nil {
				t.Fatalf("usage cut at %d (last=%v): success %+v", cut, last, r)
			}
		}
	}
}

// FuzzStreamText runs whole streams through a streaming call with events
// cut, damaged, duplicated and garbage inserted, as the fuzz input says. The
// property: the call is an error, or its text is exactly the upstream's —
// the words of every event the upstream sent, an event that is valid JSON
// counting for what it says (encoding/json decides), any other for the
// word it was meant to carry. The stream is read in reads of the sizes
// split gives.
func FuzzStreamText(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0}, []byte("ping"), []byte{})
	f.Add([]byte{1, 40, 0, 0}, []byte("x"), []byte{7, 1})
	f.Add([]byte{2, 7, 'x', 0}, []byte("{"), []byte{0})
	f.Add([]byte{3, 0, 4, 0, 0, 5, 200}, []byte("[1,2]"), []byte{60, 3})
	f.Add([]byte{4, 0, 0, 1, 60, 3, 0}, []byte("keep-alive"), []byte{2})
	f.Add([]byte{0, 0, 6, 1, 0, 0}, []byte(`{"choices":[{"delta":{"content":"zz"}}]}`), []byte{11, 250})
	words := []string{"alpha", " beta", " gamma", " delta", " epsilon", " zeta"}
	f.Fuzz(func(t *testing.T, ops, garbage, split []byte) {
		if len(ops) > 64 || len(garbage) > 256 || bytes.ContainsAny(garbage, "\r\n") ||
			string(bytes.TrimSpace(garbage)) == "[DONE]" {
			return
		}
		var body bytes.Buffer
		var want strings.Builder
		emit := func(data string) {
			body.WriteString("data: ")
			body.WriteString(data)
			body.WriteString("\n\n")
		}
		op := func(i int) byte {
			if i < len(ops) {
				return ops[i]
			}
			return 0
		}
		k := 0
		for _, w := range words {
			ev := wordChunk(w)
			code, arg, b := op(k)%7, int(op(k+1)), op(k+2)
			k += 3
			switch code {
			case 1: // cut
				emit(ev[:1+arg%(len(ev)-1)])
				want.WriteString(w)
			case 2: // damage one byte
				if b == '\r' || b == '\n' {
					b = 'x'
				}
				d := []byte(ev)
				d[arg%len(d)] = b
				emit(string(d))
				want.WriteString(meant(d, w))
			case 3: // duplicate
				emit(ev)
				emit(ev)
				want.WriteString(w + w)
			case 4: // garbage before
				emit(string(garbage))
				emit(ev)
				want.WriteString(meant(bytes.TrimSpace(garbage), ""))
				want.WriteString(w)
			default:
				emit(ev)
				want.WriteString(w)
			}
		}
		emit(finishChunk)
		emit("[DONE]")
		raw := body.Bytes()
		if c := op(k); c%5 == 1 {
			// the body itself is cut
			raw = raw[:int(op(k+1))*len(raw)/256]
		}
		r, err := streamOf(t, raw, split...)
		if err != nil {
			return
		}
		if r.Content != want.String() {
			t.Fatalf("success with %q, the upstream sent %q\nbody:\n%s", r.Content, want.String(), raw)
		}
	})
}

// meant is the text an event carried: what it says when it is a valid
// JSON chunk — the content of its first choice of index 0 (or none), as
// encoding/json reads it into a struct (names in any case) — otherwise
// orig, the text it was meant to carry.
func meant(data []byte, orig string) string {
	d := bytes.TrimSpace(data)
	if len(d) == 0 || d[0] != '{' || !json.Valid(d) {
		return orig
	}
	var v struct {
		Choices []struct {
			Index *float64 `json:"index"`
			Delta struct {
				Content string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
	}
	_ = json.Unmarshal(d, &v) // a value of the wrong kind is passed over
	for _, c := range v.Choices {
		if c.Index != nil && *c.Index >= 1 {
			continue
		}
		return c.Delta.Content
	}
	return ""
}
