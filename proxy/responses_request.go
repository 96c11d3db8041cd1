package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"unicode/utf8"

	"github.com/polygateway/polygateway/core"
)

// This file translates a Responses API request (POST /v1/responses) into
// the chat request the chat completions endpoint builds, so that one
// governed call serves both. It reads with encoding/json only: the body
// into its members, then each member into a typed value, so that an error
// names the field at fault. What the gateway cannot honour is refused with
// a 400 naming the field, never dropped silently; docs/howto-responses.md
// lists every field and what becomes of it.

// Limits of the metadata object, as OpenAI sets them.
const (
	maxMetadataPairs    = 16
	maxMetadataKeyLen   = 64
	maxMetadataValueLen = 512
)

// responsesDecoder builds the chat request of one Responses request.
type responsesDecoder struct {
	req    *chatRequest
	echo   responseEcho
	system []core.Message // from instructions
	input  []core.Message
	hasIn  bool
}

// param adds a parameter sent upstream.
func (d *responsesDecoder) param(key string, v any) {
	if d.req.params == nil {
		d.req.params = map[string]any{}
	}
	d.req.params[key] = v
}

// responsesField is a request member the gateway reads; read gets its
// value when it is present and not null.
type responsesField struct {
	name string
	read func(d *responsesDecoder, raw json.RawMessage) error
}

// responsesFields are the members of a Responses request the gateway
// reads, in the order they are read; any other member is refused.
var responsesFields = []responsesField{
	{"model", (*responsesDecoder).model},
	{"input", (*responsesDecoder).inputField},
	{"instructions", (*responsesDecoder).instructions},
	{"max_output_tokens", (*responsesDecoder).maxOutputTokens},
	{"temperature", numberField("temperature")},
	{"top_p", numberField("top_p")},
	{"tools", (*responsesDecoder).tools},
	{"tool_choice", (*responsesDecoder).toolChoice},
	{"parallel_tool_calls", (*responsesDecoder).parallelToolCalls},
	{"text", (*responsesDecoder).text},
	{"reasoning", (*responsesDecoder).reasoning},
	{"metadata", (*responsesDecoder).metadata},
	{"user", (*responsesDecoder).user},
	{"stream", (*responsesDecoder).stream},
	{"stream_options", (*responsesDecoder).streamOptions},
	{"store", refuseTrue("store", "this gateway stores no responses (send store: false or leave it out)")},
	{"include", (*responsesDecoder).include},
	{"truncation", (*responsesDecoder).truncation},
	{"service_tier", (*responsesDecoder).serviceTier},
	{"previous_response_id", refuseField("previous_response_id", "this gateway stores no responses: send the whole conversation in input")},
	{"conversation", refuseField("conversation", "this gateway stores no conversations: send the whole conversation in input")},
	{"background", refuseTrue("background", "this gateway answers in the request")},
	{fallbacksField, func(d *responsesDecoder, raw json.RawMessage) error { return d.req.setFallbacks(raw, nil) }},
	{gatewayField, func(d *responsesDecoder, raw json.RawMessage) error { return d.req.gatewayOptions(raw) }},
}

// isResponsesField reports whether name is a member the gateway reads.
func isResponsesField(name string) bool {
	return slices.ContainsFunc(responsesFields, func(f responsesField) bool { return f.name == name })
}

// decodeResponses reads a Responses API request from r and returns the
// chat request it becomes and the answer renderer that echoes it. A
// failure is a *requestError naming the field at fault.
func decodeResponses(r io.Reader) (*chatRequest, *responsesAnswer, error) {
	dec := json.NewDecoder(r)
	var members map[string]json.RawMessage
	if err := dec.Decode(&members); err != nil {
		return nil, nil, bodyError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil || isSyntax(err) {
			return nil, nil, badRequest("", "invalid_json", "request body is not a JSON object: data after its end")
		}
		return nil, nil, bodyError(err)
	}
	if members == nil {
		return nil, nil, badRequest("", "invalid_json", "request body is not a JSON object")
	}
	if name := firstUnknown(members, isResponsesField); name != "" {
		return nil, nil, unknownParameter(name)
	}
	d := &responsesDecoder{req: &chatRequest{}, echo: defaultEcho()}
	for _, f := range responsesFields {
		if raw, ok := members[f.name]; ok && !isNull(raw) {
			if err := f.read(d, raw); err != nil {
				return nil, nil, err
			}
		}
	}
	if !d.hasIn {
		return nil, nil, badRequest("input", "missing_required_parameter", "input is required")
	}
	d.toolless()
	d.req.messages = slices.Concat(d.system, d.input)
	if len(d.req.messages) == 0 {
		return nil, nil, badRequest("input", "empty_array", "input must hold at least one message")
	}
	return d.req, &responsesAnswer{echo: d.echo}, nil
}

