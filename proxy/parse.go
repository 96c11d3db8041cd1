package proxy

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
	"unsafe"

	"github.com/polygateway/polygateway/internal/core"
)

// This file is the chat request's parser: one pass over the body that
// finds the extent of every top-level value and decodes the messages with
// a string fast path, instead of encoding/json's validate-then-decode of
// the body, again of the messages and again of every content string.
// Whatever it does not decode itself (the values passed upstream, content
// part arrays, tool calls, unknown message fields) is validated by
// encoding/json on its own extent, so a body it accepts is valid JSON and
// means what encoding/json would read from it (FuzzParseChat holds it to
// the encoding/json reading).

// scanner walks a JSON text. Its methods never allocate; they report
// false on anything they cannot make sense of.
type scanner struct {
	b []byte
	i int
	// alias lets decoded strings share b's memory instead of copying it:
	// only for a b that is never written again (readBody's buffers are
	// allocated per request and never reused).
	alias bool
}

// ws skips whitespace.
func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the byte at the cursor, 0 at the end.
func (s *scanner) peek() byte {
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// skipString moves past the string at the cursor (which is at its opening
// quote) and reports whether it has escapes and non-ASCII bytes; ok is
// false for an unterminated string or a raw control character.
func (s *scanner) skipString() (escaped, wide, ok bool) {
	b := s.b
	for i := s.i + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return escaped, wide, true
		case c == '\\':
			escaped = true
			i++
		case c < 0x20:
			return false, false, false
		case c >= utf8.RuneSelf:
			wide = true
		}
	}
	return false, false, false
}

// str decodes the string at the cursor: the bytes themselves when they
// need no decoding, else encoding/json's reading of them (escapes,
// invalid UTF-8 as U+FFFD).
func (s *scanner) str() (string, bool) {
	start := s.i
	escaped, wide, ok := s.skipString()
	if !ok {
		return "", false
	}
	raw := s.b[start+1 : s.i-1]
	if !escaped && (!wide || utf8.Valid(raw)) {
		if s.alias && len(raw) > 0 {
			return unsafe.String(&raw[0], len(raw)), true
		}
		return string(raw), true
	}
	var out string
	if err := json.Unmarshal(s.b[start:s.i], &out); err != nil {
		return "", false
	}
	return out, true
}

// knownKey reads the string at the cursor when it is one of the usual
// request keys, without allocating; otherwise it leaves the cursor alone.
func (s *scanner) knownKey() (string, bool) {
	start := s.i
	end := start + 1
	for end < len(s.b) && s.b[end] != '"' && s.b[end] != '\\' && s.b[end] >= 0x20 && s.b[end] < utf8.RuneSelf {
		end++
	}
	if end >= len(s.b) || s.b[end] != '"' {
		return "", false
	}
	var k string
	switch string(s.b[start+1 : end]) {
	case "model":
		k = "model"
	case "messages":
		k = "messages"
	case "stream":
		k = "stream"
	case "stream_options":
		k = "stream_options"
	case "role":
		k = "role"
	case "content":
		k = "content"
	case "name":
		k = "name"
	case "tool_call_id":
		k = "tool_call_id"
	case "tool_calls":
		k = "tool_calls"
	case "temperature":
		k = "temperature"
	case "max_tokens":
		k = "max_tokens"
	case "max_completion_tokens":
		k = "max_completion_tokens"
	case "top_p":
		k = "top_p"
	case "tools":
		k = "tools"
	case "tool_choice":
		k = "tool_choice"
	case "response_format":
		k = "response_format"
	case "seed":
		k = "seed"
	case "stop":
		k = "stop"
	case "user":
		k = "user"
	case "n":
		k = "n"
	case gatewayField:
		k = gatewayField
	default:
		return "", false
	}
	s.i = end + 1
	return k, true
}

// skipValue moves past the value at the cursor and returns its extent.
// It checks only the nesting: the caller validates what it does not decode.
func (s *scanner) skipValue() ([]byte, bool) {
	start := s.i
	switch s.peek() {
	case '"':
		if _, _, ok := s.skipString(); !ok {
			return nil, false
		}
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if _, _, ok := s.skipString(); !ok {
					return nil, false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					s.i++
					return s.b[start:s.i], true
				}
			}
			s.i++
		}
		return nil, false
	case 0, ',', ':', '}', ']':
		return nil, false
	default: // number, true, false, null, or garbage that validation refuses
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return s.b[start:s.i], true
			}
			s.i++
		}
	}
	return s.b[start:s.i], true
}

