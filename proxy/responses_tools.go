package proxy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// This file translates a Responses request's tools, tool_choice and text
// into chat completions' tools, tool_choice and response_format.

// chatTool is a function tool as chat completions takes it.
type chatTool struct {
	Type     string       `json:"type"`
	Function chatFunction `json:"function"`
}

// chatFunction is the function of a chatTool.
type chatFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chatToolChoice is chat completions' tool_choice naming one function.
type chatToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// chatResponseFormat is chat completions' response_format.
type chatResponseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *chatJSONSchema `json:"json_schema,omitempty"`
}

// chatJSONSchema is the json_schema of a chatResponseFormat.
type chatJSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict,omitempty"`
}

// functionToolKeys are the fields of a function tool.
var functionToolKeys = []string{"type", "name", "description", "parameters", "strict"}

// tools translates the function tools; a built-in tool (web_search,
// file_search, …) is refused: no chat upstream runs them.
func (d *responsesDecoder) tools(raw json.RawMessage) error {
	var list []json.RawMessage
	if err := decodeAs(raw, &list, "tools", "an array of tools"); err != nil {
		return err
	}
	out := make([]chatTool, 0, len(list))
	for i, tr := range list {
		param := fmt.Sprintf("tools[%d]", i)
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(tr, &obj); err != nil || obj == nil {
			return badRequest(param, "invalid_type", "%s must be a tool (an object)", param)
		}
		var typ string
		if _, err := memberAs(obj, "type", &typ, param, "a string"); err != nil {
			return err
		}
		if typ != "function" {
			return badRequest(param+".type", "unsupported_value", "%s.type %q is not supported: this gateway runs no built-in tools (function tools are supported)", param, typ)
		}
		t, err := functionTool(obj, param)
		if err != nil {
			return err
		}
		out = append(out, t)
	}
	d.echo.Tools = raw
	if len(out) > 0 {
		d.param("tools", out)
	}
	return nil
}

// functionTool translates one function tool.
func functionTool(obj map[string]json.RawMessage, param string) (chatTool, error) {
	t := chatTool{Type: "function"}
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(functionToolKeys, k) }); name != "" {
		return t, unknownParameter(param + "." + name)
	}
	f := &t.Function
	if _, err := memberAs(obj, "name", &f.Name, param, "a string"); err != nil {
		return t, err
	}
	if f.Name == "" {
		return t, badRequest(param+".name", "missing_required_parameter", "%s.name is required", param)
	}
	if _, err := memberAs(obj, "description", &f.Description, param, "a string"); err != nil {
		return t, err
	}
	if _, err := memberAs(obj, "strict", &f.Strict, param, "a boolean"); err != nil {
		return t, err
	}
	if raw, ok := obj["parameters"]; ok && !isNull(raw) {
		if !isObject(raw) {
			return t, badRequest(param+".parameters", "invalid_type", "%s.parameters must be a JSON Schema object", param)
		}
		f.Parameters = raw
	}
	return t, nil
}

// toolChoice translates "none", "auto", "required" or a named function;
// a choice of a built-in tool is refused.
func (d *responsesDecoder) toolChoice(raw json.RawMessage) error {
	if bytes.TrimSpace(raw)[0] == '"' {
		var s string
		if err := decodeAs(raw, &s, "tool_choice", "a string or an object"); err != nil {
			return err
		}
		switch s {
		case "none", "auto", "required":
		default:
			return badRequest("tool_choice", "invalid_value", "tool_choice %q is not one of none, auto, required", s)
		}
		d.echo.ToolChoice = raw
		d.param("tool_choice", s)
		return nil
	}
	obj, err := object(raw, "tool_choice", "type", "name")
	if err != nil {
		return err
	}
	var typ, name string
	if _, err := memberAs(obj, "type", &typ, "tool_choice", "a string"); err != nil {
		return err
	}
	if typ != "function" {
		return badRequest("tool_choice.type", "unsupported_value", "tool_choice.type %q is not supported (a function tool choice is)", typ)
	}
	if _, err := memberAs(obj, "name", &name, "tool_choice", "a string"); err != nil {
		return err
	}
	if name == "" {
		return badRequest("tool_choice.name", "missing_required_parameter", "tool_choice.name is required")
	}
	c := chatToolChoice{Type: "function"}
	c.Function.Name = name
	d.echo.ToolChoice = raw
	d.param("tool_choice", c)
	return nil
}

// text translates text.format into response_format (format text, the
// default, sends none) and text.verbosity into verbosity.
func (d *responsesDecoder) text(raw json.RawMessage) error {
	obj, err := object(raw, "text", "format", "verbosity")
	if err != nil {
		return err
	}
	var verbosity string
	if ok, err := memberAs(obj, "verbosity", &verbosity, "text", "a string"); err != nil {
		return err
	} else if ok {
		d.param("verbosity", verbosity)
	}
	if fr, ok := obj["format"]; ok && !isNull(fr) {
		rf, err := textFormat(fr)
		if err != nil {
			return err
		}
		if rf != nil {
			d.param("response_format", rf)
		}
	}
	d.echo.Text = raw
	return nil
}

// textFormat translates text.format; nil for the plain text format.
func textFormat(raw json.RawMessage) (*chatResponseFormat, error) {
	const param = "text.format"
	obj, err := object(raw, param, "type", "name", "schema", "description", "strict")
	if err != nil {
		return nil, err
	}
	var typ string
	if _, err := memberAs(obj, "type", &typ, param, "a string"); err != nil {
		return nil, err
	}
	switch typ {
	case "text", "json_object":
		if name := firstUnknown(obj, func(k string) bool { return k == "type" }); name != "" {
			return nil, unknownParameter(param + "." + name)
		}
		if typ == "text" {
			return nil, nil
		}
		return &chatResponseFormat{Type: typ}, nil
	case "json_schema":
	case "":
		return nil, badRequest(param+".type", "missing_required_parameter", "text.format.type is required")
	default:
		return nil, badRequest(param+".type", "unsupported_value", "text.format.type %q is not supported (text, json_object, json_schema are)", typ)
	}
	s := &chatJSONSchema{}
	if _, err := memberAs(obj, "name", &s.Name, param, "a string"); err != nil {
		return nil, err
	}
	if s.Name == "" {
		return nil, badRequest(param+".name", "missing_required_parameter", "text.format.name is required")
	}
	if _, err := memberAs(obj, "description", &s.Description, param, "a string"); err != nil {
		return nil, err
	}
	if _, err := memberAs(obj, "strict", &s.Strict, param, "a boolean"); err != nil {
		return nil, err
	}
	if s.Schema = obj["schema"]; !isObject(s.Schema) {
		return nil, badRequest(param+".schema", "missing_required_parameter", "text.format.schema is required: a JSON Schema object")
	}
	return &chatResponseFormat{Type: "json_schema", JSONSchema: s}, nil
}

// isObject reports whether raw (valid JSON or empty) is an object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}
