package proxy

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"unsafe"

	"github.com/polygateway/polygateway/core"
)

// A chat request is decoded by encoding/json from the body held in one
// buffer (readBody), in two steps:
//
//   - json.Unmarshal into map[string]rawSpan validates the whole body and
//     finds each top-level member's JSON text without copying it (the
//     last of a key given twice wins, as in any map);
//   - the messages — those of a large array counted first (into a slice
//     that takes no memory per element), to be decoded into a slice of
//     exactly their number — are decoded each straight into its place
//     (inMessage, whose layout is core.Message's: the slice is the
//     request's []core.Message, never copied into another type).
//
// What the request keeps is copied out of the body (strings by
// encoding/json, the other members' JSON text once, to go upstream), so
// nothing refers to the body once it is decoded. The request means what
// encoding/json's reading of the body into map[string]json.RawMessage and
// of the messages into []wireMessage means (FuzzParseChat holds the two
// together); message fields match their names in any case.

// rawSpan is a member's JSON text where it is in the body (no copy).
type rawSpan []byte

// UnmarshalJSON implements json.Unmarshaler.
func (r *rawSpan) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// inMessage is one message decoded from its wire form (wireMessage) and
// converted into the library's message, in place. Its layout is
// core.Message's (the conversion below compiles only while the two are
// the same), so a []inMessage is read as the []core.Message it is.
type inMessage core.Message

var _ = core.Message(inMessage{})

// asMessages returns msgs as the []core.Message it is (the same memory).
func asMessages(msgs []inMessage) []core.Message {
	if len(msgs) == 0 {
		return nil
	}
	return unsafe.Slice((*core.Message)(unsafe.Pointer(unsafe.SliceData(msgs))), len(msgs))
}

// messageError is what is wrong with one message; its param and text name
// the message with msgMark, replaced by its place once it is known (see
// at).
type messageError struct{ err *requestError }

// msgMark stands for a message's param ("messages[i]") in a messageError.
const msgMark = "\x00"

func (e *messageError) Error() string { return e.err.msg }

// at returns the error of message i.
func (e *messageError) at(i int) *requestError {
	p := msgParam(i)
	return &requestError{param: strings.ReplaceAll(e.err.param, msgMark, p), code: e.err.code, msg: strings.ReplaceAll(e.err.msg, msgMark, p)}
}

// UnmarshalJSON implements json.Unmarshaler: a message that is not an
// object of the wire form is an error of encoding/json (the messages are
// of the wrong type); one that does not convert is a *messageError.
func (m *inMessage) UnmarshalJSON(b []byte) error {
	w := wireMessages.Get().(*wireMessage)
	defer wireMessages.Put(w)
	*w = wireMessage{Content: messageContent{raw: w.Content.raw[:0]}, ToolCalls: w.ToolCalls[:0]}
	if err := json.Unmarshal(b, w); err != nil {
		return err
	}
	msg, err := convertAt(w, msgMark)
	if err != nil {
		return &messageError{err}
	}
	*m = inMessage(msg)
	return nil
}

// wireMessages are the wire forms messages are read into, one at a time.
var wireMessages = sync.Pool{New: func() any { return new(wireMessage) }}

// chatParse is the state of decoding one chat request, in one allocation.
type chatParse struct {
	req    chatRequest
	fields members
	msgs   []inMessage
}

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
	msgs, err := decodeMessages(raw, &p.msgs)
	if err != nil {
		return nil, err
	}
	req.messages, p.msgs = msgs, nil
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

// decodeMessages decodes the messages array (raw is its JSON text), each
// message into its place of the request's slice (of exactly their number,
// for a large array); msgs is where the slice is made.
func decodeMessages(raw []byte, msgs *[]inMessage) ([]core.Message, error) {
	if raw[0] != '[' {
		return nil, errMessagesType
	}
	if len(raw) > countFrom {
		var counted []skipValue
		*msgs = make([]inMessage, 0, countInto(&counted, raw, 1<<31-2))
	} else {
		*msgs = make([]inMessage, 0, 4)
	}
	if err := json.Unmarshal(raw, msgs); err != nil {
		// encoding/json stops at the first message that failed, the
		// last one of msgs.
		var me *messageError
		if errors.As(err, &me) {
			return nil, me.at(len(*msgs) - 1)
		}
		return nil, errMessagesType
	}
	if len(*msgs) == 0 {
		return nil, badRequest("messages", "empty_array", "messages must not be empty")
	}
	return asMessages(*msgs), nil
}

// countFrom is the size of a messages array from which its messages are
// counted before they are decoded: a larger one goes into a slice of
// exactly their number, a smaller one into a slice grown as they come.
const countFrom = 16 << 10
