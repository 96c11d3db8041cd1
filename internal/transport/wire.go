package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
)

// The upstream's JSON — a non-streaming body, each streaming chunk, each
// error body — is read with encoding/json into the small typed shapes of
// this file: what the transport needs, nothing else. Reading is
// json.Unmarshal's, with its rules:
//
//   - member names match their field in any case ("Content" is content);
//   - of a key given twice the last value wins, and objects given twice
//     are read into the same value one after the other (a field set by the
//     first and absent from the second keeps its value);
//   - a value of the wrong kind (a number where a string belongs, an
//     array where an object belongs) is passed over and leaves its field
//     as it was — Unmarshal reports it as an *json.UnmarshalTypeError,
//     which is no fault of the document;
//   - strings are unescaped as encoding/json does (invalid UTF-8 and lone
//     surrogates become U+FFFD).
//
// Three things Unmarshal cannot tell from a typed field are read by
// readOdd, only for a document in which some value had the wrong kind:
// a message or delta that was there but not an object, and content given
// as an array of parts.

// count is a JSON number read as a count: negatives are 0, fractions are
// cut, values beyond 2^53 are 2^53. ok is false until a number was read; a
// value of another kind (null included), or a number beyond a float64,
// leaves the count as it was.
type count struct {
	n  int64
	ok bool
}

// maxCount bounds every count (the largest integer a float64 holds exactly).
const maxCount = 1 << 53

// UnmarshalJSON implements json.Unmarshaler. encoding/json hands it a
// literal it has already scanned as valid JSON; a number literal is
// converted by strconv.ParseFloat, as encoding/json converts one into a
// float64.
func (c *count) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '-' && (b[0] < '0' || b[0] > '9') {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Beyond a float64 (1e400): encoding/json reads no number either.
		return nil
	}
	c.n, c.ok = int64(min(max(f, 0), maxCount)), true
	return nil
}

// errorValue records whether a top-level "error" member reports an error:
// any value but null, false and "" does. The last one given decides.
type errorValue bool

// UnmarshalJSON implements json.Unmarshaler.
func (e *errorValue) UnmarshalJSON(b []byte) error {
	s := string(b)
	*e = errorValue(s != "null" && s != "false" && s != `""`)
	return nil
}

// errorMark records whether a "type" or "object" member is the string
// "error" (compared as JSON text; decoded only when it has escapes, so
// that the usual "chat.completion.chunk" costs nothing). The last string
// given decides; other kinds leave it as it was.
type errorMark bool

// UnmarshalJSON implements json.Unmarshaler.
func (m *errorMark) UnmarshalJSON(b []byte) error {
	switch {
	case string(b) == `"error"`:
		*m = true
	case b[0] == '"' && bytes.IndexByte(b, '\\') >= 0:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*m = errorMark(s == "error")
	case b[0] == '"':
		*m = false
	}
	return nil
}

// modelText is the JSON text of a "model" string member, kept in a buffer
// reused from chunk to chunk: the model is decoded only when it changes
// (see assembler.apply). null and other kinds leave it as it was.
type modelText struct{ raw []byte }

// UnmarshalJSON implements json.Unmarshaler.
func (m *modelText) UnmarshalJSON(b []byte) error {
	if b[0] == '"' {
		m.raw = append(m.raw[:0], b...)
	}
	return nil
}

// optString is a string member whose presence matters: ok is true once a
// string was read; a value of another kind (null included) leaves it as it
// was.
type optString struct {
	s  string
	ok bool
}

// UnmarshalJSON implements json.Unmarshaler.
func (o *optString) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '"' {
		return nil
	}
	if err := json.Unmarshal(b, &o.s); err != nil {
		return err
	}
	o.ok = true
	return nil
}

// arguments are a tool call's arguments: a JSON string (OpenAI), read as
// its text, or an object or array (some servers), kept as its JSON text as
// sent. Other kinds leave it as it was.
type arguments string

// UnmarshalJSON implements json.Unmarshaler.
func (a *arguments) UnmarshalJSON(b []byte) error {
	switch b[0] {
	case '"':
		return json.Unmarshal(b, (*string)(a))
	case '{', '[':
		*a = arguments(b)
	}
	return nil
}

// usageVals is one usage object as the assembler counts it.
type usageVals struct {
	prompt, completion, total          int64
	hasPrompt, hasCompletion, hasTotal bool
	// cached is the part of prompt served from the provider's prompt cache
	// (OpenAI prompt_tokens_details.cached_tokens, DeepSeek
	// prompt_cache_hit_tokens).
	cached int64
}

// complete reports whether the usage object carries both halves (completion
// may be derived from total − prompt).
func (u usageVals) complete() bool {
	return u.hasPrompt && (u.hasCompletion || u.hasTotal)
}