// object enters the object at the cursor. A null stands for an empty
// object, as encoding/json reads it into a struct. ok is false when the
// text is not an object; then call key until it reports done.
func (s *scanner) object() (it objectIter, ok bool) {
	s.ws()
	if s.peek() == 'n' {
		v, ok := s.skipValue()
		return objectIter{done: true}, ok && string(v) == "null"
	}
	if s.peek() != '{' {
		return objectIter{}, false
	}
	s.i++
	s.ws()
	if s.peek() == '}' {
		s.i++
		return objectIter{done: true}, true
	}
	return objectIter{}, true
}

// objectIter walks the members of an object.
type objectIter struct{ started, done bool }

// key moves to the next member and returns its key, leaving the scanner
// at its value, which the caller consumes. done reports the end of the
// object (the scanner past its closing brace); ok is false on bad syntax.
func (it *objectIter) key(s *scanner) (key string, done, ok bool) {
	if it.done {
		return "", true, true
	}
	s.ws()
	if it.started {
		switch s.peek() {
		case ',':
			s.i++
			s.ws()
		case '}':
			s.i++
			it.done = true
			return "", true, true
		default:
			return "", false, false
		}
	}
	it.started = true
	if s.peek() != '"' {
		return "", false, false
	}
	if key, ok = s.knownKey(); !ok {
		if key, ok = s.str(); !ok {
			return "", false, false
		}
	}
	s.ws()
	if s.peek() != ':' {
		return "", false, false
	}
	s.i++
	s.ws()
	return key, false, true
}

// parseChat decodes a chat completion request body. The strings of the
// request share body's memory: body must never be written again.
func parseChat(body []byte) (*chatRequest, error) {
	type member struct {
		key string
		raw []byte
	}
	var (
		buf     [12]member
		fields  = buf[:0]
		msgsRaw []byte
		hasMsgs bool
	)
	s := scanner{b: body, alias: true}
	it, ok := s.object()
	for ok {
		key, done, kok := it.key(&s)
		if ok = kok; done || !ok {
			break
		}
		raw, vok := s.skipValue()
		if ok = vok; !ok {
			break
		}
		if key == "messages" {
			// An earlier duplicate is superseded but must still be valid.
			if hasMsgs && !json.Valid(msgsRaw) {
				ok = false
				break
			}
			msgsRaw, hasMsgs = raw, true
			continue
		}
		fields = append(fields, member{key, raw})
	}
	if s.ws(); !ok || s.i != len(body) {
		return nil, badRequest("", "invalid_json", "request body is not a JSON object")
	}
	// Everything but the messages is small: validate it all before any
	// field is interpreted, so that a syntax error is reported as one.
	for _, m := range fields {
		if !json.Valid(m.raw) {
			return nil, badRequest("", "invalid_json", "request body is not a JSON object: invalid value of %q", m.key)
		}
	}
	// lookup returns the last value of key (encoding/json's reading of a
	// duplicate), nil when absent or null.
	lookup := func(key string) []byte {
		for i := len(fields) - 1; i >= 0; i-- {
			if fields[i].key == key {
				if isNull(fields[i].raw) {
					return nil
				}
				return fields[i].raw
			}
		}
		return nil
	}
	req := &chatRequest{}
	if raw := lookup("model"); raw != nil {
		v, ok := "", raw[0] == '"'
		if ok {
			ms := scanner{b: raw}
			v, ok = ms.str()
		}
		if !ok {
			return nil, badRequest("model", "invalid_type", "model must be a string")
		}
		req.model = v
	}
	if raw := lookup("stream"); raw != nil {
		switch string(raw) {
		case "true":
			req.stream = true
		case "false":
		default:
			return nil, badRequest("stream", "invalid_type", "stream must be a boolean")
		}
	}
	if raw := lookup("stream_options"); raw != nil {
		var so struct {
			IncludeUsage bool `json:"include_usage"`
		}
		if err := json.Unmarshal(raw, &so); err != nil {
			return nil, badRequest("stream_options", "invalid_type", "stream_options must be an object")
		}
		req.includeUsage = so.IncludeUsage
	}
	if raw := lookup("n"); raw != nil && string(raw) != "1" {
		var n float64
		if err := json.Unmarshal(raw, &n); err != nil || n != 1 {
			return nil, badRequest("n", "unsupported_value", "only n=1 is supported")
		}
	}
	if raw := lookup(gatewayField); raw != nil {
		if err := req.gatewayOptions(raw); err != nil {
			return nil, err
		}
	}
	// extra_body goes upstream without its fallbacks member.
	var extraBody, extraFallbacks []byte
	stripped := false
	if raw := lookup(extraBodyField); raw != nil {
		extraBody, extraFallbacks, stripped = stripFallbacks(raw)
	}
	if err := req.setFallbacks(lookup(fallbacksField), extraFallbacks); err != nil {
		return nil, err
	}
	if !hasMsgs || isNull(msgsRaw) {
		return nil, badRequest("messages", "missing_required_parameter", "messages is required")
	}
	msgs, err := decodeMessages(msgsRaw)
	if err != nil {
		return nil, err
	}
	req.messages = msgs
	for _, m := range fields {
		if ownFields[m.key] {
			continue
		}
		if req.params == nil {
			req.params = make(map[string]any, len(fields))
		}
		if isNull(m.raw) {
			delete(req.params, m.key) // a later null drops an earlier value, as in a map
			continue
		}
		req.params[m.key] = json.RawMessage(m.raw)
	}
	if stripped {
		if extraBody == nil {
			delete(req.params, extraBodyField)
		} else {
			req.params[extraBodyField] = json.RawMessage(extraBody)
		}
	}
	if len(req.params) == 0 {
		req.params = nil
	}
	return req, nil
}

