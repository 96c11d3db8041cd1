package polygateway

import (
	"encoding/json"

	"github.com/polygateway/polygateway/internal/kernel"
)

// Typed request parameters. Each option sets one field of the request body
// under the name OpenAI-compatible providers use; like WithParams, they are
// part of the cache key. Options apply in order: a later one (or a later
// WithParams key) wins.

// WithTemperature sets the sampling temperature ("temperature").
func WithTemperature(t float64) CallOption { return withParam("temperature", t) }

// WithTopP sets nucleus sampling ("top_p").
func WithTopP(p float64) CallOption { return withParam("top_p", p) }

// WithMaxTokens bounds the tokens the answer may have ("max_tokens"); it
// also counts toward a source's CONTEXT_WINDOW.
func WithMaxTokens(n int) CallOption { return withParam("max_tokens", n) }

// WithStop sets up to four sequences at which generation stops ("stop").
func WithStop(stop ...string) CallOption { return withParam("stop", append([]string(nil), stop...)) }

// WithSeed asks for deterministic sampling where the provider supports it
// ("seed").
func WithSeed(seed int64) CallOption { return withParam("seed", seed) }

// WithTools offers the model functions it may call ("tools"); the calls it
// asks for are in LLMResponse.ToolCalls.
func WithTools(tools ...Tool) CallOption { return withParam("tools", append([]Tool(nil), tools...)) }

// WithToolChoice says whether and which tool the model must call
// ("tool_choice").
func WithToolChoice(c ToolChoice) CallOption { return withParam("tool_choice", c) }

// WithResponseFormat sets the answer's format ("response_format"): JSON
// object or a JSON Schema. To have the answer validated (and repaired,
// re-asked) too, use WithJSON, WithJSONSchema or ChatInto, which send the
// native format themselves where the provider supports it.
func WithResponseFormat(f ResponseFormat) CallOption { return withParam("response_format", f) }

// withParam sets one request field, keeping the others.
func withParam(name string, v any) CallOption {
	return func(o *kernel.CallOptions) { ownParams(o, 4)[name] = v }
}

// Tool is a function the model may call.
type Tool struct {
	// Name is the function's name (letters, digits, _ and -).
	Name string
	// Description tells the model what the function does.
	Description string
	// Parameters is the JSON Schema of the function's arguments (an object
	// schema); nil means no arguments.
	Parameters json.RawMessage
	// Strict asks the provider to follow Parameters exactly, where supported.
	Strict bool
}

// MarshalJSON renders the tool as OpenAI's {"type":"function","function":…}.
func (t Tool) MarshalJSON() ([]byte, error) {
	type function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters,omitempty"`
		Strict      bool            `json:"strict,omitempty"`
	}
	return json.Marshal(struct {
		Type     string   `json:"type"`
		Function function `json:"function"`
	}{"function", function(t)})
}

// ToolChoice says whether the model must call a tool: ToolChoiceAuto,
// ToolChoiceNone, ToolChoiceRequired or ToolChoiceFunction(name).
type ToolChoice struct {
	mode, name string
}

// The tool choices.
var (
	// ToolChoiceAuto lets the model decide (the default with tools).
	ToolChoiceAuto = ToolChoice{mode: "auto"}
	// ToolChoiceNone forbids tool calls.
	ToolChoiceNone = ToolChoice{mode: "none"}
	// ToolChoiceRequired makes the model call at least one tool.
	ToolChoiceRequired = ToolChoice{mode: "required"}
)

// ToolChoiceFunction makes the model call the named function.
func ToolChoiceFunction(name string) ToolChoice { return ToolChoice{name: name} }

// MarshalJSON renders the choice as OpenAI expects it.
func (c ToolChoice) MarshalJSON() ([]byte, error) {
	if c.name == "" {
		mode := c.mode
		if mode == "" {
			mode = "auto"
		}
		return json.Marshal(mode)
	}
	return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": c.name}})
}

// ResponseFormat is the format the answer must have: ResponseFormatText,
// ResponseFormatJSONObject or ResponseFormatJSONSchema(name, schema).
type ResponseFormat struct {
	kind, name string
	schema     json.RawMessage
	strict     bool
}

// The plain response formats.
var (
	// ResponseFormatText is free text (the default).
	ResponseFormatText = ResponseFormat{kind: "text"}
	// ResponseFormatJSONObject asks for a JSON object.
	ResponseFormatJSONObject = ResponseFormat{kind: "json_object"}
)

// ResponseFormatJSONSchema asks for JSON valid against schema, named name,
// followed strictly where the provider supports it.
func ResponseFormatJSONSchema(name string, schema json.RawMessage) ResponseFormat {
	return ResponseFormat{kind: "json_schema", name: name, schema: append(json.RawMessage(nil), schema...), strict: true}
}

// MarshalJSON renders the format as OpenAI's response_format.
func (f ResponseFormat) MarshalJSON() ([]byte, error) {
	kind := f.kind
	if kind == "" {
		kind = "text"
	}
	if kind != "json_schema" {
		return json.Marshal(map[string]string{"type": kind})
	}
	return json.Marshal(map[string]any{"type": "json_schema", "json_schema": map[string]any{
		"name": f.name, "schema": f.schema, "strict": f.strict,
	}})
}
