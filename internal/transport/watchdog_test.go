package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/core"
)

// pacedStream sends the given content tokens, each after its delay, then a
// finish chunk and [DONE]. During a delay it may send keep-alive comments
// every keepAlive (0 = none). It stops when the client goes away and
// reports that on gone (if not nil).
func pacedStream(delays []time.Duration, keepAlive time.Duration, gone chan<- struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the request is known; only its end matters
		ctx := r.Context()
		defer func() {
			if gone != nil && ctx.Err() != nil {
				select {
				case gone <- struct{}{}:
				default:
				}
			}
		}()
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		fl := w.(http.Flusher)
		fl.Flush()
		for _, d := range delays {
			deadline := time.Now().Add(d)
			for time.Until(deadline) > 0 {
				step := time.Until(deadline)
				if keepAlive > 0 {
					step = min(step, keepAlive)
				}
				if !sleepCtx(ctx, step) {
					return
				}
				if keepAlive > 0 && time.Until(deadline) > 0 {
					if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
						return
					}
					fl.Flush()
				}
			}
			if _, err := io.WriteString(w, contentChunk("t")); err != nil {
				return
			}
			fl.Flush()
		}
		_, _ = io.WriteString(w, data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`)+data("[DONE]")) // the client may be gone; the tests check what it saw
	}
}

func watchSource(url string) *core.SourceConfig {
	return &core.SourceConfig{
		Name: "w_1", Provider: "openai", BaseURL: url + "/v1", APIKey: testKey, Model: "m",
		Timeout: 10 * time.Second,
	}
}

func TestWatchdogSlowFirstToken(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	gone := make(chan struct{}, 1)
	srv := newServer(t, pacedStream([]time.Duration{3 * time.Second}, 50*time.Millisecond, gone))
	src := watchSource(srv.URL)
	src.TTFTTimeout, src.InterTokenTimeout = 200*time.Millisecond, 100*time.Millisecond
	start := time.Now()
	_, err := c.Do(context.Background(), src, chatCall(true))
	el := time.Since(start)
	e := asTransient(t, err)
	if e.Reason != core.ReasonTimeout {
		t.Fatalf("reason = %q, want timeout (%v)", e.Reason, err)
	}
	if el < 190*time.Millisecond || el > 1500*time.Millisecond {
		t.Fatalf("failed after %v, want ≈200ms (keep-alives must not count as tokens)", el)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("server did not see the connection close")
	}
}

func TestWatchdogSlowHeaders(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		sleepCtx(r.Context(), 3*time.Second)
	}))
	src := watchSource(srv.URL)
	src.TTFTTimeout, src.InterTokenTimeout = 150*time.Millisecond, 100*time.Millisecond
	start := time.Now()
	_, err := c.Do(context.Background(), src, chatCall(true))
	if e := asTransient(t, err); e.Reason != core.ReasonTimeout || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("%+v after %v", e, time.Since(start))
	}
}

func TestWatchdogStall(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	for _, keepAlive := range []time.Duration{0, 30 * time.Millisecond} {
		gone := make(chan struct{}, 1)
		srv := newServer(t, pacedStream([]time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond, 5 * time.Second}, keepAlive, gone))
		src := watchSource(srv.URL)
		src.TTFTTimeout, src.InterTokenTimeout = time.Second, 250*time.Millisecond
		start := time.Now()
		_, err := c.Do(context.Background(), src, chatCall(true))
		el := time.Since(start)
		e := asTransient(t, err)
		if e.Reason != core.ReasonStalled {
			t.Fatalf("keepAlive=%v: reason = %q, want stalled (%v)", keepAlive, e.Reason, err)
		}
		if el < 250*time.Millisecond || el > 2*time.Second {
			t.Fatalf("keepAlive=%v: stalled after %v, want ≈300ms", keepAlive, el)
		}
		select {
		case <-gone:
		case <-time.After(2 * time.Second):
			t.Fatal("server did not see the connection close")
		}
	}
}

func TestWatchdogMeasures(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, pacedStream([]time.Duration{150 * time.Millisecond, 20 * time.Millisecond, 120 * time.Millisecond, 10 * time.Millisecond}, 0, nil))
	src := watchSource(srv.URL)
	src.TTFTTimeout, src.InterTokenTimeout = 2*time.Second, time.Second
	r, err := c.Do(context.Background(), src, chatCall(true))
	if err != nil {
		t.Fatal(err)
	}
	if r.Content != "tttt" {
		t.Fatalf("content = %q", r.Content)
	}
	if r.TTFT < 140*time.Millisecond || r.TTFT > time.Second {
		t.Fatalf("TTFT = %v, want ≈150ms", r.TTFT)
	}
	if r.MaxInterToken < 110*time.Millisecond || r.MaxInterToken > time.Second {
		t.Fatalf("MaxInterToken = %v, want ≈120ms", r.MaxInterToken)
	}
	// Without the watchdog the measurements are still taken.
	src.TTFTTimeout, src.InterTokenTimeout = 0, 0
	r, err = c.Do(context.Background(), src, chatCall(true))
	if err != nil || r.TTFT < 140*time.Millisecond || r.MaxInterToken < 110*time.Millisecond {
		t.Fatalf("%v %+v", err, r)
	}
}

func TestAttemptTimeout(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	// Tokens keep coming, so neither watchdog limit fires; src.Timeout does.
	delays := make([]time.Duration, 200)
	for i := range delays {
		delays[i] = 20 * time.Millisecond
	}
	srv := newServer(t, pacedStream(delays, 0, nil))
	src := watchSource(srv.URL)
	src.Timeout = 300 * time.Millisecond
	src.TTFTTimeout, src.InterTokenTimeout = 200*time.Millisecond, 100*time.Millisecond
	start := time.Now()
	_, err := c.Do(context.Background(), src, chatCall(true))
	if e := asTransient(t, err); e.Reason != core.ReasonTimeout || time.Since(start) > 2*time.Second {
		t.Fatalf("%+v after %v", e, time.Since(start))
	}
	// Non-streaming too.
	slow := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		sleepCtx(r.Context(), 3*time.Second)
	}))
	src = watchSource(slow.URL)
	src.Timeout = 150 * time.Millisecond
	_, err = c.Do(context.Background(), src, chatCall(false))
	if e := asTransient(t, err); e.Reason != core.ReasonTimeout {
		t.Fatalf("%+v", e)
	}
}

func TestCallerCancelMidStream(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	gone := make(chan struct{}, 1)
	delays := []time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Second}
	srv := newServer(t, pacedStream(delays, 20*time.Millisecond, gone))
	src := watchSource(srv.URL)
	src.TTFTTimeout, src.InterTokenTimeout = 5*time.Second, 4*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	r, err := c.Do(ctx, src, chatCall(true))
	el := time.Since(start)
	if r != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("r=%v err=%v, want context.Canceled", r, err)
	}
	if isClass(err) {
		t.Fatalf("cancellation classified as %T", err)
	}
	if !errors.Is(err, core.ErrGateway) {
		t.Fatalf("err %v is not ErrGateway", err)
	}
	if el > time.Second {
		t.Fatalf("returned after %v", el)
	}
	select {
	case <-gone:
	case <-time.After(2 * time.Second):
		t.Fatal("body not closed: server still connected")
	}
}

func TestCallerDeadline(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, pacedStream([]time.Duration{5 * time.Second}, 0, nil))
	src := watchSource(srv.URL)
	src.Timeout = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	for _, stream := range []bool{true, false} {
		_, err := c.Do(ctx, src, chatCall(stream))
		if !errors.Is(err, context.DeadlineExceeded) || isClass(err) {
			t.Fatalf("stream=%v: err = %T %v, want the caller's deadline", stream, err, err)
		}
	}
	// Already cancelled before the call.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Do(ctx2, src, chatCall(false)); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// pacedBody is a stream body made as it is read: each event is released
// after its delay (on the clock of the test's bubble), and the read ends
// with the request's context.
type pacedBody struct {
	ctx    context.Context
	events []string
	delays []time.Duration
	rest   []byte
}

func (b *pacedBody) Read(p []byte) (int, error) {
	for len(b.rest) == 0 {
		if len(b.events) == 0 {
			return 0, io.EOF
		}
		select {
		case <-time.After(b.delays[0]):
		case <-b.ctx.Done():
			return 0, b.ctx.Err()
		}
		b.rest, b.events, b.delays = []byte(b.events[0]), b.events[1:], b.delays[1:]
	}
	n := copy(p, b.rest)
	b.rest = b.rest[n:]
	return n, nil
}

// pacedTransport answers with a pacedBody of its events and delays.
type pacedTransport struct {
	events []string
	delays []time.Duration
}

func (pt pacedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	body := &pacedBody{ctx: r.Context(), events: pt.events, delays: pt.delays}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(body), ContentLength: -1, Request: r}, nil
}

// TestTheWatchdogTakesThinkingAsTokensAndASteadyStreamAsAlive, on a fake
// clock: a first delta of thinking meets the TTFT limit though the first
// content comes later; a stream slower in all than the TTFT limit but with
// every gap under the inter-token limit is never stalled; keep-alive
// comments alone neither meet the TTFT limit nor end a gap.
func TestTheWatchdogTakesThinkingAsTokensAndASteadyStreamAsAlive(t *testing.T) {
	const ttft, inter = 2 * time.Second, time.Second
	think := data(`{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}`)
	finish := data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`) + data("[DONE]")
	steady := func(n int, ev string) ([]string, []time.Duration) {
		var evs []string
		var ds []time.Duration
		for range n {
			evs, ds = append(evs, ev), append(ds, 900*time.Millisecond)
		}
		return append(evs, finish), append(ds, 0)
	}
	tenTokens, tenGaps := steady(10, contentChunk("t"))
	for _, tc := range []struct {
		name   string
		events []string
		delays []time.Duration
		reason core.Reason // "" = a success
	}{
		{"thinking first, content after the TTFT", []string{think, think, think, contentChunk("a"), finish},
			[]time.Duration{1500 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond, 0}, ""},
		{"slow but steady", tenTokens, tenGaps, ""},
		{"keep-alives only", []string{": keep-alive\n\n", ": keep-alive\n\n", ": keep-alive\n\n", contentChunk("a"), finish},
			[]time.Duration{900 * time.Millisecond, 900 * time.Millisecond, 900 * time.Millisecond, 0, 0}, core.ReasonTimeout},
		{"keep-alives in a gap", []string{contentChunk("a"), ": keep-alive\n\n", ": keep-alive\n\n", contentChunk("b"), finish},
			[]time.Duration{0, 600 * time.Millisecond, 600 * time.Millisecond, 0, 0}, core.ReasonStalled},
	} {
		synctest.Test(t, func(t *testing.T) {
			c := New(Config{HTTPClient: &http.Client{Transport: pacedTransport{tc.events, tc.delays}}})
			defer c.Close()
			src := &core.SourceConfig{Name: "openai_1", Provider: "openai", BaseURL: "http://upstream.invalid/v1", APIKey: testKey,
				Model: "m", Timeout: time.Minute, TTFTTimeout: ttft, InterTokenTimeout: inter}
			r, err := c.Do(context.Background(), src, chatCall(true))
			if tc.reason == "" {
				if err != nil || r.FinishReason != "stop" {
					t.Errorf("%s: %v, want a success", tc.name, err)
				}
				return
			}
			var te *core.TransientError
			if !errors.As(err, &te) || te.Reason != tc.reason {
				t.Errorf("%s: %v, want a transient error with reason %s", tc.name, err, tc.reason)
			}
		})
	}
}