// toolless leaves out the tool options of a request that sends no tools
// upstream and asks for no call (tool_choice none, auto or unset): they
// mean nothing without tools, and chat completions refuses
// parallel_tool_calls and tool_choice without tools where the Responses
// API takes them (the Agents SDK sends "tools": [] with
// "parallel_tool_calls": false). A tool_choice that asks for a call goes
// upstream, which refuses it. The answer still repeats them.
func (d *responsesDecoder) toolless() {
	if _, ok := d.req.params["tools"]; ok {
		return
	}
	choice, set := d.req.params["tool_choice"]
	if s, ok := choice.(string); set && (!ok || s == "required") {
		return
	}
	delete(d.req.params, "tool_choice")
	delete(d.req.params, "parallel_tool_calls")
	if len(d.req.params) == 0 {
		d.req.params = nil
	}
}

// bodyError is the answer to a body encoding/json could not read.
func bodyError(err error) error {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		return badRequest("", "invalid_json", "request body is not a JSON object")
	case isSyntax(err), errors.Is(err, io.EOF):
		return badRequest("", "invalid_json", "request body is not a JSON object: %v", err)
	}
	return badRequest("", "invalid_body", "could not read the request body")
}

// isSyntax reports a JSON syntax error or a text that ends early.
func isSyntax(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF)
}

// firstUnknown returns the first member of obj, in byte order, that known
// does not accept; "" when there is none.
func firstUnknown(obj map[string]json.RawMessage, known func(string) bool) string {
	var unknown []string
	for k := range obj {
		if !known(k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return ""
	}
	return slices.Min(unknown)
}

// unknownParameter refuses a member the gateway does not read. A name
// longer than maxShown is cut there (shown).
func unknownParameter(param string) error {
	param = shown(param)
	return badRequest(param, "unknown_parameter", "unknown parameter %q: this gateway does not support it on /v1/responses", param)
}

// refuseField refuses a member that is never honoured when it is set.
func refuseField(name, why string) func(*responsesDecoder, json.RawMessage) error {
	return func(*responsesDecoder, json.RawMessage) error {
		return badRequest(name, "unsupported_parameter", "%s is not supported: %s", name, why)
	}
}

// refuseTrue is the reader of a boolean member the gateway takes only as
// false: true is refused, for the reason why.
func refuseTrue(name, why string) func(*responsesDecoder, json.RawMessage) error {
	return func(_ *responsesDecoder, raw json.RawMessage) error {
		var b bool
		if err := decodeAs(raw, &b, name, "a boolean"); err != nil {
			return err
		}
		if b {
			return badRequest(name, "unsupported_value", "%s: true is not supported: %s", name, why)
		}
		return nil
	}
}

// decodeAs decodes raw into v, or refuses it as not being want.
func decodeAs(raw json.RawMessage, v any, param, want string) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return badRequest(param, "invalid_type", "%s must be %s", param, want)
	}
	return nil
}

// object decodes raw as a JSON object whose members all satisfy known.
func object(raw json.RawMessage, param string, known ...string) (map[string]json.RawMessage, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, badRequest(param, "invalid_type", "%s must be an object", param)
	}
	if name := firstUnknown(obj, func(k string) bool { return slices.Contains(known, k) }); name != "" {
		return nil, unknownParameter(param + "." + name)
	}
	return obj, nil
}

// memberAs decodes the member key of obj into v when it is present and
// not null; param names obj.
func memberAs(obj map[string]json.RawMessage, key string, v any, param, want string) (bool, error) {
	raw, ok := obj[key]
	if !ok || isNull(raw) {
		return false, nil
	}
	return true, decodeAs(raw, v, param+"."+key, want)
}

func (d *responsesDecoder) model(raw json.RawMessage) error {
	return decodeAs(raw, &d.req.model, "model", "a string")
}

func (d *responsesDecoder) instructions(raw json.RawMessage) error {
	var s string
	if err := decodeAs(raw, &s, "instructions", "a string"); err != nil {
		return err
	}
	d.echo.Instructions = &s
	if s != "" {
		d.system = []core.Message{{Role: core.RoleSystem, Content: s}}
	}
	return nil
}

func (d *responsesDecoder) maxOutputTokens(raw json.RawMessage) error {
	var n int64
	if err := decodeAs(raw, &n, "max_output_tokens", "an integer"); err != nil {
		return err
	}
	if n < 1 {
		return badRequest("max_output_tokens", "invalid_value", "max_output_tokens must be at least 1")
	}
	d.echo.MaxOutputTokens = &n
	d.param("max_tokens", n)
	return nil
}

