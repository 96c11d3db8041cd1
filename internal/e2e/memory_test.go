package e2e

import (
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
)

// lazyStream is an SSE body of total bytes of content in chunks of per
// bytes, made as it is read; atEnd is called once, before the finish.
type lazyStream struct {
	piece, tail, buf []byte
	per, total, sent int
	atEnd            func()
	once             sync.Once
}

func newLazyStream(total, per int, atEnd func()) *lazyStream {
	return &lazyStream{
		piece: []byte(`data: {"model":"m","choices":[{"index":0,"delta":{"content":"` + strings.Repeat("y", per) + `"}}]}` + "\n\n"),
		per:   per, total: total, atEnd: atEnd,
		tail: []byte(`data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"),
	}
}

func (l *lazyStream) Read(p []byte) (int, error) {
	if len(l.buf) == 0 {
		switch {
		case l.sent < l.total:
			l.buf = l.piece
			l.sent += l.per
		case l.tail != nil:
			l.once.Do(l.atEnd)
			l.buf, l.tail = l.tail, nil
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

type roundTrip func(*http.Request) *http.Response

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// TestAStreamThroughChatStreamIsKeptOnce: a 200 MiB answer read through
// ChatStream is held once — by the stream, whose deltas are the answer —
// not once more by the transport: just before it ends the live heap is at
// most 1.6 times its text, and the deltas add up to the whole answer.
func TestAStreamThroughChatStreamIsKeptOnce(t *testing.T) {
	if raceEnabled || testing.Short() {
		t.Skip("heap measurement: not under -race or -short")
	}
	const total = 200 << 20
	var live atomic.Uint64
	var base uint64
	rt := roundTrip(func(r *http.Request) *http.Response {
		_, _ = io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r, ContentLength: -1,
			Body: io.NopCloser(newLazyStream(total, 4096, func() { live.Store(liveHeap() - base) }))}
	})
	c := testenv.Base().Set("LLM__OPENAI__1__BASE_URL", "http://upstream.invalid/v1", "LLM__OPENAI__1__API_KEY", "k",
		"LLM__OPENAI__1__MODEL", "m", "LLM__OPENAI__1__TIMEOUT_S", "600").Client(t, polygateway.WithHTTPClient(&http.Client{Transport: rt}))
	base = liveHeap()
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	defer s.Close()
	n := 0
	for s.Next() {
		n += len(s.Delta().Content)
	}
	if s.Err() != nil || n != total || len(s.Response().Content) != total {
		t.Fatalf("%v: %d bytes of deltas", s.Err(), n)
	}
	got := float64(live.Load()) / total
	t.Logf("200 MiB stream through ChatStream: %.2f× its text live before its end", got)
	if got > 1.6 {
		t.Errorf("%.2f× the text live before the stream's end, want at most 1.6× (the text kept once)", got)
	}
}
