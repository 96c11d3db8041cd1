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
// deterministic. Values are encoded by encoding/json (see jsonwrite.go).
func encodeRequest(b []byte, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) ([]byte, error) {
	e := getBodyEncoder(b)
	err := e.request(src, call, prof)
	return e.done(), err
}

func (e *bodyEncoder) request(src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) error {
	e.raw(`{"model":`)
	if err := e.value(&src.Model); err != nil {
		return err
	}
	e.raw(`,"messages":`)
	if err := e.messages(call.Messages); err != nil {
		return err
	}
	if call.Stream {
		e.raw(`,"stream":true`)
	} else {
		e.raw(`,"stream":false`)
	}
	_, paramOpts := call.Params["stream_options"]
	_, extraOpts := src.ExtraBody["stream_options"]
	if call.Stream && !paramOpts && !extraOpts {
		e.raw(`,"stream_options":{"include_usage":true}`)
	}

	var thinkRaw string
	var thinkOK bool
	if src.EnableThinking != nil {
		e.key, thinkRaw, thinkOK = thinkingSwitch(prof.Thinking, *src.EnableThinking)
		if thinkOK {
			if _, inExtra := src.ExtraBody[e.key]; inExtra {
				thinkOK = false
			} else if _, inParams := call.Params[e.key]; inParams && *src.EnableThinking {
				thinkOK = false
			}
		}
	}

	if len(call.Params) > 0 {
		e.keys = sortedKeys(e.keys[:0], call.Params)
		for i, k := range e.keys {
			if protectedKey(k) {
				continue
			}
			if _, over := src.ExtraBody[k]; over {
				continue
			}
			if thinkOK && k == e.key {
				continue
			}
			if err := e.member(&e.keys[i], call.Params[k]); err != nil {
				return err
			}
		}
	}
	if thinkOK {
		e.raw(",")
		if err := e.value(&e.key); err != nil {
			return err
		}
		e.raw(":")
		e.raw(thinkRaw) // a constant of thinkingSwitch
	}
	if nativeSchema(call, src, prof) {
		// The caller's schema, checked by json.Valid, as it is.
		e.raw(`,"response_format":{"type":"json_schema","json_schema":{"name":"response","schema":`)
		e.w.b = append(e.w.b, call.JSONSchema...)
		e.raw(`}}`)
	}
	if len(src.ExtraBody) > 0 {
		e.keys = sortedKeys(e.keys[:0], src.ExtraBody)
		for i, k := range e.keys {
			if protectedKey(k) {
				continue
			}
			if err := e.member(&e.keys[i], src.ExtraBody[k]); err != nil {
				return err
			}
		}
	}
	e.raw("}")
	return nil
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

func sortedKeys(dst []string, m map[string]any) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
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
