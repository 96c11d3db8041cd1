package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"sync"

	"github.com/polygateway/polygateway/internal/core"
)

// A cache key is the SHA-256 of length-prefixed fields, built in one
// pooled buffer and hashed once (sha256.Sum256 of the whole equals writing
// the fields to a hash one by one, so keys do not depend on how they are
// fed).

// keyBufs holds the buffers cache keys are built in.
var keyBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// maxPooledKeyBuf bounds the buffers kept for reuse (an image-free
// conversation of a few KiB fits).
const maxPooledKeyBuf = 64 << 10

// appendField appends a length-prefixed field so that field boundaries
// cannot be forged by content.
func appendField(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// appendMessages appends the messages; image parts contribute the digest
// of their URL, never the URL itself.
func appendMessages(b []byte, msgs []core.Message) []byte {
	for i := range msgs {
		m := &msgs[i]
		b = appendField(b, m.Role)
		b = appendField(b, m.Name)
		b = appendField(b, m.ToolCallID)
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			b = appendField(b, "t")
			b = appendField(b, tc.ID)
			b = appendField(b, tc.Type)
			b = appendField(b, tc.Name)
			b = appendField(b, tc.Arguments)
		}
		if len(m.Parts) == 0 {
			b = appendField(b, "s")
			b = appendField(b, m.Content)
			continue
		}
		b = appendField(b, "p")
		for j := range m.Parts {
			p := &m.Parts[j]
			b = appendField(b, p.Type)
			switch p.Type {
			case core.PartImageURL:
				sum := sha256.Sum256([]byte(p.ImageURL))
				b = append(b, sum[:]...)
				b = appendField(b, p.Detail)
			default:
				b = appendField(b, p.Text)
			}
		}
	}
	return b
}
