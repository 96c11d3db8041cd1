package polygateway

import "github.com/polygateway/polygateway/core"

// Message is one chat message in OpenAI shape; multimodal content arrays
// are first-class (Parts). Build them with System, User, Assistant and
// UserParts, or as a literal; see go doc core.Message for the fields.
type Message = core.Message

// ContentPart is one element of a multimodal content array.
type ContentPart = core.ContentPart

// ToolCall is one function call requested by the model.
type ToolCall = core.ToolCall

// LLMResponse is the result of one governed chat call: the answer, the
// source that gave it, usage, cost and timing (go doc core.LLMResponse).
type LLMResponse = core.LLMResponse

// System returns a system message.
func System(text string) Message { return core.System(text) }

// User returns a user message.
func User(text string) Message { return core.User(text) }

// Assistant returns an assistant message.
func Assistant(text string) Message { return core.Assistant(text) }

// UserParts returns a user message with a multimodal content array.
func UserParts(parts ...ContentPart) Message { return core.UserParts(parts...) }

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return core.TextPart(text) }

// ImageURLPart returns an image part referring to url.
func ImageURLPart(url string) ContentPart { return core.ImageURLPart(url) }

// ImageBytesPart returns an image part whose bytes travel inline as a data: URL.
func ImageBytesPart(mime string, data []byte) ContentPart { return core.ImageBytesPart(mime, data) }
