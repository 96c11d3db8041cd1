package transport

import (
	"encoding/json"
	"sync"

	"github.com/polygateway/polygateway/internal/core"
)

// Request bodies are encoded with encoding/json (HTML escaping off)
// through a pooled json.Encoder: the opening {"model":…,"messages": once
// per endpoint and model (modelHead), the messages in one Encode call of
// a slice over the caller's strings (no copies), the stream members as
// encoded once at start (streamTail), then each further member's value in
// one call. Keys made of
// letters, digits, '_', '-' and '.' (all the API's) are written as they
// are, which is what encoding/json writes for them; others go through the
// encoder too. Numbers keep their exact text through json.Number; a
// json.RawMessage is validated and compacted.
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

// The messages travel as a slice of wirePlain when every message is a
// role and a text, of wireText when no message has content parts, else of
// wireMessage (a concrete type, so that encoding/json never goes through
// an interface; the smallest that holds the call, as each field costs
// encoding/json time on every message).

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

// wireMessage is one chat message of a call where some message has
// content parts.
type wireMessage struct {
	Role string `json:"role"`
	// Content is a *string, or a *[]wirePart (parts).
	Content    any        `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`
	Prefix     bool       `json:"prefix,omitempty"`

	parts []wirePart
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
	// shape says which of plains, texts and msgs holds the messages.
	shape  wireShape
	plains []wirePlain
	texts  []wireText
	msgs   []wireMessage
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
	e.shape, e.thinkKey = shapePlain, ""
	e.schema.JSONSchema.Schema = nil
	clear(e.plains)
	clear(e.texts)
	clear(e.msgs)
	clear(e.parts)
	clear(e.calls)
	clear(e.keys)
	if cap(e.plains) <= maxPooledWire && cap(e.texts) <= maxPooledWire && cap(e.msgs) <= maxPooledWire && cap(e.parts) <= maxPooledWire &&
		cap(e.calls) <= maxPooledWire && cap(e.keys) <= maxPooledWire {
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

// key appends ,"k": for the key at *k.
func (e *bodyEncoder) key(k *string) {
	e.w.b = append(e.w.b, ',')
	if plainKey(*k) {
		e.w.b = append(e.w.b, '"')
		e.w.b = append(e.w.b, *k...)
		e.w.b = append(e.w.b, '"')
	} else {
		_ = e.value(k) // a string always encodes
	}
	e.w.b = append(e.w.b, ':')
}

// member appends ,"k":v; an empty json.RawMessage stands for null
// (encoding/json would refuse it).
func (e *bodyEncoder) member(k *string, v any) error {
	e.key(k)
	if raw, ok := v.(json.RawMessage); ok && len(raw) == 0 {
		e.w.b = append(e.w.b, "null"...)
		return nil
	}
	if err := e.value(v); err != nil {
		return &fieldError{key: *k, err: err}
	}
	return nil
}

// plainKey reports whether encoding/json writes k between quotes as it is:
// it holds only ASCII letters, digits, '_', '-' and '.'.
func plainKey(k string) bool {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// wireShape says which wire message type a call's messages travel in.
type wireShape uint8

const (
	shapePlain wireShape = iota // wirePlain
	shapeText                   // wireText
	shapeParts                  // wireMessage
)

// messages fills the wire messages from msgs and sets shape to the wire
// type that carries them; prefix asks for the trailing assistant message to be marked as
// the prefill to continue (DeepSeek's prefix completion).
func (e *bodyEncoder) messages(msgs []core.Message, prefix bool) {
	nparts, ncalls, extra := 0, 0, false
	for i := range msgs {
		m := &msgs[i]
		nparts += len(m.Parts)
		ncalls += len(m.ToolCalls)
		extra = extra || m.Name != "" || m.ToolCallID != ""
	}
	prefix = prefix && len(msgs) > 0 && cmpOr(msgs[len(msgs)-1].Role, core.RoleUser) == core.RoleAssistant
	if nparts == 0 && ncalls == 0 && !extra && !prefix {
		e.plains = grow(e.plains, len(msgs))
		for i := range msgs {
			m, w := &msgs[i], &e.plains[i]
			w.Role, w.Content = cmpOr(m.Role, core.RoleUser), m.Content
		}
		e.shape = shapePlain
		return
	}
	e.calls = grow(e.calls, ncalls)
	calls := e.calls
	toolCalls := func(m *core.Message) []wireCall {
		if len(m.ToolCalls) == 0 {
			return nil
		}
		var w []wireCall
		w, calls = calls[:len(m.ToolCalls):len(m.ToolCalls)], calls[len(m.ToolCalls):]
		for j := range m.ToolCalls {
			tc, wc := &m.ToolCalls[j], &w[j]
			wc.ID, wc.Type = tc.ID, tc.Type
			if wc.Type == "" {
				wc.Type = "function"
			}
			wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
		}
		return w
	}
	last := len(msgs) - 1
	if nparts == 0 {
		e.texts = grow(e.texts, len(msgs))
		for i := range msgs {
			m, w := &msgs[i], &e.texts[i]
			w.Role = cmpOr(m.Role, core.RoleUser)
			w.Content, w.Name, w.ToolCallID = m.Content, m.Name, m.ToolCallID
			w.ToolCalls, w.Prefix = toolCalls(m), prefix && i == last
		}
		e.shape = shapeText
		return
	}
	e.msgs = grow(e.msgs, len(msgs))
	e.parts = grow(e.parts, nparts)
	parts := e.parts
	for i := range msgs {
		m, w := &msgs[i], &e.msgs[i]
		w.Role = cmpOr(m.Role, core.RoleUser)
		w.Name, w.ToolCallID = m.Name, m.ToolCallID
		if len(m.Parts) == 0 {
			w.Content = &m.Content
		} else {
			w.parts, parts = parts[:len(m.Parts):len(m.Parts)], parts[len(m.Parts):]
			for j := range m.Parts {
				setPart(&w.parts[j], &m.Parts[j])
			}
			w.Content = &w.parts
		}
		w.ToolCalls, w.Prefix = toolCalls(m), prefix && i == last
	}
	e.shape = shapeParts
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
	if p.Type == core.PartImageURL || p.Type == "" && p.ImageURL != "" {
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
