package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
)

// The differential tests generate random answers — keys given twice,
// escapes, surrogate pairs (and lone halves), invalid UTF-8, numbers in
// every form, members of the wrong kind — and hold the transport's reading,
// read in random pieces, to encoding/json's reading of the same bytes into
// a plain struct (refChunk) with the transport's rules applied to it.

// refDelta, refChoice and refChunk are a plain encoding/json client's
// reading of a chunk or body.
type refDelta struct {
	Content          string `json:"content"`
	Refusal          string `json:"refusal"`
	ReasoningContent string `json:"reasoning_content"`
	Reasoning        string `json:"reasoning"`
	// Members the comparisons leave out, when present.
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
	ToolCalls        json.RawMessage `json:"tool_calls"`
	FunctionCall     json.RawMessage `json:"function_call"`
}

// answer returns the delta's content and thinking by the transport's
// rules (refusal is content; the first non-empty thinking field counts);
// ok is false when it holds members the comparisons leave out.
func (d *refDelta) answer() (content, thinking string, ok bool) {
	return d.Content + d.Refusal, cmpOr(d.ReasoningContent, d.Reasoning),
		d.ReasoningDetails == nil && d.ToolCalls == nil && d.FunctionCall == nil
}

type refChoice struct {
	Index        *float64        `json:"index"`
	Delta        *refDelta       `json:"delta"`
	Message      *refDelta       `json:"message"`
	Text         json.RawMessage `json:"text"`
	FinishReason string          `json:"finish_reason"`
}

type refChunk struct {
	Model   string      `json:"model"`
	Choices []refChoice `json:"choices"`
	Usage   struct {
		PromptTokens     *json.Number `json:"prompt_tokens"`
		CompletionTokens *json.Number `json:"completion_tokens"`
	} `json:"usage"`
}

// read decodes b as a plain client does; ok is false for a document that
// is not a JSON object.
func (r *refChunk) read(b []byte) bool {
	*r = refChunk{}
	var te *json.UnmarshalTypeError
	err := json.Unmarshal(b, r)
	return isObject(b) && (err == nil || errors.As(err, &te))
}

// picked is the choice of index 0 (or none), or nil.
func (r *refChunk) picked() *refChoice {
	for i := range r.Choices {
		if c := &r.Choices[i]; c.Index == nil || *c.Index < 1 {
			return c
		}
	}
	return nil
}

// gen makes random JSON text.
type gen struct{ r *rand.Rand }

// str returns a JSON string literal of random pieces.
func (g gen) str() string {
	pieces := []string{"a", "Hello", " ", "é", "中文", `\n`, `\"`, `\\`, `\/`, `\u00e9`, `\ud83d\ude00`, `\ud800`, `\udc00x`,
		`\u0001`, "\xff", "\xc3", "\xed\xa0\x80", "🙂", `\t`, `\u2028`}
	var b strings.Builder
	b.WriteByte('"')
	for range g.r.IntN(6) {
		b.WriteString(pieces[g.r.IntN(len(pieces))])
	}
	b.WriteByte('"')
	return b.String()
}

// num returns a JSON number in one of its forms.
func (g gen) num() string {
	return []string{"0", "7", "12", "-3", "0.5", "1e2", "2.5E1", "-0", "1e400", "9007199254740993", "3.0"}[g.r.IntN(11)]
}

// wrong returns a value of some kind, often not the one expected.
func (g gen) wrong() string {
	return []string{"null", "true", "5", `"x"`, "[]", "{}", `[{"a":1}]`}[g.r.IntN(7)]
}

// object joins members into an object, each given once or twice (the
// second time with another value of the same kind), in random order.
func (g gen) object(members ...[2]string) string {
	var parts []string
	for _, m := range members {
		if m[1] == "" {
			continue
		}
		parts = append(parts, strconv.Quote(m[0])+":"+m[1])
	}
	g.r.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return "{" + strings.Join(parts, ",") + "}"
}

func (g gen) maybe(p float64, v func() string) string {
	if g.r.Float64() < p {
		return v()
	}
	return ""
}

func (g gen) delta() string {
	content := g.str()
	if g.r.IntN(4) == 0 {
		// The content given twice: the last one is the content.
		content = g.str() + `,"content":` + g.str()
	}
	return g.object([2]string{"content", content}, [2]string{"reasoning_content", g.maybe(0.3, g.str)},
		[2]string{"role", g.maybe(0.3, func() string { return `"assistant"` })}, [2]string{"junk", g.maybe(0.2, g.wrong)})
}

func (g gen) choice(stream bool) string {
	key := "message"
	if stream {
		key = "delta"
	}
	return g.object([2]string{"index", g.maybe(0.8, func() string { return []string{"0", "1", "-1", "0.5", "null", "2"}[g.r.IntN(6)] })},
		[2]string{key, g.maybe(0.9, g.delta)},
		[2]string{"finish_reason", g.maybe(0.3, func() string { return []string{`"stop"`, `"length"`, "null"}[g.r.IntN(3)] })},
		[2]string{"logprobs", g.maybe(0.3, g.wrong)})
}