// errMessagesType is the answer to messages that are not an array of
// message objects.
var errMessagesType = badRequest("messages", "invalid_type", "messages must be an array of message objects")

// syntaxOrType tells a value that is not JSON (invalid_json) from one of
// the wrong type (want).
func syntaxOrType(raw []byte, want *requestError) *requestError {
	if !json.Valid(raw) {
		return badRequest("", "invalid_json", "request body is not a JSON object: messages are not valid JSON")
	}
	return want
}

// decodeMessages decodes the messages array (raw is its extent).
func decodeMessages(raw []byte) ([]core.Message, error) {
	s := scanner{b: raw, alias: true}
	if s.peek() != '[' {
		return nil, syntaxOrType(raw, errMessagesType)
	}
	s.i++
	s.ws()
	var wires []wireMessage
	if s.peek() == ']' {
		s.i++
	} else {
		wires = make([]wireMessage, 0, 4)
		for {
			s.ws()
			var w wireMessage
			bad, ok := s.message(&w)
			if !ok {
				return nil, syntaxOrType(raw, errMessagesType)
			}
			if bad != nil {
				return nil, syntaxOrType(raw, bad)
			}
			wires = append(wires, w)
			s.ws()
			if c := s.peek(); c == ',' {
				s.i++
				continue
			} else if c == ']' {
				s.i++
				break
			}
			return nil, syntaxOrType(raw, errMessagesType)
		}
	}
	if s.ws(); s.i != len(raw) {
		return nil, syntaxOrType(raw, errMessagesType)
	}
	if len(wires) == 0 {
		return nil, badRequest("messages", "empty_array", "messages must not be empty")
	}
	out := make([]core.Message, len(wires))
	for i := range wires {
		m, err := convertMessage(&wires[i], i)
		if err != nil {
			return nil, err
		}
		out[i] = m
	}
	return out, nil
}

// message decodes one message object into w. bad is set for a field of
// the wrong type; ok is false on bad syntax or when it is not an object.
func (s *scanner) message(w *wireMessage) (bad *requestError, ok bool) {
	it, ok := s.object()
	for ok {
		key, done, kok := it.key(s)
		if !kok {
			return nil, false
		}
		if done {
			return bad, true
		}
		var dst *string
		switch {
		case bad != nil:
			_, ok = s.skipValue()
			continue
		case strings.EqualFold(key, "role"):
			dst = &w.Role
		case strings.EqualFold(key, "name"):
			dst = &w.Name
		case strings.EqualFold(key, "tool_call_id"):
			dst = &w.ToolCallID
		case strings.EqualFold(key, "content"):
			if s.peek() == '"' {
				w.Content, w.isText = nil, true
				w.text, ok = s.str()
				continue
			}
			w.Content, w.text, w.isText = nil, "", false
			w.Content, ok = s.skipValue()
			ok = ok && json.Valid(w.Content)
			continue
		case strings.EqualFold(key, "tool_calls"):
			w.ToolCalls, ok = s.skipValue()
			ok = ok && json.Valid(w.ToolCalls)
			continue
		default:
			var v []byte
			v, ok = s.skipValue()
			ok = ok && json.Valid(v)
			continue
		}
		switch s.peek() {
		case '"':
			*dst, ok = s.str()
		case 'n':
			var v []byte
			v, ok = s.skipValue()
			ok = ok && string(v) == "null"
		default:
			var v []byte
			if v, ok = s.skipValue(); ok && json.Valid(v) {
				bad = errMessagesType // a field of the wrong type
			}
		}
	}
	return nil, false
}
