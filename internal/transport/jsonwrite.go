package transport

import (
	"encoding/json"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// Request bodies are encoded with encoding/json (HTML escaping off)
// through a pooled json.Encoder into one buffer: the opening
// {"model":…,"messages": once per endpoint and model (modelHead), each
// message in turn — encoded from the caller's message through a wire
// struct that refers to its strings (nothing is copied, not even into a
// slice of another type) — the stream members as encoded once at start
// (streamTail), then each further member's key and value. The encoder
// writes every key and value; the buffer only receives the punctuation
// that joins them ('[', ',', ':', ']', '}'). Numbers keep their exact text
// through json.Number; a json.RawMessage is validated and compacted.
//
// encoding/json/jsontext would need GOEXPERIMENT=jsonv2, and
// github.com/go-json-experiment/json a go 1.26 directive; neither is used.

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// wireModel and wireStream are the members of a request body the
// transport owns besides the messages; they are encoded once (an
// endpoint's opening, see modelHead; the three stream tails).
type wireModel struct {
	Model string `json:"model"`
}

type wireStream struct {
	Stream        bool               `json:"stream"`
	StreamOptions *wireStreamOptions `json:"stream_options,omitempty"`
}

type wireStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

var includeUsage = &wireStreamOptions{IncludeUsage: true}

// Each message travels as a wirePlain when it is a role and a text, as a
// wireText when it has no content parts, else as a wireMessage: the
// smallest that holds it, as each field costs encoding/json time. All
// three write a message the same way.

// wirePlain is one chat message that is a role and a text, and nothing
// else: the most common case, encoded about 35 ns faster than a wireText
// (measured per message with encoding/json).
type wirePlain struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// wireText is one chat message with text content, as the upstream reads
// it, without wireMessage's interface field.
type wireText struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	// Prefix marks the assistant prefill of a continuation (DeepSeek).
	Prefix bool `json:"prefix,omitempty"`
}

// wireMessage is one chat message with content parts.
type wireMessage struct {
	Role       string      `json:"role"`
	Content    *[]wirePart `json:"content"`
	Name       string      `json:"name,omitempty"`
	ToolCallID string      `json:"tool_call_id,omitempty"`
	ToolCalls  []wireCall  `json:"tool_calls,omitempty"`
	Prefix     bool        `json:"prefix,omitempty"`
}

// wirePart is one element of a content array: text, or an image URL.
type wirePart struct {
	Type     string     `json:"type"`
	Text     *string    `json:"text,omitempty"`
	ImageURL *wireImage `json:"image_url,omitempty"`

	img wireImage
}

type wireImage struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// wireCall is one tool call of an assistant message sent back.
type wireCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// wireSchema is the response_format of a structured call sent natively.
type wireSchema struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// bodyEncoder is the reusable state of one request encoding.
type bodyEncoder struct {
	w   sliceWriter
	enc *json.Encoder
	// plain, text and msg are the wire form of the message being encoded;
	// parts and calls its content parts and tool calls.
	plain  wirePlain
	text   wireText
	msg    wireMessage
	parts  []wirePart
	calls  []wireCall
	keys   []string
	schema wireSchema
	// thinkKey is the thinking switch's key (addressable, for key).
	thinkKey string
}

// maxPooledWire bounds the wire slices an encoder keeps for reuse.
const maxPooledWire = 1024

var bodyEncoders = sync.Pool{New: func() any {
	e := &bodyEncoder{}
	e.enc = json.NewEncoder(&e.w)
	e.enc.SetEscapeHTML(false)
	e.schema.Type, e.schema.JSONSchema.Name = "json_schema", "response"
	return e
}}

func getBodyEncoder(b []byte) *bodyEncoder {
	e := bodyEncoders.Get().(*bodyEncoder)
	e.w.b = b
	return e
}

// done returns the encoded bytes and puts e back, holding on to nothing of
// the caller's.
func (e *bodyEncoder) done() []byte {
	b := e.w.b
	e.w.b = nil
	e.thinkKey = ""
	e.plain, e.text, e.msg = wirePlain{}, wireText{}, wireMessage{}
	e.schema.JSONSchema.Schema = nil
	clear(e.parts)
	clear(e.calls)
	clear(e.keys)
	if cap(e.parts) <= maxPooledWire && cap(e.calls) <= maxPooledWire && cap(e.keys) <= maxPooledWire {
		bodyEncoders.Put(e)
	}
	return b
}

