package transport

import (
	"encoding/json"
	"sync"

	"github.com/polygateway/polygateway/internal/core"
)

// Request bodies are encoded with encoding/json (HTML escaping off): the
// top-level object is laid out by encodeRequest, each value goes through a
// pooled json.Encoder, and the messages go as one slice of wire structs
// built over the caller's strings (no copies). Numbers keep their exact
// text through json.Number; a json.RawMessage is validated and compacted.
//
// encoding/json/jsontext would need GOEXPERIMENT=jsonv2, and
// github.com/go-json-experiment/json a go 1.26 directive; neither is used.

// sliceWriter appends what is written to b.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// wireMessage is one chat message as the upstream reads it.
type wireMessage struct {
	Role string `json:"role"`
	// Content is a *string, or a *[]wirePart (parts).
	Content    any        `json:"content"`
	Name       string     `json:"name,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	ToolCalls  []wireCall `json:"tool_calls,omitempty"`

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

// bodyEncoder is the reusable state of one request encoding.
type bodyEncoder struct {
	w     sliceWriter
	enc   *json.Encoder
	msgs  []wireMessage
	parts []wirePart
	calls []wireCall
	keys  []string
	// key is an addressable home for a key that is not in keys.
	key string
}

// maxPooledWire bounds the wire slices an encoder keeps for reuse.
const maxPooledWire = 1024

var bodyEncoders = sync.Pool{New: func() any {
	e := &bodyEncoder{}
	e.enc = json.NewEncoder(&e.w)
	e.enc.SetEscapeHTML(false)
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
	clear(e.msgs)
	clear(e.parts)
	clear(e.calls)
	clear(e.keys)
	e.key = ""
	if cap(e.msgs) <= maxPooledWire && cap(e.parts) <= maxPooledWire && cap(e.calls) <= maxPooledWire {
		e.msgs, e.parts, e.calls, e.keys = e.msgs[:0], e.parts[:0], e.calls[:0], e.keys[:0]
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

// raw appends bytes that are JSON already.
func (e *bodyEncoder) raw(s string) { e.w.b = append(e.w.b, s...) }

// member appends ,"k":v for a key at e.keys[i] or e.key.
func (e *bodyEncoder) member(k *string, v any) error {
	e.w.b = append(e.w.b, ',')
	if err := e.value(k); err != nil {
		return err
	}
	e.w.b = append(e.w.b, ':')
	if raw, ok := v.(json.RawMessage); ok && len(raw) == 0 {
		// An empty RawMessage stands for null (encoding/json would fail).
		e.raw("null")
		return nil
	}
	if err := e.value(v); err != nil {
		return &fieldError{key: *k, err: err}
	}
	return nil
}

// messages appends the messages as a JSON array.
func (e *bodyEncoder) messages(msgs []core.Message) error {
	nparts, ncalls := 0, 0
	for i := range msgs {
		nparts += len(msgs[i].Parts)
		ncalls += len(msgs[i].ToolCalls)
	}
	e.msgs = grow(e.msgs, len(msgs))
	e.parts = grow(e.parts, nparts)
	e.calls = grow(e.calls, ncalls)
	parts, calls := e.parts, e.calls
	for i := range msgs {
		m, w := &msgs[i], &e.msgs[i]
		w.Role = m.Role
		if w.Role == "" {
			w.Role = core.RoleUser
		}
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
		w.ToolCalls = nil
		if len(m.ToolCalls) > 0 {
			w.ToolCalls, calls = calls[:len(m.ToolCalls):len(m.ToolCalls)], calls[len(m.ToolCalls):]
			for j := range m.ToolCalls {
				tc, wc := &m.ToolCalls[j], &w.ToolCalls[j]
				wc.ID, wc.Type = tc.ID, tc.Type
				if wc.Type == "" {
					wc.Type = "function"
				}
				wc.Function.Name, wc.Function.Arguments = tc.Name, tc.Arguments
			}
		}
	}
	return e.value(&e.msgs)
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

// grow returns s with length n, reusing its array when large enough.
func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}
