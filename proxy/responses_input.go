package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/polygateway/polygateway/core"
)

// This file translates a Responses request's input into chat messages:
//
//	message (user, system, developer)  → a message of that role (developer as system)
//	message (assistant)                → an assistant message
//	function_call                      → a tool call of an assistant message (calls in a row,
//	                                     and a call right after an assistant message, share one)
//	function_call_output               → a tool message answering call_id
//	reasoning                          → dropped: chat upstreams take no reasoning back
//
// Any other item (item_reference, built-in tool calls) is refused.

// Input item fields, by item type.
var (
	messageItemKeys    = []string{"type", "role", "content", "id", "status"}
	callItemKeys       = []string{"type", "call_id", "name", "arguments", "id", "status"}
	callOutputItemKeys = []string{"type", "call_id", "output", "id", "status"}
)

// inputField reads input: a string (one user message) or a list of items.
func (d *responsesDecoder) inputField(raw json.RawMessage) error {
	d.hasIn = true
	raw = bytes.TrimSpace(raw)
	if raw[0] == '"' {
		var s string
		if err := decodeAs(raw, &s, "input", "a string or an array of input items"); err != nil {
			return err
		}
		d.input = []core.Message{{Role: core.RoleUser, Content: s}}
		return nil
	}
	var items []json.RawMessage
	if err := decodeAs(raw, &items, "input", "a string or an array of input items"); err != nil {
		return err
	}
	if len(items) == 0 {
		return badRequest("input", "empty_array", "input must not be empty")
	}
	for i, it := range items {
		if err := d.item(it, fmt.Sprintf("input[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// item translates one input item (param names it).
func (d *responsesDecoder) item(raw json.RawMessage, param string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return badRequest(param, "invalid_type", "%s must be an input item (an object)", param)
	}
	var typ string
	if _, err := memberAs(obj, "type", &typ, param, "a string"); err != nil {
		return err
	}
	if typ == "" {
		if _, ok := obj["role"]; !ok {
			return badRequest(param+".type", "missing_required_parameter", "%s.type is required", param)
		}
		typ = "message"
	}
	switch typ {
	case "message":
		return d.message(obj, param)
	case "function_call":
		return d.functionCall(obj, param)
	case "function_call_output":
		return d.functionCallOutput(obj, param)
	case "reasoning":
		// The reasoning of an earlier answer, sent back: chat upstreams
		// take none (some refuse it), so it is dropped.
		return nil
	case "item_reference":
		return badRequest(param+".type", "unsupported_value", "%s: item_reference is not supported: this gateway stores no items (send the items themselves)", param)
	}
	return badRequest(param+".type", "unsupported_value", "%s.type %q is not supported (message, function_call, function_call_output and reasoning are)", param, typ)
}

// message translates a message item.
func (d *responsesDecoder) message(obj map[string]json.RawMessage, param string) error {
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(messageItemKeys, k) }); name != "" {
		return unknownParameter(param + "." + name)
	}
	var role string
	if _, err := memberAs(obj, "role", &role, param, "a string"); err != nil {
		return err
	}
	m := core.Message{Role: role}
	switch role {
	case core.RoleUser, core.RoleAssistant, core.RoleSystem:
	case "developer":
		// The newer name of the system role, which every chat upstream knows.
		m.Role = core.RoleSystem
	case "":
		return badRequest(param+".role", "missing_required_parameter", "%s.role is required", param)
	default:
		return badRequest(param+".role", "invalid_value", "%s.role %q is not a role (user, assistant, system, developer)", param, role)
	}
	if err := readContent(&m, obj, "content", param, role, "a string or an array of content parts"); err != nil {
		return err
	}
	d.input = append(d.input, m)
	return nil
}

// readContent reads the required member key of item param into m: a
// string is its Content, an array its parts (those a message of role may
// have); want names the two forms in a type error.
func readContent(m *core.Message, obj map[string]json.RawMessage, key, param, role, want string) error {
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return badRequest(param+"."+key, "missing_required_parameter", "%s.%s is required", param, key)
	}
	if raw = bytes.TrimSpace(raw); raw[0] == '"' {
		return decodeAs(raw, &m.Content, param+"."+key, want)
	}
	parts, err := contentParts(raw, param+"."+key, role)
	if err != nil {
		return err
	}
	setParts(m, parts)
	return nil
}

// setParts sets the content of m: one text part as a string, which every
// chat upstream takes; several parts, or an image, as a parts array.
func setParts(m *core.Message, parts []core.ContentPart) {
	if len(parts) == 1 && parts[0].Type == core.PartText {
		m.Content = parts[0].Text
		return
	}
	m.Parts = parts
}

