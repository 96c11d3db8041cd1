package core

import (
	"context"
	"time"
)

// Usage sources reported in LLMResponse.UsageSource.
const (
	UsageMeasured  = "measured"
	UsageEstimated = "estimated"
	// UsageBounded is the usage of an answer that claimed more than its
	// request could have used: it is settled, billed and reported at that
	// bound (see the governance explanation).
	UsageBounded = "bounded"
)

// Call is one governed call as it travels through the onion. The client
// builds it once; layers may read it and fill its bookkeeping fields
// (Served, Stale, QueueWait) but never change Messages or Params.
type Call struct {
	// ID is the call_id of the telemetry row and LLMResponse.CallID.
	ID string
	// Scope is the logical role (upper case), e.g. "LLM".
	Scope string
	// Operation names what the call does for tracing: "chat" (also when
	// empty), "embeddings", "ocr_text", "ocr_layout".
	Operation string
	// Messages is the conversation to send (for other operations, what
	// telemetry records as the call's input).
	Messages []Message
	// Params holds extra request fields passed through (temperature, max_tokens, tools…).
	Params map[string]any
	// Stream asks the upstream to stream (SSE); enables the watchdog.
	Stream bool
	// SessionID and ParentCallID link telemetry rows of one task.
	SessionID, ParentCallID string
	// CacheSalt and CacheNamespace refine the cache key; empty namespace means
	// the scope's configured namespace.
	CacheSalt, CacheNamespace string
	// Structured names the structured-output mode ("" = none, "json", or
	// "schema:<digest>"); it is part of the cache key.
	Structured string
	// JSONSchema is the schema of a structured call, sent upstream as
	// response_format where the provider supports it natively.
	JSONSchema []byte
	// Check, when set, validates a successful chat answer (and may fill
	// StructuredData). An error makes the attempt a ResultInvalidError: the
	// answer is not cached, the breaker counts the source alive, and the
	// call ends with the answer and the error (the structured-output loop
	// re-asks). The cache layer runs it on hits too.
	Check func(*LLMResponse) error
	// Continuation is set on the copy of a call whose answer was cut after
	// part of it reached the caller: Messages ends with that part as an
	// assistant prefill, which the source continues (CONTINUE=prefill).
	Continuation bool
	// InputBytes is, for a typed attempt (Attempt set), the bytes of text
	// it sends (an embeddings batch's texts): the prompt tokens an answer
	// may claim are bounded by them. 0 = unbounded. A chat call's bound is
	// read from its Messages and Params.
	InputBytes int
	// Tokens is the call's estimated size — prompt plus the most tokens it
	// may generate — for the sources' CONTEXT_WINDOW: a source whose window
	// is smaller is skipped. 0 = unknown (no source is skipped).
	Tokens int
	// MaxOutputTokens is the part of Tokens the request allows the answer
	// (its max_tokens); 0 = the request set none. Budget reservations price
	// Tokens-MaxOutputTokens at the input price and this at the output one.
	MaxOutputTokens int
	// Budgets are spend budgets of this call beside its scope's (a
	// gateway's per-client budget): every attempt reserves its estimated
	// cost on each, in the admission step. Nil = only the scope's.
	Budgets []Budget
	// NoPushbackWait ends the call at once, with a GatewayUnavailableError
	// of reason rate_limited whose RetryAfter is the earliest end of a
	// pushback, when every source that could take it is held back by its
	// upstream's 429, instead of waiting the pushback out (a server whose
	// clients retry a 429 on their own sets it).
	NoPushbackWait bool
	// Place is the call's priority class and tenant when it waits for full
	// gates (zero: a normal call of the anonymous tenant).
	Place Place
	// Deltas, when set, receives a streamed answer as it arrives (a server
	// relaying the stream to its own client). See DeltaSink.
	Deltas DeltaSink
	// Attempt performs one attempt of the call on a source; nil means the
	// engine's chat upstream. Typed front-ends (embeddings, OCR) set it;
	// the engine calls it once per attempt, never concurrently.
	Attempt func(ctx context.Context, src *SourceConfig) (*LLMResponse, error)
	// Events, when set, receives the call's attempt events.
	Events AttemptListener
	// Fallback, when set, is this call's last-resort answer (the scope's
	// fallback otherwise).
	Fallback FallbackFunc
	// Served, set by an outer layer (the cache on a hit), is the answer to
	// return without any attempt: the layers inside record it as the call's
	// answer and pass it back.
	Served *LLMResponse
	// QueueWait, set by the engine, is the time the call waited in the
	// admission queue for full gates (in every attempt together); the
	// telemetry row records it.
	QueueWait time.Duration
	// Stale, set by the cache layer, is an expired answer that the
	// degradation step may serve when no source can answer.
	Stale *LLMResponse
}

