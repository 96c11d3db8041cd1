package transport

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/polygateway/polygateway/core"
)

// Request fields owned by the transport: Params and ExtraBody never
// override them, in any case: a server decoding as encoding/json does
// matches member names case-insensitively (Unicode simple folding, as
// strings.EqualFold), the last one winning.
func protectedKey(k string) bool {
	return strings.EqualFold(k, "model") || strings.EqualFold(k, "messages") || strings.EqualFold(k, "stream")
}

// leftOut reports whether a Params or ExtraBody key stays out of a body:
// a protected key, and stream_options unless streaming (OpenAI and vLLM
// refuse stream_options with "stream": false).
func leftOut(k string, stream bool) bool {
	return protectedKey(k) || !stream && strings.EqualFold(k, "stream_options")
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
func thinkingSwitch(d core.ThinkingSwitch, on bool) (key string, raw *json.RawMessage, ok bool) {
	v := 0
	if on {
		v = 1
	}
	switch d {
	case core.ThinkingEnableFlag:
		return "enable_thinking", &thinkingValues.flag[v], true
	case core.ThinkingObject:
		return "thinking", &thinkingValues.object[v], true
	case core.ThinkingAdaptiveObject:
		return "thinking", &thinkingValues.adaptive[v], true
	case core.ThinkingChatTemplate:
		return "chat_template_kwargs", &thinkingValues.template[v], true
	case core.ThinkingReasoningEffort:
		return "reasoning_effort", &thinkingValues.effort[v], true
	}
	return "", nil, false
}

// thinkingValues are the switch values, off then on, made once.
var thinkingValues = struct{ flag, object, adaptive, template, effort [2]json.RawMessage }{
	flag:     [2]json.RawMessage{json.RawMessage(`false`), json.RawMessage(`true`)},
	object:   [2]json.RawMessage{json.RawMessage(`{"type":"disabled"}`), json.RawMessage(`{"type":"enabled"}`)},
	adaptive: [2]json.RawMessage{json.RawMessage(`{"type":"disabled"}`), json.RawMessage(`{"type":"adaptive"}`)},
	template: [2]json.RawMessage{json.RawMessage(`{"enable_thinking":false}`), json.RawMessage(`{"enable_thinking":true}`)},
	effort:   [2]json.RawMessage{json.RawMessage(`"none"`), json.RawMessage(`"medium"`)},
}

// encodeRequestAfter appends the chat completions request body to b, with
// the body's opening, head = modelHead(src.Model), made already (an
// endpoint keeps its own).
//
// Layers, later ones winning per top-level key (no deep merge):
//
//  1. model, messages, stream (always ours: never overridden) and, when
//     streaming, stream_options {"include_usage": true} (a stream_options
//     of a later layer replaces it, and is left out when not streaming);
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
func encodeRequestAfter(b, head []byte, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) ([]byte, error) {
	if n := messagesSize(call.Messages); n > smallBodyBytes {
		// A large body is grown once, to about its size, not step by step.
		b = slices.Grow(b[:0], len(head)+n+4096)
	}
	e := getBodyEncoder(b)
	err := e.request(head, src, call, prof)
	return e.done(), err
}

// messagesSize estimates the bytes msgs take in a request body: their
// text and what JSON adds to a plain message (escapes can make it more).
func messagesSize(msgs []core.Message) int {
	n := 0
	for i := range msgs {
		m := &msgs[i]
		n += 26 + len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
		for _, p := range m.Parts {
			n += 40 + len(p.Text) + len(p.ImageURL)
		}
		for _, c := range m.ToolCalls {
			n += 60 + len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	return n
}

// modelHead returns the opening of a body for model: {"model":…,"messages":
// with the model's string encoded by encoding/json.
func modelHead(model string) []byte {
	b := encodeObject(&wireModel{Model: model})
	e := getBodyEncoder(b[:len(b)-1]) // the object left open after the model
	e.key(&messagesKey)
	return e.done()
}

// messagesKey is the key of the messages, written by the encoder.
var messagesKey = "messages"

// encodeObject returns v, a pointer to a wire struct of strings and
// booleans (which always encode), as encoding/json writes it.
func encodeObject(v any) []byte {
	e := getBodyEncoder(nil)
	_ = e.value(v)
	return e.done()
}

// The members after the messages, as encoding/json writes them: stream,
// and when streaming without a caller's own stream_options, the request
// for usage in the last chunk.
var (
	tailNoStream   = streamTail(wireStream{})
	tailStream     = streamTail(wireStream{Stream: true})
	tailStreamOpts = streamTail(wireStream{Stream: true, StreamOptions: includeUsage})
)

// streamTail returns w's members as a continuation of an object:
// ,"stream":….
func streamTail(w wireStream) []byte {
	b := encodeObject(&w)
	b[0] = ','
	return b[:len(b)-1]
}

func (e *bodyEncoder) request(head []byte, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile) error {
	e.w.b = append(e.w.b, head...)
	if err := e.messages(call.Messages, call.Continuation && prof.Prefill == core.PrefillPrefixFlag); err != nil {
		return err
	}
	_, paramOpts := call.Params["stream_options"]
	_, extraOpts := src.ExtraBody["stream_options"]
	switch {
	case !call.Stream:
		e.w.b = append(e.w.b, tailNoStream...)
	case paramOpts || extraOpts:
		e.w.b = append(e.w.b, tailStream...)
	default:
		e.w.b = append(e.w.b, tailStreamOpts...)
	}

	var thinkRaw *json.RawMessage
	var thinkOK bool
	if src.EnableThinking != nil {
		e.thinkKey, thinkRaw, thinkOK = thinkingSwitch(prof.Thinking, *src.EnableThinking)
		if thinkOK {
			if _, inExtra := src.ExtraBody[e.thinkKey]; inExtra {
				thinkOK = false
			} else if _, inParams := call.Params[e.thinkKey]; inParams && *src.EnableThinking {
				thinkOK = false
			}
		}
	}
	if len(call.Params) > 0 {
		e.keys = sortedKeys(e.keys[:0], call.Params)
		for i, k := range e.keys {
			if leftOut(k, call.Stream) {
				continue
			}
			if _, over := src.ExtraBody[k]; over {
				continue
			}
			if thinkOK && k == e.thinkKey {
				continue
			}
			if err := e.member(&e.keys[i], call.Params[k]); err != nil {
				return err
			}
		}
	}
	if thinkOK {
		e.key(&e.thinkKey)
		_ = e.value(thinkRaw) // a constant of thinkingSwitch
	}
	if call.Continuation && prof.Prefill == core.PrefillContinueFinal {
		for i := range continueFinal {
			kv := &continueFinal[i]
			_, inParams := call.Params[kv.key]
			if _, inExtra := src.ExtraBody[kv.key]; !inParams && !inExtra {
				e.key(&kv.key)
				_ = e.value(&kv.raw)
			}
		}
	}
	if nativeSchema(call, src, prof) {
		e.key(&responseFormat)
		e.schema.JSONSchema.Schema = call.JSONSchema
		if err := e.value(&e.schema); err != nil {
			return err
		}
	}
	if len(src.ExtraBody) > 0 {
		e.keys = sortedKeys(e.keys[:0], src.ExtraBody)
		for i, k := range e.keys {
			if leftOut(k, call.Stream) {
				continue
			}
			if err := e.member(&e.keys[i], src.ExtraBody[k]); err != nil {
				return err
			}
		}
	}
	e.w.b = append(e.w.b, '}')
	return nil
}

func sortedKeys(dst []string, m map[string]any) []string {
	for k := range m {
		dst = append(dst, k)
	}
	slices.Sort(dst)
	return dst
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

// continueFinal are the body fields of a vLLM continuation.
var continueFinal = [...]struct {
	key string
	raw bool
}{{"add_generation_prompt", false}, {"continue_final_message", true}}

// responseFormat is the key of a structured call's native schema.
var responseFormat = "response_format"
