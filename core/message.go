package core

import (
	"encoding/base64"
	"fmt"
)

// Message roles used by the OpenAI chat format.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool"
	// RoleDeveloper is OpenAI's name for a system message to reasoning
	// models; passed upstream as it is.
	RoleDeveloper = "developer"
)

// ValidRole reports whether role is a chat role a provider accepts.
func ValidRole(role string) bool {
	switch role {
	case RoleSystem, RoleUser, RoleAssistant, RoleTool, RoleDeveloper:
		return true
	}
	return false
}

// CheckRoles returns a RequestRejectedError naming the first message whose
// role is not a chat role ("usr"), before anything is sent.
func CheckRoles(msgs []Message) error {
	for i := range msgs {
		if r := msgs[i].Role; !ValidRole(r) {
			return &RequestRejectedError{Code: "invalid_value", Param: fmt.Sprintf("messages[%d].role", i),
				Message: fmt.Sprintf("messages[%d].role %q is not a chat role (system, user, assistant, tool, developer)", i, r)}
		}
	}
	return nil
}

// Content part types.
const (
	PartText     = "text"
	PartImageURL = "image_url"
)

// ContentPart is one element of a multimodal message content array.
// Type is PartText or PartImageURL; Text or ImageURL carries the value.
type ContentPart struct {
	Type     string
	Text     string
	ImageURL string
	// Detail is the optional image detail hint ("low", "high", "auto").
	Detail string
}

// IsImage reports whether p goes upstream as an image: typed PartImageURL,
// or untyped with an ImageURL. The request body, the token estimate, the
// cache key and the telemetry row all read a part by this rule.
func (p ContentPart) IsImage() bool {
	return p.Type == PartImageURL || p.Type == "" && p.ImageURL != ""
}

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

// System returns a system message.
func System(text string) Message { return Message{Role: RoleSystem, Content: text} }

// User returns a user message.
func User(text string) Message { return Message{Role: RoleUser, Content: text} }

// Assistant returns an assistant message.
func Assistant(text string) Message { return Message{Role: RoleAssistant, Content: text} }

// UserParts returns a user message with a multimodal content array.
func UserParts(parts ...ContentPart) Message {
	return Message{Role: RoleUser, Parts: append([]ContentPart(nil), parts...)}
}

// TextPart returns a text content part.
func TextPart(text string) ContentPart { return ContentPart{Type: PartText, Text: text} }

// ImageURLPart returns an image content part referring to url (http(s) or data: URL).
func ImageURLPart(url string) ContentPart { return ContentPart{Type: PartImageURL, ImageURL: url} }

// ImageBytesPart returns an image content part whose bytes travel inline as a
// data: URL with the given MIME type.
func ImageBytesPart(mime string, data []byte) ContentPart {
	return ContentPart{Type: PartImageURL, ImageURL: "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)}
}
