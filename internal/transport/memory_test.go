package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// The memory tests measure the heap (runtime.ReadMemStats) around one
// large answer. They need the process to themselves and mean nothing under
// the race detector; they are skipped with -short.

// bigBody is a non-streamed answer whose content is n bytes of text with a
// newline (an escape) every 64 bytes.
func bigBody(n int) []byte {
	line := strings.Repeat("x", 63) + `\n`
	var b bytes.Buffer
	b.Grow(n + 256)
	b.WriteString(`{"id":"x","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"`)
	for b.Len() < n {
		b.WriteString(line)
	}
	b.WriteString(`"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`)
	return b.Bytes()
}

// TestANonStreamedAnswerTakesAFewTimesItsBytes: reading a 31 MiB
// non-streamed answer allocates at most 3.5 times its bytes in all — the
// body once, its content decoded once (with escapes, encoding/json's
// unescaping once more) — and what the answer keeps is its content.
func TestANonStreamedAnswerTakesAFewTimesItsBytes(t *testing.T) {
	testkit.SkipHeapMeasurement(t)
	body := bigBody(31 << 20)
	c := New(Config{HTTPClient: &http.Client{Transport: readerTransport{status: 200, ctype: "application/json", length: int64(len(body)),
		body: func() io.Reader { return bytes.NewReader(body) }}}})
	defer c.Close()
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", Model: "m", Timeout: time.Minute}
	base := testkit.LiveHeap()
	before := testkit.TotalAlloc()
	r, err := c.Do(context.Background(), src, chatCall(false))
	total := testkit.TotalAlloc() - before
	if err != nil || len(r.Content) < 30<<20 {
		t.Fatalf("(%d bytes, %v)", len(r.Content), err)
	}
	live := testkit.LiveHeap() - base
	t.Logf("31 MiB answer: %.2f× its bytes allocated, %.2f× kept", float64(total)/float64(len(body)), float64(live)/float64(len(body)))
	if total > uint64(3.5*float64(len(body))) {
		t.Errorf("reading the answer allocated %d bytes, %.2f× its %d bytes; want at most 3.5×", total, float64(total)/float64(len(body)), len(body))
	}
	if live > uint64(1.1*float64(len(body))) {
		t.Errorf("the answer keeps %d bytes, %.2f× the body", live, float64(live)/float64(len(body)))
	}
	runtime.KeepAlive(r)
}

// keeperSink keeps every delta's text, as a relay does.
type keeperSink struct {
	mu                sync.Mutex
	content, thinking strings.Builder
}

func (s *keeperSink) Delta(content, thinking string) error {
	s.mu.Lock()
	s.content.WriteString(content)
	s.thinking.WriteString(thinking)
	s.mu.Unlock()
	return nil
}
func (s *keeperSink) Committed() bool { return s.content.Len() > 0 }
func (s *keeperSink) Reset()          {}
func (s *keeperSink) Delivered() (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.content.String(), s.thinking.String()
}

// keeping is a keeperSink that tells the transport so (DeltaKeeper).
type keeping struct{ *keeperSink }

func (k keeping) Kept() (string, string) { return k.Delivered() }

// TestAStreamsTextIsKeptOnce: a 200 MiB stream relayed to a sink that
// keeps its deltas is held once — by the sink — not once more by the
// transport: just before the stream ends, the live heap is at most 1.6
// times the text (the sink's buffer grows by doubling).
func TestAStreamsTextIsKeptOnce(t *testing.T) {
	testkit.SkipHeapMeasurement(t)
	const total = 200 << 20
	var live atomic.Uint64
	base := testkit.LiveHeap()
	stream := testkit.NewLazyStream(total, 4096, func() { live.Store(testkit.LiveHeap() - base) })
	c := New(Config{HTTPClient: &http.Client{Transport: readerTransport{status: 200, ctype: "text/event-stream", length: -1,
		body: func() io.Reader { return stream }}}})
	defer c.Close()
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", Model: "m", Timeout: 5 * time.Minute}
	sink := keeping{&keeperSink{}}
	call := chatCall(true)
	call.Deltas = sink
	r, err := c.Do(context.Background(), src, call)
	if err != nil || len(r.Content) != total {
		t.Fatalf("(%v bytes, %v)", len(r.Content), err)
	}
	got := float64(live.Load()) / total
	t.Logf("200 MiB stream: %.2f× its text live before its end", got)
	if got > 1.6 {
		t.Errorf("%.2f× the text live before the stream's end, want at most 1.6× (the text kept once)", got)
	}
	runtime.KeepAlive(r)
}

