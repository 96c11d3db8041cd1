package proxy

import (
	"encoding/json"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// A chat request is decoded by encoding/json from the body held in one
// buffer (readBody), in two steps:
//
//   - json.Unmarshal into map[string]rawSpan validates the whole body and
//     finds each top-level member's JSON text without copying it (the
//     last of a key given twice wins, as in any map);
//   - the messages array is read the same way into one rawSpan per
//     message (those of a large array counted first, into a slice that
//     takes no memory per element, so the spans and the messages take
//     slices of exactly their number); each message is then decoded from
//     its span into its wire form (wireMessage, the client's shape, which
//     core.Message is not: content is a string or an array of parts, a
//     tool call nests its function) and converted into its place of the
//     request's []core.Message.
//
// What the request keeps is copied out of the body (strings by
// encoding/json, the other members' JSON text once, to go upstream), so
// nothing refers to the body once it is decoded. The request means what
// encoding/json's reading of the body into map[string]json.RawMessage and
// of the messages into []wireMessage means (FuzzParseChat holds the two
// together); message fields match their names in any case.

// rawSpan is a member's or a message's JSON text where it is in the body
// (no copy).
type rawSpan []byte

// UnmarshalJSON implements json.Unmarshaler.
func (r *rawSpan) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// wireMessages are the wire forms messages are read into, one at a time.
var wireMessages = sync.Pool{New: func() any { return new(wireMessage) }}

// chatParse is the state of decoding one chat request, in one allocation.
// The messages of a short request are kept in msgBuf; spans and spanBuf
// hold the messages' spans only while they are decoded.
type chatParse struct {
	req     chatRequest
	fields  members
	spans   []rawSpan
	spanBuf [shortMessages]rawSpan
	msgBuf  [shortMessages]core.Message
}

// shortMessages is the number of messages a chat request takes no
// allocation of their own for.
const shortMessages = 4

// parseChat decodes a chat completion request body. Nothing of the
// request refers to body.
func parseChat(body []byte) (*chatRequest, error) {
	p := &chatParse{}
	if err := json.Unmarshal(body, &p.fields); err != nil {
		return nil, badRequest("", "invalid_json", "request body is not a JSON object: %v", err)
	}
	fields, lookup, req := p.fields, p.fields.lookup, &p.req
	p.fields = nil
	if err := req.options(fields); err != nil {
		return nil, err
	}
	raw := lookup("messages")
	if raw == nil {
		return nil, badRequest("messages", "missing_required_parameter", "messages is required")
	}
	msgs, err := p.decodeMessages(raw)
	if err != nil {
		return nil, err
	}
	req.messages = msgs
	// extra_body goes upstream without its fallbacks member.
	var extraBody []byte
	stripped := false
	if raw := lookup(extraBodyField); raw != nil {
		extraBody, _, stripped = stripFallbacks(raw)
	}
	for k, v := range fields {
		if ownFields[k] || isNull(v) {
			continue
		}
		if req.params == nil {
			req.params = make(map[string]any, len(fields))
		}
		if k == extraBodyField && stripped {
			if extraBody != nil {
				req.params[k] = json.RawMessage(extraBody)
			}
			continue
		}
		req.params[k] = json.RawMessage(append([]byte(nil), v...))
	}
	if len(req.params) == 0 {
		req.params = nil
	}
	return req, nil
}

// members are a request's top-level members.
type members map[string]rawSpan

// lookup returns the value of key, nil when absent or null.
func (m members) lookup(key string) []byte {
	if raw := m[key]; raw != nil && !isNull(raw) {
		return raw
	}
	return nil
}

// options reads the members the gateway interprets itself, in order:
// model, stream, stream_options, n, the gateway's own options, fallbacks.
func (req *chatRequest) options(fields members) error {
	lookup := fields.lookup
	if raw := lookup("model"); raw != nil {
		if raw[0] != '"' || json.Unmarshal(raw, &req.model) != nil {
			return badRequest("model", "invalid_type", "model must be a string")
		}
	}
	if raw := lookup("stream"); raw != nil {
		if json.Unmarshal(raw, &req.stream) != nil {
			return badRequest("stream", "invalid_type", "stream must be a boolean")
		}
	}
	if raw := lookup("stream_options"); raw != nil {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return badRequest("stream_options", "invalid_type", "stream_options must be an object")
		}
		req.includeUsage = so.IncludeUsage
	}
	if raw := lookup("n"); raw != nil {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil || n != 1 {
			return badRequest("n", "unsupported_value", "only n=1 is supported")
		}
	}
	if raw := lookup(gatewayField); raw != nil {
		if err := req.gatewayOptions(raw); err != nil {
			return err
		}
	}
	var extraFallbacks []byte
	if raw := lookup(extraBodyField); raw != nil {
		_, extraFallbacks, _ = stripFallbacks(raw)
	}
	return req.setFallbacks(lookup(fallbacksField), extraFallbacks)
}

// errMessagesType is the answer to messages that are not an array of
// message objects.
var errMessagesType = badRequest("messages", "invalid_type", "messages must be an array of message objects")

// decodeMessages decodes the messages array (raw is its JSON text):
// each message's text, found in place, is read into its wire form and
// converted into its place of the request's slice. The error is the first
// message's, in order, that is not an object of the wire form (the
// messages are of the wrong type) or does not convert (named by its
// place). No span is kept once it returns.
func (p *chatParse) decodeMessages(raw []byte) ([]core.Message, error) {
	if raw[0] != '[' {
		return nil, errMessagesType
	}
	if len(raw) > countFrom {
		var counted []skipValue
		p.spans = make([]rawSpan, 0, countInto(&counted, raw, 1<<31-2))
	} else {
		p.spans = p.spanBuf[:0]
	}
	defer func() { p.spans = nil; clear(p.spanBuf[:]) }()
	if err := json.Unmarshal(raw, &p.spans); err != nil {
		return nil, errMessagesType
	}
	n := len(p.spans)
	if n == 0 {
		return nil, badRequest("messages", "empty_array", "messages must not be empty")
	}
	var msgs []core.Message
	if n <= shortMessages {
		msgs = p.msgBuf[:n:n]
	} else {
		msgs = make([]core.Message, n)
	}
	w := wireMessages.Get().(*wireMessage)
	defer wireMessages.Put(w)
	for i, b := range p.spans {
		*w = wireMessage{Content: messageContent{raw: w.Content.raw[:0]}, ToolCalls: w.ToolCalls[:0]}
		if err := json.Unmarshal(b, w); err != nil {
			return nil, errMessagesType
		}
		m, err := convertMessage(w, i)
		if err != nil {
			return nil, err
		}
		msgs[i] = m
	}
	return msgs, nil
}

// countFrom is the size of a messages array from which its messages are
// counted before they are decoded: the spans of a larger one go into a
// slice of exactly their number, a smaller one's into a slice grown as
// they come.
const countFrom = 16 << 10
