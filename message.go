package polygateway

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// Message is one chat message in OpenAI shape; multimodal content arrays are
// first-class (Parts). Build them with System, User, Assistant and
// UserParts, or as a literal.
type Message struct {
	// Role is "system", "user", "assistant" or "tool".
	Role string
	// Content is the text of the message (when Parts is empty).
	Content string
	// Parts is a multimodal content array (TextPart, ImageURLPart,
	// ImageBytesPart); it replaces Content when set.
	Parts []ContentPart
	// Name is the optional participant name.
	Name string
	// ToolCallID is the id of the tool call a "tool" message answers.
	ToolCallID string
	// ToolCalls are the function calls an assistant turn asked for, sent
	// back in multi-turn tool use (answered by "tool" messages carrying
	// their ToolCallID).
	ToolCalls []ToolCall
}

// ContentPart is one element of a multimodal content array.
type ContentPart = core.ContentPart

// ToolCall is one function call requested by the model.
type ToolCall = core.ToolCall

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
	// UsageSource is "measured" or "estimated".
	UsageSource string
	// StructuredData is set with structured output.
	StructuredData any
	// FinishReason is the upstream's finish_reason ("stop", "length", …).
	FinishReason string
	// Attempts lists the source names tried, in order.
	Attempts []string
	// ToolCalls are the tool calls the model asked for, assembled from deltas.
	ToolCalls []ToolCall
	// SkippedEvents counts the malformed stream events that carried nothing
	// of the answer and were passed over.
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

// System returns a system message.
func System(text string) Message { return Message(core.System(text)) }

// User returns a user message.
func User(text string) Message { return Message(core.User(text)) }

// Assistant returns an assistant message.
func Assistant(text string) Message { return Message(core.Assistant(text)) }

// UserParts returns a user message with a multimodal content array.
func UserParts(parts ...ContentPart) Message { return Message(core.UserParts(parts...)) }

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return core.TextPart(text) }

// ImageURLPart returns an image part referring to url.
func ImageURLPart(url string) ContentPart { return core.ImageURLPart(url) }

// ImageBytesPart returns an image part whose bytes travel inline as a data: URL.
func ImageBytesPart(mime string, data []byte) ContentPart { return core.ImageBytesPart(mime, data) }
