package transport

import (
	"encoding/json"
	"slices"

	"github.com/polygateway/polygateway/internal/core"
)

// Request fields owned by the transport: Params and ExtraBody never
// override them.
func protectedKey(k string) bool {
	return k == "model" || k == "messages" || k == "stream"
}

// thinkingSwitch returns the request field that turns thinking on or off
// in dialect d, as a key and a raw JSON value. ok is false for
// ThinkingNone and unknown dialects.
//
// ThinkingReasoningEffort uses "medium" for on and "none" for off: "none"
// is the value that disables reasoning where it can be disabled (Ollama,
// newer OpenAI models); a model that cannot turn reasoning off rejects it,
// which tells the operator ENABLE_THINKING=false is not possible there
// rather than silently ignoring it.
func thinkingSwitch(d core.ThinkingSwitch, on bool) (key, raw string, ok bool) {
	switch d {
	case core.ThinkingEnableFlag:
		if on {
			return "enable_thinking", "true", true
		}
		return "enable_thinking", "false", true
	case core.ThinkingObject:
		if on {
			return "thinking", `{"type":"enabled"}`, true
		}
		return "thinking", `{"type":"disabled"}`, true
	case core.ThinkingAdaptiveObject:
		if on {
			return "thinking", `{"type":"adaptive"}`, true
		}
		return "thinking", `{"type":"disabled"}`, true
	case core.ThinkingChatTemplate:
		if on {
			return "chat_template_kwargs", `{"enable_thinking":true}`, true
		}
		return "chat_template_kwargs", `{"enable_thinking":false}`, true
	case core.ThinkingReasoningEffort:
		if on {
			return "reasoning_effort", `"medium"`, true
		}
		return "reasoning_effort", `"none"`, true
	}
	return "", "", false
}

// encodeRequest appends the chat completions request body to b.
//
// Layers, later ones winning per top-level key (no deep merge):
//
//  1. model, messages, stream (always ours: never overridden) and, when
//     streaming, stream_options {"include_usage": true};
//  2. call.Params;
//  3. the thinking switch of the profile's dialect when src.EnableThinking
//     is set — except that with thinking on, a Params value for the same
//     key is kept (it is a more specific "on", e.g. with a budget);
//  4. for a structured call with a schema, when the profile supports it
//     natively and neither Params nor ExtraBody set one, response_format
//     {"type": "json_schema", …};
//  5. src.ExtraBody (per-source overrides).
//
// Keys of each layer are written in sorted order so bodies are
// deterministic.
func encodeRequest(b []byte, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) ([]byte, error) {
	b = append(b, `{"model":`...)
	b = appendJSONString(b, src.Model)
	b = append(b, `,"messages":[`...)
	for i := range call.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendMessage(b, &call.Messages[i])
	}
	b = append(b, ']')
	if call.Stream {
		b = append(b, `,"stream":true`...)
	} else {
		b = append(b, `,"stream":false`...)
	}
	_, paramOpts := call.Params["stream_options"]
	_, extraOpts := src.ExtraBody["stream_options"]
	if call.Stream && !paramOpts && !extraOpts {
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}

	var thinkKey, thinkRaw string
	var thinkOK bool
	if src.EnableThinking != nil {
		thinkKey, thinkRaw, thinkOK = thinkingSwitch(prof.Thinking, *src.EnableThinking)
		if thinkOK {
			if _, inExtra := src.ExtraBody[thinkKey]; inExtra {
				thinkOK = false
			} else if _, inParams := call.Params[thinkKey]; inParams && *src.EnableThinking {
				thinkOK = false
			}
		}
	}

	var err error
	var keyBuf [16]string
	if len(call.Params) > 0 {
		keys := sortedKeys(keyBuf[:0], call.Params)
		for _, k := range keys {
			if protectedKey(k) {
				continue
			}
			if _, over := src.ExtraBody[k]; over {
				continue
			}
			if thinkOK && k == thinkKey {
				continue
			}
			if b, err = appendMember(b, k, call.Params[k]); err != nil {
				return b, err
			}
		}
	}
	if thinkOK {
		b = append(b, ',')
		b = appendJSONString(b, thinkKey)
		b = append(b, ':')
		b = append(b, thinkRaw...)
	}
	if nativeSchema(call, src, prof) {
		b = append(b, `,"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":`...)
		b = append(b, call.JSONSchema...)
		b = append(b, `}}`...)
	}
	if len(src.ExtraBody) > 0 {
		keys := sortedKeys(keyBuf[:0], src.ExtraBody)
		for _, k := range keys {
			if protectedKey(k) {
				continue
			}
			if b, err = appendMember(b, k, src.ExtraBody[k]); err != nil {
				return b, err
			}
		}
	}
	return append(b, '}'), nil
}