// contentParts translates a content part list of a message of role.
func contentParts(raw json.RawMessage, param, role string) ([]core.ContentPart, error) {
	var list []json.RawMessage
	if err := decodeAs(raw, &list, param, "a string or an array of content parts"); err != nil {
		return nil, err
	}
	parts := make([]core.ContentPart, 0, len(list))
	for j, pr := range list {
		p, err := contentPart(pr, fmt.Sprintf("%s[%d]", param, j), role)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	if len(parts) == 0 {
		return nil, badRequest(param, "empty_array", "%s must not be empty", param)
	}
	return parts, nil
}

// Content part fields, by part type.
var partKeys = map[string][]string{
	"input_text":  {"type", "text"},
	"output_text": {"type", "text", "annotations", "logprobs"},
	"refusal":     {"type", "refusal"},
	"input_image": {"type", "image_url", "detail", "file_id"},
}

// contentPart translates one content part of a message of role: text
// (input_text; output_text and refusal in assistant messages) or, in user
// messages, input_image.
func contentPart(raw json.RawMessage, param, role string) (core.ContentPart, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return core.ContentPart{}, badRequest(param, "invalid_type", "%s must be a content part (an object)", param)
	}
	var typ string
	if _, err := memberAs(obj, "type", &typ, param, "a string"); err != nil {
		return core.ContentPart{}, err
	}
	keys, known := partKeys[typ]
	if !known {
		return core.ContentPart{}, badRequest(param+".type", "unsupported_value", "%s.type %q is not supported (input_text, input_image, output_text and refusal are)", param, typ)
	}
	assistant := role == core.RoleAssistant
	if (typ == "output_text" || typ == "refusal") != assistant || typ == "input_image" && role != core.RoleUser {
		return core.ContentPart{}, badRequest(param+".type", "invalid_value", "%s: a %s part cannot be in a %s message", param, typ, role)
	}
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(keys, k) }); name != "" {
		return core.ContentPart{}, unknownParameter(param + "." + name)
	}
	switch typ {
	case "input_image":
		return imagePart(obj, param)
	case "refusal":
		var s string
		_, err := memberAs(obj, "refusal", &s, param, "a string")
		return core.TextPart(s), err
	}
	var s string
	if ok, err := memberAs(obj, "text", &s, param, "a string"); err != nil || !ok {
		if err == nil {
			err = badRequest(param+".text", "missing_required_parameter", "%s.text is required", param)
		}
		return core.ContentPart{}, err
	}
	return core.TextPart(s), nil
}

// imagePart translates an input_image part: a URL or a data URL.
func imagePart(obj map[string]json.RawMessage, param string) (core.ContentPart, error) {
	var fileID, url, detail string
	if _, err := memberAs(obj, "file_id", &fileID, param, "a string"); err != nil {
		return core.ContentPart{}, err
	}
	if fileID != "" {
		return core.ContentPart{}, badRequest(param+".file_id", "unsupported_parameter", "%s.file_id is not supported: this gateway stores no files (send image_url, a URL or a data URL)", param)
	}
	if _, err := memberAs(obj, "image_url", &url, param, "a string"); err != nil {
		return core.ContentPart{}, err
	}
	if url == "" {
		return core.ContentPart{}, badRequest(param+".image_url", "missing_required_parameter", "%s.image_url is required", param)
	}
	if _, err := memberAs(obj, "detail", &detail, param, "a string"); err != nil {
		return core.ContentPart{}, err
	}
	p := core.ImageURLPart(url)
	p.Detail = detail
	return p, nil
}

// functionCall translates a function_call item: a tool call of the
// assistant message it follows, or of a new one.
func (d *responsesDecoder) functionCall(obj map[string]json.RawMessage, param string) error {
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(callItemKeys, k) }); name != "" {
		return unknownParameter(param + "." + name)
	}
	var callID, name, args string
	for _, f := range []struct {
		key string
		dst *string
	}{{"call_id", &callID}, {"name", &name}, {"arguments", &args}} {
		ok, err := memberAs(obj, f.key, f.dst, param, "a string")
		if err != nil {
			return err
		}
		if !ok || f.key != "arguments" && *f.dst == "" {
			return badRequest(param+"."+f.key, "missing_required_parameter", "%s.%s is required", param, f.key)
		}
	}
	n := len(d.input)
	if n == 0 || d.input[n-1].Role != core.RoleAssistant {
		d.input = append(d.input, core.Message{Role: core.RoleAssistant})
		n++
	}
	last := &d.input[n-1]
	last.ToolCalls = append(last.ToolCalls, core.ToolCall{
		Index: len(last.ToolCalls), ID: callID, Type: "function", Name: name, Arguments: args,
	})
	return nil
}

// functionCallOutput translates a function_call_output item into the tool
// message answering its call.
func (d *responsesDecoder) functionCallOutput(obj map[string]json.RawMessage, param string) error {
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(callOutputItemKeys, k) }); name != "" {
		return unknownParameter(param + "." + name)
	}
	m := core.Message{Role: core.RoleTool}
	if ok, err := memberAs(obj, "call_id", &m.ToolCallID, param, "a string"); err != nil || !ok || m.ToolCallID == "" {
		if err == nil {
			err = badRequest(param+".call_id", "missing_required_parameter", "%s.call_id is required", param)
		}
		return err
	}
	// A chat tool message carries text only: input_text parts, as a user
	// message has them.
	if err := readContent(&m, obj, "output", param, core.RoleTool, "a string or an array of input_text parts"); err != nil {
		return err
	}
	d.input = append(d.input, m)
	return nil
}
