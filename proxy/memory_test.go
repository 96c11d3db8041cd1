package proxy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/proxy"
)

// The memory tests measure the heap (runtime.ReadMemStats) around one
// large request or answer through the gateway. They need the process to
// themselves and mean nothing under the race detector; they are skipped
// with -short.

// upstreamFunc is an in-memory upstream: a round tripper answering every
// request with the response answer makes of it.
type upstreamFunc func(r *http.Request) *http.Response

func (f upstreamFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r), nil }

// gateway is a server whose LLM scope calls upstream (one source, model
// "m"), with a budget of budget bytes; it serves its requests in process
// (ServeHTTP), without a network.
func gateway(t *testing.T, upstream upstreamFunc, budget int64) *proxy.Server {
	t.Helper()
	e := baseEnv().source("LLM", "openai", 1, "http://upstream.invalid/v1", secretKey1, "m", "TIMEOUT_S", "600")
	c := chatClient(t, "LLM", e, polygateway.WithHTTPClient(&http.Client{Transport: upstream}))
	s, err := proxy.New(proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": c}, DefaultScope: "LLM"},
		MaxBodyBytes: min(16<<20, budget), MaxBufferedBodyBytes: budget})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	return s
}

// sink is a response writer that keeps the status, the headers and at most
// the first 64 KiB of the body, and counts the rest.
type sink struct {
	h      http.Header
	status int
	head   bytes.Buffer
	n      int64
}

func (s *sink) Header() http.Header { return s.h }
func (s *sink) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
}
func (s *sink) Write(p []byte) (int, error) {
	s.WriteHeader(http.StatusOK)
	if room := 64<<10 - s.head.Len(); room > 0 {
		s.head.Write(p[:min(len(p), room)])
	}
	s.n += int64(len(p))
	return len(p), nil
}
func (s *sink) Flush() {}

func post(s *proxy.Server, body []byte) *sink {
	w := &sink{h: http.Header{}}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	s.ServeHTTP(w, r)
	return w
}

// smallMessages is a chat request of n messages of a few bytes each.
func smallMessages(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"model":"m","messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"m` + strconv.Itoa(i%1000) + `"}`)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestALargeChatRequestTakesAFewTimesItsBytes: a 7 MiB request of 250,000
// small messages, going upstream, holds at most 6 times its bytes while
// the upstream answers (its messages — 112 bytes each and their text — and
// the upstream request body; the body it came in is no longer held), and
// its whole call allocates at most 20 times its bytes in all.
func TestALargeChatRequestTakesAFewTimesItsBytes(t *testing.T) {
	testkit.SkipHeapMeasurement(t)
	body := smallMessages(250_000)
	var live atomic.Uint64
	var base uint64
	answer := `{"model":"m","choices":[{"index":0,"message":{"content":"ok"},"finish_reason":"stop"}]}`
	s := gateway(t, func(r *http.Request) *http.Response {
		_, _ = io.Copy(io.Discard, r.Body)
		live.Store(testkit.LiveHeap() - base)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
			Body: io.NopCloser(strings.NewReader(answer)), ContentLength: int64(len(answer))}
	}, 1<<30)
	post(s, smallMessages(10)) // warm
	base = testkit.LiveHeap()
	before := testkit.TotalAlloc()
	w := post(s, body)
	total := testkit.TotalAlloc() - before
	if w.status != http.StatusOK {
		t.Fatalf("%d %s", w.status, w.head.String())
	}
	held, all := float64(live.Load())/float64(len(body)), float64(total)/float64(len(body))
	t.Logf("%d-byte request of 250,000 messages: %.2f× held while upstream, %.2f× allocated", len(body), held, all)
	if held > 6 {
		t.Errorf("%.2f× the body held while the upstream answers, want at most 6×", held)
	}
	if all > 20 {
		t.Errorf("%.2f× the body allocated by the call, want at most 20×", all)
	}
}

// TestAStreamRelayedThroughTheGatewayIsKeptOnce: a 200 MiB stream relayed
// to the client (first_token and buffer) is held once, by the relay —
// just before it ends the live heap is at most 1.6 times its text — and
// the relayed text is the whole answer.
func TestAStreamRelayedThroughTheGatewayIsKeptOnce(t *testing.T) {
	testkit.SkipHeapMeasurement(t)
	const total = 200 << 20
	for _, commit := range []string{proxy.CommitFirstToken, proxy.CommitBuffer} {
		var live atomic.Uint64
		var base uint64
		s := gateway(t, func(r *http.Request) *http.Response {
			_, _ = io.Copy(io.Discard, r.Body)
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r, ContentLength: -1,
				Body: io.NopCloser(testkit.NewLazyStream(total, 4096, func() { live.Store(testkit.LiveHeap() - base) }))}
		}, 1<<30)
		post(s, []byte(`{"model":"m","stream":true,"messages":[{"role":"user","content":"warm"}]}`))
		base = testkit.LiveHeap()
		w := post(s, []byte(`{"model":"m","stream":true,"polygateway":{"stream_commit":"`+commit+`"},"messages":[{"role":"user","content":"hi"}]}`))
		if w.status != http.StatusOK || w.n < total {
			t.Fatalf("%s: %d, %d bytes", commit, w.status, w.n)
		}
		got := float64(live.Load()) / total
		t.Logf("%s: 200 MiB stream relayed, %.2f× its text live before its end", commit, got)
		if got > 1.6 {
			t.Errorf("%s: %.2f× the text live before the stream's end, want at most 1.6× (the text kept once)", commit, got)
		}
	}
}

// TestAnAnswerOverTheBudgetGets503: an upstream answer that does not fit
// MaxBufferedBodyBytes beside the request is refused before it is read:
// 503 server_overloaded with Retry-After, the answer's body unread, the
// budget whole again afterwards.
func TestAnAnswerOverTheBudgetGets503(t *testing.T) {
	t.Parallel()
	big := `{"model":"m","choices":[{"index":0,"message":{"content":"` + strings.Repeat("z", 1<<20) + `"},"finish_reason":"stop"}]}`
	var read atomic.Int64
	s := gateway(t, func(r *http.Request) *http.Response {
		_, _ = io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r, ContentLength: int64(len(big)),
			Body: io.NopCloser(countReader{strings.NewReader(big), &read})}
	}, 512<<10)
	w := post(s, []byte(chatBody("m", false, "")))
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(w.head.Bytes(), &e)
	if w.status != http.StatusServiceUnavailable || e.Error.Code != "server_overloaded" || w.h.Get("Retry-After") == "" {
		t.Fatalf("%d %s, want 503 server_overloaded with Retry-After", w.status, w.head.String())
	}
	if read.Load() != 0 {
		t.Errorf("%d bytes of the refused answer read", read.Load())
	}
	if got := proxy.BufferedBodyBytes(s); got != 0 {
		t.Errorf("%d bytes still reserved", got)
	}
}

type countReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}
