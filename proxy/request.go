package proxy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

// chatRequest is a parsed OpenAI chat completion request.
type chatRequest struct {
	model        string
	messages     []core.Message
	stream       bool
	includeUsage bool
	// params are the other fields, passed upstream verbatim.
	params map[string]any
	// commit is the request's own stream commit policy ("" = the server's).
	commit string
	// fallbacks are the chat models whose routes may answer when the
	// requested model's cannot (see fallbacks.go), as the client listed
	// them; fallbacksParam names the field they came from ("fallbacks" or
	// "extra_body.fallbacks").
	fallbacks      []string
	fallbacksParam string
}

// requestError is a problem with the client's request: 400 with param.
type requestError struct {
	param, code, msg string
}

func (e *requestError) Error() string { return e.msg }

func badRequest(param, code, format string, args ...any) *requestError {
	return &requestError{param: param, code: code, msg: fmt.Sprintf(format, args...)}
}

// ownFields are request fields the server interprets itself and never
// passes upstream as parameters.
var ownFields = map[string]bool{"model": true, "messages": true, "stream": true, "stream_options": true, gatewayField: true, fallbacksField: true}

// gatewayField is the request field of the gateway's own per-request
// options, {"polygateway": {"stream_commit": "buffer"}}; it is never sent
// upstream.
const gatewayField = "polygateway"

// gatewayOptions reads the gateway's per-request options object.
func (req *chatRequest) gatewayOptions(raw []byte) error {
	var o struct {
		StreamCommit *string `json:"stream_commit"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return badRequest(gatewayField, "invalid_type", "polygateway must be an object such as {\"stream_commit\": \"buffer\"}")
	}
	if o.StreamCommit != nil {
		if !validCommit(*o.StreamCommit) {
			return badRequest(gatewayField+".stream_commit", "invalid_value", "polygateway.stream_commit %q is not a commit policy (%s or %s)", *o.StreamCommit, CommitFirstToken, CommitBuffer)
		}
		req.commit = *o.StreamCommit
	}
	return nil
}

// validCommit reports whether v names a stream commit policy.
func validCommit(v string) bool { return v == CommitFirstToken || v == CommitBuffer }

// wireMessage is one message as a client sends it, read only to be
// converted into a core.Message (convertAt). It is a shape of its own
// because the wire form is not core.Message's: content is a string or an
// array of typed parts (core.Message has Content and Parts), a tool call
// nests its name and arguments under "function", the role is checked
// before it is kept, and what is wrong must be told by its place
// (messages[i].content[j].image_url). Unknown fields are ignored.
type wireMessage struct {
	Role       roleName        `json:"role"`
	Content    messageContent  `json:"content"`
	Name       string          `json:"name"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
}

// messageContent is a message's content: a string, decoded at once, or
// the JSON text of anything else (an array of parts; null; a value of the
// wrong kind), which convertAt decodes or refuses. The last one given
// counts.
type messageContent struct {
	text   string
	isText bool
	raw    []byte
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *messageContent) UnmarshalJSON(b []byte) error {
	if b[0] == '"' {
		c.raw, c.isText = c.raw[:0], true
		return json.Unmarshal(b, &c.text)
	}
	c.text, c.isText = "", false
	c.raw = append(c.raw[:0], b...)
	return nil
}

// roleName is a message's role: a string, read without a copy of its own
// when it is one of the chat roles. null leaves it as it was; another kind
// is an error (errRoleType).
type roleName string

// errRoleType is the error of a role that is not a string.
var errRoleType = errors.New("role must be a string")

// chatRoles are the roles a message may have, as JSON and as the string
// every message of the role shares.
var chatRoles = [...]struct{ quoted, role string }{
	{`"system"`, "system"}, {`"user"`, "user"}, {`"assistant"`, "assistant"}, {`"tool"`, "tool"}, {`"developer"`, "developer"},
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *roleName) UnmarshalJSON(b []byte) error {
	for _, c := range chatRoles {
		if string(b) == c.quoted {
			*r = roleName(c.role)
			return nil
		}
	}
	switch b[0] {
	case 'n':
		return nil
	case '"':
		return json.Unmarshal(b, (*string)(r))
	}
	return errRoleType
}

// wireToolCall is one element of an assistant message's tool_calls.
type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// wirePart is one element of a content array.
type wirePart struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	ImageURL json.RawMessage `json:"image_url"`
}

// msgParam names message i for an error's param.
func msgParam(i int) string { return fmt.Sprintf("messages[%d]", i) }

