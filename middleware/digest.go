package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"hash"
	"strings"

	"github.com/polygateway/polygateway/internal/core"
)

// imageDigest returns "sha256:<hex>" of an image URL. Inline (data:) images
// never enter a cache key, a store or a telemetry row raw: only this digest.
func imageDigest(url string) string {
	sum := sha256.Sum256([]byte(url))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// writeField writes a length-prefixed field so that field boundaries cannot
// be forged by content.
func writeField(h hash.Hash, s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}

// hashMessages feeds the messages into h; image parts contribute the digest
// of their URL, never the URL itself.
func hashMessages(h hash.Hash, msgs []core.Message) {
	for _, m := range msgs {
		writeField(h, m.Role)
		writeField(h, m.Name)
		writeField(h, m.ToolCallID)
		if len(m.Parts) == 0 {
			writeField(h, "s")
			writeField(h, m.Content)
			continue
		}
		writeField(h, "p")
		for _, p := range m.Parts {
			writeField(h, p.Type)
			switch p.Type {
			case core.PartImageURL:
				sum := sha256.Sum256([]byte(p.ImageURL))
				h.Write(sum[:])
				writeField(h, p.Detail)
			default:
				writeField(h, p.Text)
			}
		}
	}
}

// telemetryMessage is the stored shape of one message: OpenAI-like, with
// images replaced by their digest.
type telemetryMessage struct {
	Role       string `json:"role"`
	Content    any    `json:"content"`
	Name       string `json:"name,omitempty"`
	ToolCallID string `json:"tool_call_id,omitempty"`
}

type telemetryPart struct {
	Type        string `json:"type"`
	Text        string `json:"text,omitempty"`
	ImageURL    string `json:"image_url,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
}

// MessagesJSON renders msgs as the JSON stored in the telemetry messages
// column, images as digests.
func MessagesJSON(msgs []core.Message) string {
	out := make([]telemetryMessage, len(msgs))
	for i, m := range msgs {
		tm := telemetryMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID, Content: m.Content}
		if len(m.Parts) > 0 {
			parts := make([]telemetryPart, len(m.Parts))
			for j, p := range m.Parts {
				if p.Type == core.PartImageURL {
					if strings.HasPrefix(p.ImageURL, "data:") {
						parts[j] = telemetryPart{Type: p.Type, ImageDigest: imageDigest(p.ImageURL)}
					} else {
						parts[j] = telemetryPart{Type: p.Type, ImageURL: p.ImageURL}
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
