package middleware

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// A cache key is the SHA-256 of length-prefixed fields. keyHash gathers
// them in a pooled chunk of keyChunk bytes: a key that fits (the common
// case) is hashed once with sha256.Sum256 and allocates nothing; a longer
// one (a long conversation) streams its chunks into a hash, so memory stays
// bounded by the chunk whatever the size of the call. Both give the hash of
// the same bytes, so a key does not depend on how it was fed.

// keyChunk is the size of a keyHash's buffer.
const keyChunk = 8 << 10

// keyHash builds one cache key. It is not safe for concurrent use.
type keyHash struct {
	buf []byte    // pending bytes, at most keyChunk
	h   hash.Hash // nil until the key outgrows one chunk
	big bool      // h holds bytes of this key
}

var keyHashes = sync.Pool{New: func() any { return &keyHash{buf: make([]byte, 0, keyChunk)} }}

// write appends p, streaming full chunks into the hash.
func write[T ~string | ~[]byte](k *keyHash, p T) {
	for len(p) > 0 {
		if len(k.buf) == keyChunk {
			k.flush()
		}
		n := min(len(p), keyChunk-len(k.buf))
		k.buf = append(k.buf, p[:n]...)
		p = p[n:]
	}
}

func (k *keyHash) flush() {
	if k.h == nil {
		k.h = sha256.New()
	}
	k.h.Write(k.buf)
	k.buf, k.big = k.buf[:0], true
}

// field appends a length-prefixed field so that field boundaries cannot be
// forged by content.
func (k *keyHash) field(s string) {
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
	write(k, n[:])
	write(k, s)
}

// sum returns the digest of everything written and readies k for reuse.
func (k *keyHash) sum() [sha256.Size]byte {
	var out [sha256.Size]byte
	if !k.big {
		out = sha256.Sum256(k.buf)
	} else {
		k.flush()
		copy(out[:], k.h.Sum(nil)) // the rare long key only
		k.h.Reset()
	}
	k.buf, k.big = k.buf[:0], false
	return out
}

// messages appends the messages; image parts (typed so, or untyped with a
// URL) contribute the digest of their URL, never the URL itself.
func (k *keyHash) messages(msgs []core.Message) {
	for i := range msgs {
		m := &msgs[i]
		k.field(m.Role)
		k.field(m.Name)
		k.field(m.ToolCallID)
		for j := range m.ToolCalls {
			tc := &m.ToolCalls[j]
			k.field("t")
			k.field(tc.ID)
			k.field(tc.Type)
			k.field(tc.Name)
			k.field(tc.Arguments)
		}
		if len(m.Parts) == 0 {
			k.field("s")
			k.field(m.Content)
			continue
		}
		k.field("p")
		for j := range m.Parts {
			p := &m.Parts[j]
			if p.IsImage() {
				k.field(core.PartImageURL)
				sum := sha256.Sum256([]byte(p.ImageURL))
				write(k, sum[:])
				k.field(p.Detail)
				continue
			}
			k.field(p.Type)
			k.field(p.Text)
		}
	}
}