// convertMessage turns wire message i into a library message.
func convertMessage(w *wireMessage, i int) (core.Message, error) {
	m, err := convertAt(w, i)
	if err != nil {
		return m, err
	}
	return m, nil
}

// convertAt turns wire message i into a library message (its name,
// messages[i], made only for an error).
func convertAt(w *wireMessage, i int) (core.Message, *requestError) {
	param := func() string { return msgParam(i) }
	m := core.Message{Role: string(w.Role), Name: w.Name, ToolCallID: w.ToolCallID}
	switch m.Role {
	case "system", "user", "assistant", "tool", "developer":
	case "":
		return m, badRequest(param()+".role", "missing_required_parameter", "%s.role is required", param())
	default:
		return m, badRequest(param()+".role", "invalid_value", "%s.role %q is not a chat role", param(), w.Role)
	}
	if len(w.ToolCalls) > 0 && !isNull(w.ToolCalls) {
		var calls []wireToolCall
		if err := json.Unmarshal(w.ToolCalls, &calls); err != nil {
			return m, badRequest(param()+".tool_calls", "invalid_type", "%s.tool_calls: %v", param(), err)
		}
		for j, c := range calls {
			if c.Function.Name == "" {
				return m, badRequest(fmt.Sprintf("%s.tool_calls[%d].function.name", param(), j), "missing_required_parameter",
					"%s.tool_calls[%d].function.name is required", param(), j)
			}
			m.ToolCalls = append(m.ToolCalls, polygateway.ToolCall{
				Index: j, ID: c.ID, Type: c.Type, Name: c.Function.Name, Arguments: c.Function.Arguments,
			})
		}
	}
	content := w.Content.raw
	switch {
	case w.Content.isText:
		m.Content = w.Content.text
	case len(content) == 0 || isNull(content):
	case content[0] == '[':
		var parts []wirePart
		if err := json.Unmarshal(content, &parts); err != nil {
			return m, badRequest(param()+".content", "invalid_type", "%s.content must be a string or an array of content parts", param())
		}
		for j := range parts {
			p, err := convertPart(&parts[j], fmt.Sprintf("%s.content[%d]", param(), j))
			if err != nil {
				return m, err
			}
			m.Parts = append(m.Parts, p)
		}
		if len(m.Parts) == 0 {
			m.Parts = nil
		}
	default:
		return m, badRequest(param()+".content", "invalid_type", "%s.content must be a string or an array of content parts", param())
	}
	return m, nil
}

// convertPart turns a text or image_url content part into a library part.
func convertPart(p *wirePart, param string) (polygateway.ContentPart, *requestError) {
	switch p.Type {
	case "text":
		return polygateway.TextPart(p.Text), nil
	case "image_url":
		raw := bytes.TrimSpace(p.ImageURL)
		if len(raw) == 0 || isNull(raw) {
			return polygateway.ContentPart{}, badRequest(param+".image_url", "missing_required_parameter", "%s.image_url is required", param)
		}
		var u struct {
			URL    string `json:"url"`
			Detail string `json:"detail"`
		}
		if raw[0] == '"' {
			if err := json.Unmarshal(raw, &u.URL); err != nil {
				return polygateway.ContentPart{}, badRequest(param+".image_url", "invalid_type", "%s.image_url: %v", param, err)
			}
		} else if err := json.Unmarshal(raw, &u); err != nil {
			return polygateway.ContentPart{}, badRequest(param+".image_url", "invalid_type", "%s.image_url must be an object with a url", param)
		}
		if u.URL == "" {
			return polygateway.ContentPart{}, badRequest(param+".image_url.url", "missing_required_parameter", "%s.image_url.url is required", param)
		}
		part := polygateway.ImageURLPart(u.URL)
		part.Detail = u.Detail
		return part, nil
	case "":
		return polygateway.ContentPart{}, badRequest(param+".type", "missing_required_parameter", "%s.type is required", param)
	default:
		return polygateway.ContentPart{}, badRequest(param+".type", "unsupported_value",
			"%s.type %q is not supported (text and image_url are)", param, p.Type)
	}
}

// embedRequest is a parsed OpenAI embeddings request. Its input is
// decoded by decodeInput once the route, and with it the bound on the
// number of inputs, is known.
type embedRequest struct {
	model    string
	rawInput json.RawMessage
	input    []string
	base64   bool
	params   map[string]any
	// counted is where decodeInput counts the inputs (it takes no memory
	// per input).
	counted []skipValue
}