func (g gen) chunk(stream bool) string {
	var choices []string
	for range g.r.IntN(3) + 1 {
		choices = append(choices, g.choice(stream))
	}
	list := "[" + strings.Join(choices, ",") + "]"
	if g.r.IntN(8) == 0 {
		list = `[{"index":0,"` + map[bool]string{true: "delta", false: "message"}[stream] + `":{"content":"superseded"}}],"choices":` + list
	}
	usage := g.object([2]string{"prompt_tokens", g.num()}, [2]string{"completion_tokens", g.num()})
	return g.object([2]string{"id", g.maybe(0.5, g.str)}, [2]string{"model", g.maybe(0.7, g.str)}, [2]string{"choices", list},
		[2]string{"usage", g.maybe(0.3, func() string { return usage })}, [2]string{"system_fingerprint", g.maybe(0.3, g.wrong)})
}

// refCount is the transport's rule for a count, on a plain client's
// number: a float64 (none beyond it), negatives 0, fractions cut, at most
// 2^53.
func refCount(n *json.Number) (int, bool) {
	if n == nil {
		return 0, false
	}
	f, err := n.Float64()
	if err != nil {
		return 0, false
	}
	return int(min(max(f, 0), maxCount)), true
}

// TestBodyReadingMatchesEncodingJSON: random non-streamed bodies, read in
// random pieces, give what encoding/json reads from them.
func TestBodyReadingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	g := gen{rand.New(rand.NewPCG(1, 2))}
	for i := range 600 {
		body := []byte(g.chunk(false))
		sizes := []byte{byte(g.r.IntN(256)), byte(g.r.IntN(256)), byte(g.r.IntN(256))}
		if i%2 == 1 {
			// The body cut one byte short is no answer.
			cut := body[:len(body)-1]
			r, err := doWith(t, readerTransport{status: 200, ctype: "application/json", length: -1,
				body: func() io.Reader { return &testkit.SplitReader{Data: cut, Sizes: sizes, Mod: 61} }}, false)
			if err == nil {
				t.Fatalf("cut body %q read as %+v", cut, r)
			}
			continue
		}
		r, err := doWith(t, readerTransport{status: 200, ctype: "application/json", length: int64(len(body)),
			body: func() io.Reader { return &testkit.SplitReader{Data: body, Sizes: sizes, Mod: 61} }}, false)
		var ref refChunk
		if !ref.read(body) {
			t.Fatalf("generated an invalid body %q", body)
		}
		ch := ref.picked()
		if ch == nil || ch.Message == nil {
			if err == nil {
				t.Fatalf("%q: success %+v, encoding/json reads no answer", body, r)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", body, err)
		}
		want := answerOf{content: ch.Message.Content, thinking: ch.Message.ReasoningContent, finish: ch.FinishReason, model: cmpOr(ref.Model, "test-model")}
		got := answerOf{content: r.Content, thinking: r.Thinking, finish: r.FinishReason, model: r.Model}
		if got != want {
			t.Fatalf("%q:\n got %+v\nwant %+v", body, got, want)
		}
		checkUsage(t, body, &ref, r.PromptTokens, r.CompletionTokens, r.UsageSource)
	}
}

func checkUsage(t *testing.T, body []byte, ref *refChunk, prompt, completion int, source string) {
	t.Helper()
	p, pok := refCount(ref.Usage.PromptTokens)
	c, cok := refCount(ref.Usage.CompletionTokens)
	if pok && cok && (prompt != p || completion != c || source != "measured") {
		t.Fatalf("%q: usage %d/%d %s, encoding/json reads %d/%d", body, prompt, completion, source, p, c)
	}
}