// tokens returns prompt and completion tokens of a complete usage object.
func (u usageVals) tokens() (prompt, completion int) {
	c := u.completion
	if !u.hasCompletion {
		c = max(u.total-u.prompt, 0)
	}
	return int(u.prompt), int(c)
}

// wireUsage is a usage object, in OpenAI's or Anthropic's names (a
// choice's; the top-level one is read as usageNumbers).
type wireUsage struct {
	PromptTokens     count `json:"prompt_tokens"`
	InputTokens      count `json:"input_tokens"`
	CompletionTokens count `json:"completion_tokens"`
	OutputTokens     count `json:"output_tokens"`
	TotalTokens      count `json:"total_tokens"`
	// Cached prompt tokens: DeepSeek's prompt_cache_hit_tokens, OpenAI's
	// prompt_tokens_details.cached_tokens.
	PromptCacheHitTokens count `json:"prompt_cache_hit_tokens"`
	PromptTokensDetails  struct {
		CachedTokens count `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// vals returns the usage as the assembler counts it; OpenAI's names win
// over Anthropic's when both are given.
func (u *wireUsage) vals() usageVals {
	pick := func(a, b count) count {
		if a.ok {
			return a
		}
		return b
	}
	p, c := pick(u.PromptTokens, u.InputTokens), pick(u.CompletionTokens, u.OutputTokens)
	v := usageVals{prompt: p.n, hasPrompt: p.ok, completion: c.n, hasCompletion: c.ok,
		total: u.TotalTokens.n, hasTotal: u.TotalTokens.ok}
	v.cached = pick(u.PromptTokensDetails.CachedTokens, u.PromptCacheHitTokens).n
	return v
}

// usageNumbers is the top-level usage object, read into plain numbers (a
// custom decoder per number costs more than the rest of a body's usage):
// each is NaN until a number is read (see wireChunk.reset), so that a
// missing one is told from 0 as count tells it. A number beyond a float64
// is passed over as json.Unmarshal passes it over.
type usageNumbers struct {
	PromptTokens         float64 `json:"prompt_tokens"`
	InputTokens          float64 `json:"input_tokens"`
	CompletionTokens     float64 `json:"completion_tokens"`
	OutputTokens         float64 `json:"output_tokens"`
	TotalTokens          float64 `json:"total_tokens"`
	PromptCacheHitTokens float64 `json:"prompt_cache_hit_tokens"`
	PromptTokensDetails  struct {
		CachedTokens float64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// absent is the value of a number not read.
var absent = math.NaN()

// unread sets every number of u to absent.
func (u *usageNumbers) unread() {
	*u = usageNumbers{absent, absent, absent, absent, absent, absent, struct {
		CachedTokens float64 `json:"cached_tokens"`
	}{absent}}
}

// vals returns the usage as the assembler counts it, by count's rules.
func (u *usageNumbers) vals() usageVals {
	c := func(f float64) count {
		if math.IsNaN(f) {
			return count{}
		}
		return count{int64(min(max(f, 0), maxCount)), true}
	}
	w := wireUsage{PromptTokens: c(u.PromptTokens), InputTokens: c(u.InputTokens), CompletionTokens: c(u.CompletionTokens),
		OutputTokens: c(u.OutputTokens), TotalTokens: c(u.TotalTokens), PromptCacheHitTokens: c(u.PromptCacheHitTokens)}
	w.PromptTokensDetails.CachedTokens = c(u.PromptTokensDetails.CachedTokens)
	return w.vals()
}

// wireFunction is a tool call's function (or a legacy function_call).
type wireFunction struct {
	Name      string    `json:"name"`
	Arguments arguments `json:"arguments"`
}

// wireToolCall is one element of a delta's (or message's) tool_calls.
type wireToolCall struct {
	Index    count        `json:"index"`
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

// wireDetail is one element of reasoning_details.
type wireDetail struct {
	Text string `json:"text"`
}

// wireDelta is a streaming chunk's delta or a body's message.
type wireDelta struct {
	Content          string         `json:"content"`
	Refusal          string         `json:"refusal"`
	ReasoningContent string         `json:"reasoning_content"`
	Reasoning        string         `json:"reasoning"`
	ReasoningDetails []wireDetail   `json:"reasoning_details"`
	ToolCalls        []wireToolCall `json:"tool_calls"`
	// FunctionCall is the legacy single function call: one tool call at
	// index 0.
	FunctionCall *wireFunction `json:"function_call"`

	// parts holds the text of content given as an array of parts (set by
	// readOdd).
	parts []string
}

// wireChoice is one element of choices.
type wireChoice struct {
	// Index is the choice's index: one read as 0 (absent, null, another
	// kind, a negative number or a fraction below 1) is the answer's.
	Index float64 `json:"index"`
	// Delta and Message are pointers so that an absent or null one is nil
	// (readOdd clears one that was not an object).
	Delta   *wireDelta `json:"delta"`
	Message *wireDelta `json:"message"`
	// Text is the legacy completions' text.
	Text         optString `json:"text"`
	FinishReason string    `json:"finish_reason"`
	Usage        wireUsage `json:"usage"`
}

// answer reports whether the choice carries its answer: a delta or message
// object, or a text string.
func (c *wireChoice) answer() bool { return c.Delta != nil || c.Message != nil || c.Text.ok }

// wireChunk is one streaming chunk or non-streaming body.
type wireChunk struct {
	Model   modelText    `json:"model"`
	Choices []wireChoice `json:"choices"`
	Usage   usageNumbers `json:"usage"`
	// Error, a "type" or "object" of "error", and a MiniMax
	// base_resp.status_code other than 0 say the document is an error.
	Error    errorValue `json:"error"`
	Type     errorMark  `json:"type"`
	Object   errorMark  `json:"object"`
	BaseResp struct {
		StatusCode count `json:"status_code"`
	} `json:"base_resp"`
}

// isError reports whether the chunk is an error in place of an answer.
func (c *wireChunk) isError() bool {
	return bool(c.Error) || bool(c.Type) || bool(c.Object) || c.BaseResp.StatusCode.n != 0
}

// picked returns the choice that holds the answer: the first of index 0
// (or of none), or nil.
func (c *wireChunk) picked() *wireChoice {
	for i := range c.Choices {
		if ch := &c.Choices[i]; ch.Index < 1 {
			return ch
		}
	}
	return nil
}

// reset empties c for the next document, keeping the choices' array and
// the model's buffer.
func (c *wireChunk) reset() {
	choices := c.Choices[:cap(c.Choices)]
	clear(choices)
	*c = wireChunk{Choices: choices[:0], Model: modelText{raw: c.Model.raw[:0]}}
	c.Usage.unread()
}

// decodeChunk reads data, one JSON document, into c (reset first). It
// reports false when data is not a JSON object.
func decodeChunk(data []byte, c *wireChunk) bool {
	return readChunk(data, c, func(data []byte, c *wireChunk) error { return json.Unmarshal(data, c) })
}

// readChunk is decodeChunk with unmarshal reading data into c.
func readChunk(data []byte, c *wireChunk, unmarshal func([]byte, *wireChunk) error) bool {
	c.reset()
	keep := c.Choices
	if !isObject(data) {
		return false
	}
	err := unmarshal(data, c)
	if len(c.Choices) == 0 && cap(c.Choices) == 0 {
		c.Choices = keep[:0] // "choices":[] replaced the array; keep ours
	}
	switch {
	case err == nil:
		return true
	case isTypeError(err):
		// A value of the wrong kind somewhere: the document is whole,
		// what Unmarshal could not read into a field is read now.
		readOdd(data, c)
		return true
	}
	return false
}

// isTypeError reports whether err is encoding/json's report of a value of
// the wrong kind (the document itself is valid).
func isTypeError(err error) bool {
	var te *json.UnmarshalTypeError
	return errors.As(err, &te)
}

// maxChoices bounds the choices of one document, and maxToolCalls the
// tool calls of its choices together: read into structs, an element of
// three bytes ("{},") takes a hundred times that, so a document of many
// is refused before it is read (an answer has n ≤ 128 choices and tens of
// tool calls).
const (
	maxChoices   = 1024
	maxToolCalls = 16384
)

// fewParts reports whether data, a JSON document, has at most maxChoices
// choices and maxToolCalls tool calls in them. It reads data into
// elements of no size (the choices), then of two slice headers (their
// deltas' and messages' tool calls) once the choices are known to be few:
// counting costs no memory for each element. A document it cannot read
// is left to the decoder to judge.
func fewParts(data []byte) bool {
	var choices struct {
		Choices []struct{} `json:"choices"`
	}
	_ = json.Unmarshal(data, &choices) // a type error leaves what was read
	if len(choices.Choices) > maxChoices {
		return false
	}
	type calls struct {
		ToolCalls []struct{} `json:"tool_calls"`
	}
	var tools struct {
		Choices []struct{ Delta, Message calls } `json:"choices"`
	}
	_ = json.Unmarshal(data, &tools) // a type error leaves what was read
	n := 0
	for _, ch := range tools.Choices {
		n += len(ch.Delta.ToolCalls) + len(ch.Message.ToolCalls)
	}
	return n <= maxToolCalls
}

// maxDecoded is the largest document chunkDecoder reads with its reused
// json.Decoder; a larger one is read by json.Unmarshal, which does not
// copy it into a buffer of its own.
const maxDecoded = 64 << 10

// chunkDecoder reads the documents of one attempt (a stream's chunks) with
// one json.Decoder, reused from document to document: its state is not
// made anew each time, as json.Unmarshal's is. Each document is read as
// json.Unmarshal reads it: a value that is not followed by white space
// only is no document; an error that is not a type error leaves the
// decoder to be made anew.
type chunkDecoder struct {
	src docReader
	dec *json.Decoder
	// stream is set for a stream's chunks: their deltas are then read
	// into deltas, reused from chunk to chunk, instead of new ones (a
	// stream has no use for telling an absent delta from an empty one).
	stream bool
	deltas []wireDelta
}

// docReader hands a json.Decoder one document, then io.EOF.
type docReader struct{ b []byte }

func (r *docReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// decodeChunk is the package's decodeChunk, read by d. A document larger
// than maxDecoded is first counted (fewParts).
func (d *chunkDecoder) decodeChunk(data []byte, c *wireChunk) bool {
	if len(data) > maxDecoded {
		return fewParts(data) && decodeChunk(data, c)
	}
	return readChunk(data, c, d.unmarshal)
}

func (d *chunkDecoder) unmarshal(data []byte, c *wireChunk) error {
	if d.dec == nil {
		d.dec = json.NewDecoder(&d.src)
	}
	if d.stream {
		choices := c.Choices[:cap(c.Choices)]
		if len(d.deltas) < len(choices) {
			d.deltas = make([]wireDelta, len(choices))
		}
		clear(d.deltas)
		for i := range choices {
			choices[i].Delta = &d.deltas[i]
		}
	}
	// Without white space around it, the document is one value exactly
	// when the decoder's value ends where the document does.
	data = bytes.TrimSpace(data)
	d.src.b = data
	start := d.dec.InputOffset()
	err := d.dec.Decode(c)
	if err == nil || isTypeError(err) {
		if d.dec.InputOffset()-start == int64(len(data)) {
			return err
		}
		err = errTrailing
	}
	d.dec = nil
	return err
}

// errTrailing is the error of a document followed by more than white
// space.
var errTrailing = errors.New("transport: data after the JSON value")

// isObject reports whether data, after white space, begins an object.
func isObject(data []byte) bool {
	d := bytes.TrimLeft(data, " \t\r\n")
	return len(d) > 0 && d[0] == '{'
}

// oddChunk reads what a typed field cannot tell: the kind of each
// choice's delta and message (the last one given decides), and content
// given as parts.
type oddChunk struct {
	Choices []oddChoice `json:"choices"`
}

type oddChoice struct {
	Delta   oddDelta `json:"delta"`
	Message oddDelta `json:"message"`
}

// jsonKind is the first byte of the last value given ('{', '[', '"', 'n',
// 't', 'f' or a digit or '-'); 0 when none was.
type jsonKind byte

// UnmarshalJSON implements json.Unmarshaler.
func (k *jsonKind) UnmarshalJSON(b []byte) error {
	*k = jsonKind(b[0])
	return nil
}

// oddDelta is a delta or message: its kind and, when its content is an
// array, the text of its text parts.
type oddDelta struct {
	kind  jsonKind
	parts []string
}

// contentPart is one element of a content array: a text part ("text",
// "output_text" or untyped) with a string text counts.
type contentPart struct {
	Type optString `json:"type"`
	Text optString `json:"text"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (d *oddDelta) UnmarshalJSON(b []byte) error {
	d.kind = jsonKind(b[0])
	if b[0] != '{' {
		return nil
	}
	var v struct {
		Content []contentPart `json:"content"`
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(b, &v); err != nil && !errors.As(err, &te) {
		return err
	}
	d.parts = d.parts[:0]
	for _, p := range v.Content {
		if p.Text.ok && (!p.Type.ok || p.Type.s == "text" || p.Type.s == "output_text") {
			d.parts = append(d.parts, p.Text.s)
		}
	}
	return nil
}

// readOdd completes c, read from data with some value of the wrong kind:
// a delta or message whose last value was not an object is none, and
// content arrays give their text parts.
func readOdd(data []byte, c *wireChunk) {
	var odd oddChunk
	if json.Unmarshal(data, &odd) != nil && len(odd.Choices) == 0 {
		return
	}
	for i := range c.Choices {
		if i >= len(odd.Choices) {
			break
		}
		ch, o := &c.Choices[i], &odd.Choices[i]
		if o.Delta.kind != '{' {
			ch.Delta = nil
		} else if ch.Delta != nil {
			ch.Delta.parts = o.Delta.parts
		}
		if o.Message.kind != '{' {
			ch.Message = nil
		} else if ch.Message != nil {
			ch.Message.parts = o.Message.parts
		}
	}
}