// parseEmbed decodes an embeddings request body except its input array.
// Input must be a string or an array of strings (token arrays are not
// supported); fallbacks are refused.
func parseEmbed(body []byte) (*embedRequest, error) {
	var w struct {
		Model          *string         `json:"model"`
		Input          json.RawMessage `json:"input"`
		EncodingFormat string          `json:"encoding_format"`
		Dimensions     json.RawMessage `json:"dimensions"`
		User           json.RawMessage `json:"user"`
		Fallbacks      json.RawMessage `json:"fallbacks"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, embedBodyError(err)
	}
	if len(w.Fallbacks) > 0 && !isNull(w.Fallbacks) {
		// Vectors of another model are of another space: an embeddings
		// request is never answered by another route.
		return nil, badRequest(fallbacksField, "unsupported_parameter", "fallbacks are not supported on /v1/embeddings (only on /v1/chat/completions)")
	}
	req := &embedRequest{}
	if w.Model != nil {
		req.model = *w.Model
	}
	in := bytes.TrimSpace(w.Input)
	switch {
	case len(in) == 0 || isNull(in):
		return nil, badRequest("input", "missing_required_parameter", "input is required")
	case in[0] == '"', in[0] == '[':
		req.rawInput = in
	default:
		return nil, badRequest("input", "invalid_type", "input must be a string or an array of strings")
	}
	switch w.EncodingFormat {
	case "", "float":
	case "base64":
		req.base64 = true
	default:
		return nil, badRequest("encoding_format", "unsupported_value", "encoding_format %q is not supported (float and base64 are)", w.EncodingFormat)
	}
	for k, v := range map[string]json.RawMessage{"dimensions": w.Dimensions, "user": w.User} {
		if len(v) > 0 && !isNull(v) {
			if req.params == nil {
				req.params = map[string]any{}
			}
			req.params[k] = v
		}
	}
	return req, nil
}

// embedBodyError is the answer to an embeddings body encoding/json could
// not read into its members: a member of the wrong type is named (model
// and encoding_format are strings), a body that is not a JSON object is
// invalid_json.
func embedBodyError(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return badRequest(te.Field, "invalid_type", "%s must be a string", te.Field)
	case errors.As(err, &te):
		return badRequest("", "invalid_json", "request body is not a JSON object")
	}
	return badRequest("", "invalid_json", "request body is not a valid embeddings request: %v", err)
}

// decodeInput decodes the input of req, refusing an array of more than
// maxInputs entries (too_many_inputs) after counting them in the raw
// bytes, before anything is allocated per input.
func (req *embedRequest) decodeInput(maxInputs int) error {
	in := req.rawInput
	if in[0] == '"' {
		var s string
		if err := json.Unmarshal(in, &s); err != nil {
			return badRequest("input", "invalid_type", "input: %v", err)
		}
		req.input = []string{s}
		return nil
	}
	n := countInto(&req.counted, in, maxInputs)
	if n > maxInputs {
		// Built without fmt, whose pooled printer may allocate: refusing a
		// huge input allocates nothing per input, and little at all.
		return &requestError{param: "input", code: "too_many_inputs",
			msg: "input has more than " + strconv.Itoa(maxInputs) + " entries, the limit of this model's scope"}
	}
	if n == 0 {
		return badRequest("input", "empty_array", "input must not be empty")
	}
	req.input = make([]string, 0, n)
	if err := json.Unmarshal(in, &req.input); err != nil {
		return badRequest("input", "unsupported_value", "input must be a string or an array of strings (token arrays are not supported)")
	}
	return nil
}

// countElements counts the elements of raw, a valid JSON array, reading it
// with encoding/json into a slice of skipValue (which takes no memory per
// element) and keeping none of them; the count stops at limit+1.
func countElements(raw []byte, limit int) int {
	var list []skipValue
	return countInto(&list, raw, limit)
}

// countInto is countElements reading into *list (a caller's, so that the
// slice header needs no allocation of its own).
func countInto(list *[]skipValue, raw []byte, limit int) int {
	if json.Unmarshal(raw, list) != nil {
		return 0
	}
	return min(len(*list), limit+1)
}

// skipValue reads a JSON value and keeps nothing of it.
type skipValue struct{}

// UnmarshalJSON implements json.Unmarshaler.
func (skipValue) UnmarshalJSON([]byte) error { return nil }

func isNull(raw []byte) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// cleanID returns s when it is a usable request id (1–128 characters of
// [A-Za-z0-9._:-]) and "" otherwise.
func cleanID(s string) string {
	if len(s) == 0 || len(s) > 128 {
		return ""
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == ':', c == '-':
		default:
			return ""
		}
	}
	return s
}

// joinComma joins names for the X-PolyGateway-Attempts header.
func joinComma(names []string) string { return strings.Join(names, ",") }