// TestChunkReadingMatchesEncodingJSON: random streams of random chunks,
// read in random pieces, give what encoding/json reads from each chunk
// (up to the end of the answer: [DONE], or a chunk of usage without a
// choice after the finish).
func TestChunkReadingMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	g := gen{rand.New(rand.NewPCG(3, 4))}
	for range 300 {
		var events []string
		var content, thinking, finish, model strings.Builder
		picked, ended := false, false
		for range g.r.IntN(5) + 1 {
			ev := g.chunk(true)
			events = append(events, ev)
			var ref refChunk
			if !ref.read([]byte(ev)) {
				t.Fatalf("generated an invalid chunk %q", ev)
			}
			if ended {
				continue
			}
			if ref.Model != "" {
				model.Reset()
				model.WriteString(ref.Model)
			}
			ch := ref.picked()
			if ch == nil {
				_, pok := refCount(ref.Usage.PromptTokens)
				_, cok := refCount(ref.Usage.CompletionTokens)
				ended = finish.Len() > 0 && pok && cok
				continue
			}
			picked = true
			if ch.Delta != nil {
				content.WriteString(ch.Delta.Content)
				thinking.WriteString(ch.Delta.ReasoningContent)
			}
			if ch.FinishReason != "" {
				finish.Reset()
				finish.WriteString(ch.FinishReason)
			}
		}
		events = append(events, "[DONE]")
		body := sseBody(events...)
		sizes := []byte{byte(g.r.IntN(256)), byte(g.r.IntN(256))}
		r, err := doWith(t, readerTransport{status: 200, ctype: "text/event-stream", length: -1,
			body: func() io.Reader { return &testkit.SplitReader{Data: body, Sizes: sizes, Mod: 61} }}, true)
		if !picked {
			if err == nil {
				t.Fatalf("%s: success %+v without a choice to read", body, r)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want := answerOf{content: content.String(), thinking: thinking.String(), finish: finish.String(), model: cmpOr(model.String(), "test-model")}
		got := answerOf{content: r.Content, thinking: r.Thinking, finish: r.FinishReason, model: r.Model}
		if got != want {
			t.Fatalf("%s:\n got %+v\nwant %+v", body, got, want)
		}
	}
}

// normal is c with its empty buffers as nil and without its usage (NaN
// until read: compared by its vals), for comparison.
func normal(c wireChunk) wireChunk {
	c.Usage = usageNumbers{}
	if len(c.Model.raw) == 0 {
		c.Model.raw = nil
	}
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	return c
}

// FuzzChunkAfter is a chunk a stream's decoder reads after a fuzzed one.
const FuzzChunkAfter = ` {"model":"m","choices":[{"index":0,"delta":{"content":"after"}}]} `

// FuzzParseChunk reads any document as a chunk and as a non-streamed body,
// in reads of the sizes split gives. A document is a chunk exactly when it
// is a JSON object (encoding/json decides); the body read in pieces is read
// as the whole body is; and the picked choice's content, thinking and
// finish_reason, the model and the usage are encoding/json's reading.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"function":{"arguments":{"a":[1,2.5e3,-0]}}}]},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"error":{"code":400,"message":"\u00e9\ud83d\ude00"}}`,
		`{"a":01}`, `{"a":1.}`, `{"a":"\x01"}`, `{"a":[1,]}`, `{,}`, `[]`, `{"a":"\q"}`, `{"a":tru}`, ` {} `,
		`{"choices":[{"delta":{"content":[{"type":"text","text":"x"}]}}]}`,
		`{"choices":[{"index":0,"message":{"content":"A","content":"B"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"message":{"content":"A"}}],"choices":[{"index":0,"message":{"content":"B"}}]}`,
		`{"model":"m","choices":[{"index":0,"message":"alpha"}]}`,
	} {
		f.Add([]byte(s), []byte{1, 7, 200})
	}
	f.Fuzz(func(t *testing.T, in, split []byte) {
		var c wireChunk
		got := decodeChunk(in, &c)
		if want := json.Valid(in) && isObject(in); got != want {
			t.Fatalf("decodeChunk(%q) = %v, encoding/json says object = %v", in, got, want)
		}
		// The reused decoder of a stream reads each document as
		// json.Unmarshal does, before and after any other.
		var d chunkDecoder
		var c2 wireChunk
		for i, doc := range [][]byte{in, []byte(FuzzChunkAfter), in} {
			var want wireChunk
			ok := decodeChunk(doc, &want)
			if got := d.decodeChunk(doc, &c2); got != ok || ok && (!reflect.DeepEqual(normal(c2), normal(want)) || c2.Usage.vals() != want.Usage.vals()) {
				t.Fatalf("document %d %q: the stream's decoder reads (%v, %+v), json.Unmarshal (%v, %+v)", i, doc, got, c2, ok, want)
			}
		}
		whole := outcome(doWith(t, readerTransport{status: 200, ctype: "application/json", length: int64(len(in)),
			body: func() io.Reader { return bytes.NewReader(in) }}, false))
		pieces := outcome(doWith(t, readerTransport{status: 200, ctype: "application/json", length: -1,
			body: func() io.Reader { return &testkit.SplitReader{Data: in, Sizes: split, Mod: 61} }}, false))
		if pieces != whole {
			t.Fatalf("%q read in pieces %v: %+v, read whole %+v", in, split, pieces, whole)
		}
		if !got || c.isError() || whole.class != "" {
			return
		}
		var ref refChunk
		ref.read(in)
		ch := ref.picked()
		if ch == nil || ch.Message == nil || ch.Delta != nil || ch.Text != nil {
			return
		}
		if rc := c.picked(); rc == nil || rc.Message == nil || len(rc.Message.parts) > 0 {
			return // content as parts, or a message that was not an object at last
		}
		content, thinking, ok := ch.Message.answer()
		if !ok || strings.Contains(content, "<") {
			return
		}
		want := answerOf{content: content, thinking: thinking, finish: ch.FinishReason, model: cmpOr(ref.Model, "test-model")}
		if g := (answerOf{content: whole.content, thinking: whole.thinking, finish: whole.finish, model: whole.model}); g != want {
			t.Fatalf("%q:\n got %+v\nwant %+v", in, g, want)
		}
	})
}