// fixedBudget is a core.MemoryBudget of max bytes that counts what is
// taken.
type fixedBudget struct {
	max, used, peak atomic.Int64
	refused         atomic.Int64
}

func (b *fixedBudget) Reserve(n int64) bool {
	if b.used.Add(n) > b.max.Load() {
		b.used.Add(-n)
		b.refused.Add(1)
		return false
	}
	for {
		p := b.peak.Load()
		if u := b.used.Load(); u <= p || b.peak.CompareAndSwap(p, u) {
			return true
		}
	}
}

func (b *fixedBudget) Release(n int64) { b.used.Add(-n) }

// countingReader counts the bytes read from r.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestAnAnswerOverTheBudgetEndsTheAttempt: with a memory budget in the
// call's context, an answer is reserved before it is read — a declared
// body whole before its first byte, a stream's text as it grows — and
// given back when the attempt ends; one that does not fit ends the attempt
// at once with an error matching core.ErrMemoryBudget (no class of the
// source's failure), the declared body unread. Without a budget nothing
// changes.
func TestAnAnswerOverTheBudgetEndsTheAttempt(t *testing.T) {
	t.Parallel()
	body := bigBody(1 << 20)
	events := sseBody(`{"choices":[{"index":0,"delta":{"content":"`+strings.Repeat("z", 60<<10)+`"}}]}`,
		`{"choices":[{"index":0,"delta":{"content":"`+strings.Repeat("z", 60<<10)+`"},"finish_reason":"stop"}]}`, `[DONE]`)
	src := &core.SourceConfig{Name: "s_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", Model: "m", Timeout: time.Minute}
	for _, tc := range []struct {
		name   string
		ctype  string
		length int64
		body   []byte
		stream bool
	}{
		{"declared body", "application/json", int64(len(body)), body, false},
		{"chunked body", "application/json", -1, body, false},
		{"stream", "text/event-stream", -1, events, true},
	} {
		var read atomic.Int64
		c := New(Config{HTTPClient: &http.Client{Transport: readerTransport{status: 200, ctype: tc.ctype, length: tc.length,
			body: func() io.Reader { return countingReader{bytes.NewReader(tc.body), &read} }}}})
		b := &fixedBudget{}
		b.max.Store(4 << 20)
		ctx := core.WithMemoryBudget(context.Background(), b)
		if _, err := c.Do(ctx, src, chatCall(tc.stream)); err != nil {
			t.Fatalf("%s within the budget: %v", tc.name, err)
		}
		if b.used.Load() != 0 || b.peak.Load() < int64(len(tc.body))/2 {
			t.Errorf("%s: %d bytes still reserved, %d at most, for %d bytes", tc.name, b.used.Load(), b.peak.Load(), len(tc.body))
		}
		b.max.Store(64 << 10)
		read.Store(0)
		r, err := c.Do(ctx, src, chatCall(tc.stream))
		if r != nil || !errors.Is(err, core.ErrMemoryBudget) || !errors.Is(err, core.ErrGateway) || core.Classify(err).Class != core.ClassOther {
			t.Errorf("%s over the budget: (answer %v, %T %v), want an error matching ErrMemoryBudget", tc.name, r != nil, err, err)
		}
		if tc.length >= 0 && read.Load() != 0 {
			t.Errorf("%s over the budget: %d bytes read, want none", tc.name, read.Load())
		}
		if b.used.Load() != 0 {
			t.Errorf("%s: %d bytes still reserved after the refusal", tc.name, b.used.Load())
		}
		if r, err := c.Do(context.Background(), src, chatCall(tc.stream)); err != nil || r.Content == "" {
			t.Errorf("%s without a budget: (answer %v, %v)", tc.name, r != nil, err)
		}
		c.Close()
	}
}
