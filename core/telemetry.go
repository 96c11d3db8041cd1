package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
)

// ImageDigest returns "sha256:<hex>" of an image URL. Inline (data:) images
// never enter a cache key, a store or a telemetry row raw: only this digest.
func ImageDigest(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// telemetryMessage is the stored shape of one message: OpenAI-like, with
// images replaced by their digest.
type telemetryMessage struct {
	Role       string              `json:"role"`
	Content    any                 `json:"content"`
	Name       string              `json:"name,omitempty"`
	ToolCallID string              `json:"tool_call_id,omitempty"`
	ToolCalls  []telemetryToolCall `json:"tool_calls,omitempty"`
}

type telemetryToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type telemetryPart struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	ImageURL    string `json:"image_url,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
}

// MessagesJSON renders msgs as the JSON stored in the telemetry messages
// column, images as digests.
func MessagesJSON(msgs []Message) string {
	out := make([]telemetryMessage, len(msgs))
	for i, m := range msgs {
		tm := telemetryMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, Content: m.Content}
		for _, tc := range m.ToolCalls {
			tm.ToolCalls = append(tm.ToolCalls, telemetryToolCall{ID: tc.ID, Name: tc.Name, Arguments: tc.Arguments})
		}
		if len(m.Parts) > 0 {
			parts := make([]telemetryPart, len(m.Parts))
			for j, p := range m.Parts {
				if p.IsImage() {
					if strings.HasPrefix(p.ImageURL, "data:") {
						parts[j] = telemetryPart{Type: PartImageURL, ImageDigest: ImageDigest(p.ImageURL)}
					} else {
						parts[j] = telemetryPart{Type: PartImageURL, ImageURL: p.ImageURL}
					}
				} else {
					parts[j] = telemetryPart{Type: p.Type, Text: p.Text}
				}
			}
			tm.Content = parts
		}
		out[i] = tm
	}
	b, err := json.Marshal(out)
	if err != nil {
		return "[]"
	}
	return string(b)
}

// Render fills Messages from RawMessages (images as digests) when it is
// empty. The telemetry layer hands sinks the raw messages so that the JSON
// is built off the call path; sinks call Render before storing a record.
func (r *TelemetryRecord) Render() {
	if r.Messages == "" && r.RawMessages != nil {
		r.Messages = MessagesJSON(r.RawMessages)
	}
	r.RawMessages = nil
}