// numberField reads a sampling parameter (temperature, top_p) that goes
// upstream under its own name.
func numberField(name string) func(*responsesDecoder, json.RawMessage) error {
	return func(d *responsesDecoder, raw json.RawMessage) error {
		var f float64
		if err := decodeAs(raw, &f, name, "a number"); err != nil {
			return err
		}
		if name == "temperature" {
			d.echo.Temperature = &f
		} else {
			d.echo.TopP = &f
		}
		d.param(name, f)
		return nil
	}
}

func (d *responsesDecoder) parallelToolCalls(raw json.RawMessage) error {
	var b bool
	if err := decodeAs(raw, &b, "parallel_tool_calls", "a boolean"); err != nil {
		return err
	}
	d.echo.ParallelToolCalls = b
	d.param("parallel_tool_calls", b)
	return nil
}

func (d *responsesDecoder) user(raw json.RawMessage) error {
	var s string
	if err := decodeAs(raw, &s, "user", "a string"); err != nil {
		return err
	}
	d.echo.User = &s
	d.param("user", s)
	return nil
}

func (d *responsesDecoder) metadata(raw json.RawMessage) error {
	var m map[string]string
	if err := decodeAs(raw, &m, "metadata", "an object of strings"); err != nil {
		return err
	}
	if len(m) > maxMetadataPairs {
		return badRequest("metadata", "invalid_value", "metadata has more than %d pairs", maxMetadataPairs)
	}
	for k, v := range m {
		if utf8.RuneCountInString(k) > maxMetadataKeyLen || utf8.RuneCountInString(v) > maxMetadataValueLen {
			return badRequest("metadata", "invalid_value", "metadata keys are at most %d characters and values at most %d", maxMetadataKeyLen, maxMetadataValueLen)
		}
	}
	if m == nil {
		m = map[string]string{}
	}
	d.echo.Metadata = m
	if len(m) > 0 {
		d.param("metadata", m)
	}
	return nil
}

func (d *responsesDecoder) stream(raw json.RawMessage) error {
	return decodeAs(raw, &d.req.stream, "stream", "a boolean")
}

// streamOptions accepts include_obfuscation: the gateway never pads its
// events, so there is nothing to turn on or off.
func (d *responsesDecoder) streamOptions(raw json.RawMessage) error {
	obj, err := object(raw, "stream_options", "include_obfuscation")
	if err != nil {
		return err
	}
	var b bool
	_, err = memberAs(obj, "include_obfuscation", &b, "stream_options", "a boolean")
	return err
}

// include accepts reasoning.encrypted_content, which asks for nothing the
// gateway has: its reasoning items never carry encrypted content.
func (d *responsesDecoder) include(raw json.RawMessage) error {
	var list []string
	if err := decodeAs(raw, &list, "include", "an array of strings"); err != nil {
		return err
	}
	for i, v := range list {
		if v != "reasoning.encrypted_content" {
			return badRequest(fmt.Sprintf("include[%d]", i), "unsupported_value", "include[%d] %q is not supported by this gateway", i, v)
		}
	}
	return nil
}

func (d *responsesDecoder) truncation(raw json.RawMessage) error {
	var s string
	if err := decodeAs(raw, &s, "truncation", "a string"); err != nil {
		return err
	}
	if s != "disabled" {
		return badRequest("truncation", "unsupported_value", "truncation %q is not supported: this gateway never truncates the input (send \"disabled\")", s)
	}
	return nil
}

// serviceTier leaves "auto", the default, out; any other tier goes
// upstream as chat completions' service_tier.
func (d *responsesDecoder) serviceTier(raw json.RawMessage) error {
	var s string
	if err := decodeAs(raw, &s, "service_tier", "a string"); err != nil {
		return err
	}
	if s != "auto" {
		d.param("service_tier", s)
	}
	return nil
}

// reasoning maps effort to chat completions' reasoning_effort. summary
// (and the older generate_summary) is accepted: the reasoning text an
// upstream sends comes back as the reasoning item's summary whatever it
// asks for.
func (d *responsesDecoder) reasoning(raw json.RawMessage) error {
	obj, err := object(raw, "reasoning", "effort", "summary", "generate_summary")
	if err != nil {
		return err
	}
	var effort, summary string
	set, err := memberAs(obj, "effort", &effort, "reasoning", "a string")
	if err != nil {
		return err
	}
	for _, k := range []string{"summary", "generate_summary"} {
		if _, err := memberAs(obj, k, &summary, "reasoning", "a string"); err != nil {
			return err
		}
	}
	if set {
		d.param("reasoning_effort", effort)
	}
	d.echo.Reasoning = raw
	return nil
}