// fieldError reports a request field that cannot be encoded.
type fieldError struct {
	key string
	err error
}

func (e *fieldError) Error() string {
	return "cannot encode request field " + e.key + ": " + e.err.Error()
}
func (e *fieldError) Unwrap() error { return e.err }

func appendMember(b []byte, k string, v any) ([]byte, error) {
	b = append(b, ',')
	b = appendJSONString(b, k)
	b = append(b, ':')
	out, err := appendJSONValue(b, v)
	if err != nil {
		return b, &fieldError{key: k, err: err}
	}
	return out, nil
}

func sortedKeys(dst []string, m map[string]any) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
}

func appendMessage(b []byte, m *core.Message) []byte {
	role := m.Role
	if role == "" {
		role = core.RoleUser
	}
	b = append(b, `{"role":`...)
	b = appendJSONString(b, role)
	b = append(b, `,"content":`...)
	if len(m.Parts) == 0 {
		b = appendJSONString(b, m.Content)
	} else {
		b = append(b, '[')
		for i := range m.Parts {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendPart(b, &m.Parts[i])
		}
		b = append(b, ']')
	}
	if m.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, m.Name)
	}
	if m.ToolCallID != "" {
		b = append(b, `,"tool_call_id":`...)
		b = appendJSONString(b, m.ToolCallID)
	}
	if len(m.ToolCalls) > 0 {
		b = append(b, `,"tool_calls":[`...)
		for i := range m.ToolCalls {
			tc := &m.ToolCalls[i]
			if i > 0 {
				b = append(b, ',')
			}
			typ := tc.Type
			if typ == "" {
				typ = "function"
			}
			b = append(b, `{"id":`...)
			b = appendJSONString(b, tc.ID)
			b = append(b, `,"type":`...)
			b = appendJSONString(b, typ)
			b = append(b, `,"function":{"name":`...)
			b = appendJSONString(b, tc.Name)
			b = append(b, `,"arguments":`...)
			b = appendJSONString(b, tc.Arguments)
			b = append(b, `}}`...)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

func appendPart(b []byte, p *core.ContentPart) []byte {
	if p.Type == core.PartImageURL || p.Type == "" && p.ImageURL != "" {
		b = append(b, `{"type":"image_url","image_url":{"url":`...)
		b = appendJSONString(b, p.ImageURL)
		if p.Detail != "" {
			b = append(b, `,"detail":`...)
			b = appendJSONString(b, p.Detail)
		}
		return append(b, `}}`...)
	}
	b = append(b, `{"type":"text","text":`...)
	b = appendJSONString(b, p.Text)
	return append(b, '}')
}

// nativeSchema reports whether a structured call's schema goes upstream as
// response_format: the provider supports json_schema natively, the schema is
// valid JSON, and the caller did not set response_format themselves.
func nativeSchema(call *core.Call, src *core.SourceConfig, prof *core.ProviderProfile) bool {
	if len(call.JSONSchema) == 0 || !prof.NativeJSONSchema || !json.Valid(call.JSONSchema) {
		return false
	}
	_, inParams := call.Params["response_format"]
	_, inExtra := src.ExtraBody["response_format"]
	return !inParams && !inExtra
}
