package transport

import (
	"errors"
	"io"
	"sync/atomic"

	"github.com/polygateway/polygateway/core"
)

// Buffers larger than this are not kept in the pools (a huge multimodal
// request or answer should not pin memory forever).
const maxPooledBytes = 4 << 20

// attemptState is the reusable scratch state of one attempt: decoder,
// assembler, SSE reader and buffers. Pooled per Client.
type attemptState struct {
	chunk wireChunk
	dec   chunkDecoder
	asm   assembler
	out   deltaOut
	sse   SSEReader
	capr  capReader
	clock tokenClock
	body  []byte
	// skipped counts the malformed events skipped in this stream.
	skipped int
	// picked is set once a chunk of the stream had a choice to read (of
	// index 0, or of none).
	picked bool
}

// oversized reports whether the state grew too large to keep.
func (s *attemptState) oversized() bool {
	return cap(s.body) > maxPooledBytes || cap(s.sse.buf) > maxPooledBytes || cap(s.sse.data) > maxPooledBytes ||
		cap(s.chunk.Choices) > 64 || cap(s.asm.tools) > 64 || cap(s.dec.deltas) > 64
}

// clear drops references to the finished attempt.
func (s *attemptState) clear() {
	s.skipped, s.picked = 0, false
	s.chunk.reset()
	s.asm.reset(&core.ProviderProfile{}, false, "", nil)
	s.asm.mem.release()
	s.sse.r = nil
	s.out = deltaOut{}
	s.dec.src.b = nil
	clear(s.dec.deltas)
	s.capr.r = nil
	s.clock.wd = nil
}

// reqBody is a pooled request body. The HTTP transport closes it when it
// no longer reads it (possibly after Do returned); only then may the
// buffer be reused.
type reqBody struct {
	b      []byte
	off    int
	closed atomic.Bool
}

// Read implements io.Reader.
func (r *reqBody) Read(p []byte) (int, error) {
	if r.off >= len(r.b) {
		return 0, io.EOF
	}
	n := copy(p, r.b[r.off:])
	r.off += n
	return n, nil
}

// Close records that the transport is done with the body.
func (r *reqBody) Close() error {
	r.closed.Store(true)
	return nil
}

// errStreamTooLarge is returned when a stream exceeds Config.MaxStreamBytes.
var errStreamTooLarge = errors.New("stream exceeds the configured size limit")

// capReader bounds the bytes read from a streaming body.
type capReader struct {
	r io.Reader
	n int64
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.n <= 0 {
		return 0, errStreamTooLarge
	}
	if int64(len(p)) > c.n {
		p = p[:c.n]
	}
	n, err := c.r.Read(p)
	c.n -= int64(n)
	return n, err
}

// errBodyTooLarge is returned when a response body exceeds its bound.
var errBodyTooLarge = errors.New("response body exceeds the configured size limit")

// readBody reads r to the end into buf (reused), failing with
// errBodyTooLarge past limit bytes. hint is the Content-Length, if known.
// What it reads into is reserved from mem (nil: nothing is) first: the
// declared length at once, else the buffer's capacity before it is read
// into.
func readBody(r io.Reader, buf []byte, limit, hint int64, mem *memReserve) ([]byte, error) {
	buf = buf[:0]
	held := int64(0)
	if hint > 0 && hint <= limit {
		if err := mem.grow(hint + 1); err != nil {
			return buf, err
		}
		held = hint + 1
		if int64(cap(buf)) < hint+1 {
			buf = make([]byte, 0, hint+1)
		}
	}
	if cap(buf) < 512 {
		buf = make([]byte, 0, 4096)
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return buf, errBodyTooLarge
			}
			buf = append(buf, 0)[:len(buf)]
		}
		if c := int64(cap(buf)); c > held {
			if err := mem.grow(c - held); err != nil {
				return buf, err
			}
			held = c
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, errBodyTooLarge
		}
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}
