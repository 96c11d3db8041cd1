package testkit

import (
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// SkipHeapMeasurement skips a test that measures the heap when its
// measurements would mean nothing: under the race detector, or with
// -short (such a test needs the process to itself).
func SkipHeapMeasurement(t testing.TB) {
	t.Helper()
	if RaceEnabled || testing.Short() {
		t.Skip("heap measurement: not under -race or -short")
	}
}

// LiveHeap returns the live heap after a collection.
func LiveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TotalAlloc returns the bytes allocated so far.
func TotalAlloc() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// LazyStream is an SSE body of chunks of one content piece each, made as
// it is read (the upstream's bytes take no memory of their own), with the
// finish and [DONE] after total bytes of content; at the end of the
// content it calls atEnd (once, if not nil). A LazyStream is read by one
// goroutine at a time.
type LazyStream struct {
	piece   []byte // one chunk, as sent
	content int    // content bytes per chunk
	total   int
	sent    int
	tail    []byte
	buf     []byte
	atEnd   func()
	once    sync.Once
}

// NewLazyStream returns the stream of total bytes of content in chunks of
// per bytes ("yyy…").
func NewLazyStream(total, per int, atEnd func()) *LazyStream {
	content := strings.Repeat("y", per)
	return &LazyStream{
		piece:   []byte(`data: {"model":"m","choices":[{"index":0,"delta":{"content":"` + content + `"}}]}` + "\n\n"),
		content: per, total: total, atEnd: atEnd,
		tail: []byte(`data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"),
	}
}

// Read reads the next bytes of the stream.
func (l *LazyStream) Read(p []byte) (int, error) {
	if len(l.buf) == 0 {
		switch {
		case l.sent < l.total:
			l.buf = l.piece
			l.sent += l.content
		case l.tail != nil:
			if l.atEnd != nil {
				l.once.Do(l.atEnd)
			}
			l.buf, l.tail = l.tail, nil
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}
