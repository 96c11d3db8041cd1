package e2e

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
)

type roundTrip func(*http.Request) *http.Response

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

// TestAStreamThroughChatStreamIsKeptOnce: a 200 MiB answer read through
// ChatStream is held once — by the stream, whose deltas are the answer —
// not once more by the transport: just before it ends the live heap is at
// most 1.6 times its text, and the deltas add up to the whole answer.
func TestAStreamThroughChatStreamIsKeptOnce(t *testing.T) {
	testkit.SkipHeapMeasurement(t)
	const total = 200 << 20
	var live atomic.Uint64
	var base uint64
	rt := roundTrip(func(r *http.Request) *http.Response {
		_, _ = io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r, ContentLength: -1,
			Body: io.NopCloser(testkit.NewLazyStream(total, 4096, func() { live.Store(testkit.LiveHeap() - base) }))}
	})
	c := testenv.Base().Set("LLM__OPENAI__1__BASE_URL", "http://upstream.invalid/v1", "LLM__OPENAI__1__API_KEY", "k",
		"LLM__OPENAI__1__MODEL", "m", "LLM__OPENAI__1__TIMEOUT_S", "600").Client(t, polygateway.WithHTTPClient(&http.Client{Transport: rt}))
	base = testkit.LiveHeap()
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
