// Package transport speaks the OpenAI-compatible chat completions protocol
// over HTTP, streaming (SSE) and not, and classifies every failure into the
// error classes of core. Client implements core.Upstream: one Do is
// exactly one attempt against one source; retries, source selection,
// limits and breakers live in the engine above it.
//
// # Requests
//
// Do POSTs src.BaseURL + "/chat/completions" with "Authorization: Bearer
// <key>" (none when the key is empty or "none"). The body holds model,
// messages (content strings, or content arrays of text and image_url parts),
// stream and, when streaming, stream_options.include_usage; then
// call.Params, the profile's thinking switch when src.EnableThinking is
// set, and src.ExtraBody, later layers replacing earlier ones per top-level
// key. model, messages and stream are never overridden (by a key in any
// case: servers decoding as encoding/json does match names so), and a
// stream_options of Params or ExtraBody goes only with a streaming
// request (OpenAI and vLLM refuse it otherwise). Every key and
// value of the body is written by encoding/json (HTML escaping off) into a
// pooled buffer, each message straight from the caller's message: the
// messages are never copied into another type first.
//
// # Answers
//
// Every JSON document of an answer — a non-streamed body, each streamed
// chunk, an error body — is read with encoding/json into small typed
// shapes, as json.Unmarshal reads it: member names match in any case, the
// last of a key given twice wins, a value of the wrong kind is passed over
// (see wire.go). The answer is the first choice of index 0 (or of none).
//
// Non-streaming bodies are bounded (Config.MaxBodyBytes) and decoded
// without trusting their shape: choices may be missing, empty or null, and
// the picked choice may lack its message (none, null, not an object): each
// is a TransientError, not an empty answer; an "error" object or a
// MiniMax base_resp.status_code ≠ 0 inside a 200 is an error. A server that
// answers a streaming request with JSON, or a non-streaming one with SSE, is
// read by its Content-Type. The answer names the model the upstream
// reports, else the source's configured model, streamed or not. A
// document (body or event) over 64 KiB with more than 1,024 choices or
// 16,384 tool calls is malformed: it is counted before it is read into
// structs, where each such element would take a hundred times its bytes.
//
// Streams are read with SSEReader (any line ending, split reads, multi-line
// data, comments, events up to Config.MaxEventBytes). Each event is checked
// for an error first; content, thinking and tool-call deltas are applied;
// usage is the last complete usage object (separate chunk, finish chunk,
// choices[0].usage, or every chunk), counted once. "[DONE]" ends the
// stream; an end after a finish_reason is complete; an end with neither is
// a TransientError unless src.MissingDone is "salvage", which returns what
// arrived (at least one token) with an empty FinishReason. A malformed
// event is a TransientError, and so is a stream none of whose chunks had
// a choice of index 0 (or of none), as a body without one is.
//
// A stream's text is kept once: by the transport, or — when the call's
// delta sink keeps every delta itself (core.DeltaKeeper, as a relay
// does) — by the sink, the answer then being what the sink kept during
// the attempt. A core.DeltaModel sink learns the answer's model before the
// deltas that name it; a core.DeltaFlusher sink is flushed whenever the
// next event must come from the network.
//
// # Memory
//
// When the call's context carries a core.MemoryBudget, an attempt reserves
// what it buffers of the answer before reading it — a non-streamed body
// (its declared length at once), a stream's text (in steps that double) —
// and gives it back when the attempt ends; a reservation that does not fit
// ends the attempt at once with an error matching core.ErrMemoryBudget,
// the bytes unread (see memory.go). Thinking text comes from reasoning_content,
// reasoning or reasoning_details[].text (the profile's ThinkingFields give
// the preference; all are accepted, one per chunk), and from <think>…</think>
// blocks in the content, which are moved out of Content into Thinking:
// anywhere for profiles listing think tags, only a leading block otherwise.
// An OpenAI refusal delta is treated as content.
//
// # Watchdog
//
// With src.TTFTTimeout > 0 a stream that yields no token (content, thinking
// or tool-call delta; not comments, role-only chunks or usage) within it
// fails with TransientError{Reason: timeout}; after the first token a gap
// longer than src.InterTokenTimeout fails with Reason stalled. The whole
// attempt is capped by src.Timeout (Reason timeout). One timer per attempt
// cancels the attempt's context with a cause; no goroutine per token.
// LLMResponse.TTFT and MaxInterToken report the measured values.
//
// # Errors
//
// Failures are classified by ClassifyResponse (HTTP status, provider code,
// type and message in any known envelope, retry hints from RetryAfter) and
// by the kind of I/O error. When the caller's context ends, Do returns a
// *core.CanceledError wrapping ctx.Err(), which is none of the four
// classes. API keys are redacted from every error text.
//
// # Usage
//
// Measured usage sets UsageSource "measured". Without it, tokens are
// estimated with EstimatePromptTokens and EstimateTokens and UsageSource is
// "estimated".
package transport
