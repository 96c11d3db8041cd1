package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/polygateway/polygateway/internal/core"
)

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
		for _, tc := range m.ToolCalls {
			writeField(h, "t")
			writeField(h, tc.ID)
			writeField(h, tc.Type)
			writeField(h, tc.Name)
			writeField(h, tc.Arguments)
		}
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