// FallbackFunc is the last step of the degradation chain: called when no
// source produced an answer (GatewayUnavailableError, GovernanceBackendError,
// or a TransientError/SourceDeadError with a budget of one attempt) and no
// stale cache entry could stand in — never for a rejected request, an
// invalid result or a cancellation. Its answer is returned marked Degraded
// (DegradedBy "fallback") and recorded in telemetry as such; an error from
// it is ignored and the original error returned. The answer is copied
// before it is marked, so one canned answer may serve every call.
type FallbackFunc = func(ctx context.Context, msgs []Message, cause error) (*LLMResponse, error)

// DeltaSink receives the deltas of a streamed answer as they arrive.
//
// Contract: the transport calls Delta from the attempt's goroutine, in
// order, with the new content and thinking text of each chunk; an error
// aborts the attempt. Before every attempt the engine calls Reset (a
// buffering sink drops what a failed attempt left). Committed reports that
// deltas were passed on irrevocably; Delivered returns them. After a
// committed answer is cut, the call can only continue it (a source with
// CONTINUE=prefill goes on from Delivered, its deltas following the ones
// delivered) or end with the cut.
type DeltaSink interface {
	Delta(content, thinking string) error
	Committed() bool
	Reset()
	Delivered() (content, thinking string)
}

// LLMResponse is the result of one governed chat call.
type LLMResponse struct {
	// Content is the answer text; Thinking the reasoning text of thinking models.
	Content, Thinking string
	// Model, Provider and SourceName say which source answered.
	Model, Provider, SourceName string
	// PromptTokens and CompletionTokens are the usage of the answering attempt.
	PromptTokens, CompletionTokens int
	// CachedPromptTokens is the part of PromptTokens the provider served from
	// its prompt cache (priced at CachedInputPer1M when the table has one).
	CachedPromptTokens int
	// Latency is the wall time of the whole call.
	Latency time.Duration
	// TTFT and MaxInterToken are zero when not streamed or a cache hit.
	TTFT, MaxInterToken time.Duration
	// CacheHit is true when the answer came from the response cache.
	CacheHit bool
	// CallID is the telemetry primary key of this call.
	CallID string
	// Cost is nil without a price for the model; 0 on a cache hit.
	Cost *float64
	// UsageSource is "measured", "estimated" or "bounded" (the upstream
	// claimed more than the request could use; the usage is the bound).
	UsageSource string
	// StructuredData is set with structured output.
	StructuredData any
	// FinishReason is the upstream's finish_reason ("stop", "length", …).
	FinishReason string
	// Attempts lists the source names tried, in order.
	Attempts []string
	// ToolCalls are the tool calls the model asked for, assembled from deltas.
	ToolCalls []ToolCall
	// SkippedEvents counts the malformed stream events that carried no
	// content, usage, finish or error and were passed over (a malformed
	// event that may have carried part of the answer fails the attempt).
	SkippedEvents int
	// Degraded is true when the answer did not come from a governed call to
	// a source: a stale cache entry or the caller's fallback served it.
	Degraded bool
	// DegradedBy names the strategy that served a degraded answer.
	DegradedBy Degradation
	// Breaker is the answering source's circuit state when its attempt was
	// admitted: half_open means the answer was the probe that closes it.
	// Zero (closed) for a cache hit or a fallback.
	Breaker BreakerState
}

// Degradation names the strategy that served a degraded answer.
type Degradation string

// Degradation strategies.
const (
	// DegradedNone: a source answered (or the cache, fresh).
	DegradedNone Degradation = ""
	// DegradedStaleCache: an expired cache entry stood in.
	DegradedStaleCache Degradation = "stale_cache"
	// DegradedFallback: the caller's fallback answered.
	DegradedFallback Degradation = "fallback"
)

// ToolCall is one function call requested by the model.
type ToolCall struct {
	Index     int
	ID        string
	Type      string
	Name      string
	Arguments string
}