// value appends v as JSON. v should be a pointer (or already an
// interface value) so that passing it does not allocate.
func (e *bodyEncoder) value(v any) error {
	if err := e.enc.Encode(v); err != nil {
		return err
	}
	e.w.b = e.w.b[:len(e.w.b)-1] // Encode's newline
	return nil
}

// key appends ,"k": for the key at *k, the key encoded by encoding/json.
func (e *bodyEncoder) key(k *string) {
	e.w.b = append(e.w.b, ',')
	_ = e.value(k) // a string always encodes
	e.w.b = append(e.w.b, ':')
}

// member appends ,"k":v; an empty json.RawMessage stands for null
// (encoding/json would refuse it).
func (e *bodyEncoder) member(k *string, v any) error {
	e.key(k)
	if raw, ok := v.(json.RawMessage); ok && len(raw) == 0 {
		v = nullValue
	}
	if err := e.value(v); err != nil {
		return &fieldError{key: *k, err: err}
	}
	return nil
}

// nullValue is a nil pointer, which encoding/json writes as null.
var nullValue = (*struct{})(nil)

// messages appends msgs as a JSON array; prefix asks for the trailing
// assistant message to be marked as the prefill to continue (DeepSeek's
// prefix completion).
func (e *bodyEncoder) messages(msgs []core.Message, prefix bool) error {
	prefix = prefix && len(msgs) > 0 && cmpOr(msgs[len(msgs)-1].Role, core.RoleUser) == core.RoleAssistant
	last := len(msgs) - 1
	e.w.b = append(e.w.b, '[')
	for i := range msgs {
		if i > 0 {
			e.w.b = append(e.w.b, ',')
		}
		if err := e.message(&msgs[i], prefix && i == last); err != nil {
			return err
		}
	}
	e.w.b = append(e.w.b, ']')
	return nil
}

// message appends one message in the smallest wire form that holds it.
func (e *bodyEncoder) message(m *core.Message, prefix bool) error {
	role := cmpOr(m.Role, core.RoleUser)
	switch {
	case len(m.Parts) == 0 && len(m.ToolCalls) == 0 && m.Name == "" && m.ToolCallID == "" && !prefix:
		e.plain = wirePlain{Role: role, Content: m.Content}
		return e.value(&e.plain)
	case len(m.Parts) == 0:
		e.text = wireText{Role: role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: e.toolCalls(m), Prefix: prefix}
		return e.value(&e.text)
	}
	e.parts = grow(e.parts, len(m.Parts))
	for j := range m.Parts {
		setPart(&e.parts[j], &m.Parts[j])
	}
	e.msg = wireMessage{Role: role, Content: &e.parts, Name: m.Name, ToolCallID: m.ToolCallID, ToolCalls: e.toolCalls(m), Prefix: prefix}
	return e.value(&e.msg)
}

// toolCalls returns the wire form of m's tool calls (nil without any).
func (e *bodyEncoder) toolCalls(m *core.Message) []wireCall {
	if len(m.ToolCalls) == 0 {
		return nil
	}
	e.calls = grow(e.calls, len(m.ToolCalls))
	for j := range m.ToolCalls {
		tc, wc := &m.ToolCalls[j], &e.calls[j]
		wc.ID, wc.Type = tc.ID, cmpOr(tc.Type, "function")
		wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
	}
	return e.calls
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// setPart fills w from p: an image part when typed so (or untyped with a
// URL), a text part otherwise.
func setPart(w *wirePart, p *core.ContentPart) {
	if p.IsImage() {
		w.Type, w.Text = "image_url", nil
		w.img = wireImage{URL: p.ImageURL, Detail: p.Detail}
		w.ImageURL = &w.img
		return
	}
	w.Type, w.Text, w.ImageURL = "text", &p.Text, nil
}

// grow returns s with length n, reusing its array when large enough; never
// nil, so that no messages encode as [] whatever the pooled encoder held.
func grow[T any](s []T, n int) []T {
	if s == nil || cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
