package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// holdOpen writes the frames, then keeps the response open until the client
// goes away (a server that never sends [DONE] nor closes).
func holdOpen(frames ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fl, _ := w.(http.Flusher)
		for _, f := range frames {
			if _, err := io.WriteString(w, f); err != nil {
				return
			}
			fl.Flush()
		}
		<-r.Context().Done()
	}
}

func TestCompleteStreamWithUsageChunkIsFinishedWithoutWaitingForDone(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, holdOpen(
		data(`{"choices":[{"index":0,"delta":{"content":"hi"}}]}`),
		data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}`),
		data(`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`),
	))
	src := source(srv, "openai")
	src.Timeout = 10 * time.Second
	start := time.Now()
	r, err := c.Do(context.Background(), src, chatCall(true))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("took %v waiting for a [DONE] that never comes", took)
	}
	if r.Content != "hi" || r.FinishReason != "stop" || r.CompletionTokens != 1 || r.UsageSource != core.UsageMeasured {
		t.Fatalf("r = %+v", r)
	}
}

// TestAnotherChoicesChunkWithUsageDoesNotEndTheStream: with n > 1 and
// usage on every chunk (vLLM's continuous usage stats), a chunk of another
// choice after the answer's finish carries a running usage; only a chunk
// without choices is the separate usage chunk that ends the answer. Taken
// for it, the stream once ended there and counted the running usage.
func TestAnotherChoicesChunkWithUsageDoesNotEndTheStream(t *testing.T) {
	t.Parallel()
	body := sseBody(
		`{"choices":[{"index":0,"delta":{"content":"a"}},{"index":1,"delta":{"content":"b"}}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`,
		`{"choices":[{"index":1,"delta":{"content":"c"}}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`,
		`{"choices":[{"index":1,"delta":{"content":"d"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`,
		`{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`,
		`[DONE]`)
	got := outcome(doWith(t, readerTransport{status: 200, ctype: "text/event-stream", length: -1,
		body: func() io.Reader { return bytes.NewReader(body) }}, true))
	if got.class != "" || got.content != "a" || got.finish != "stop" || got.prompt != 5 || got.completion != 4 {
		t.Fatalf("%+v, want the answer with the usage of the whole stream (5/4)", got)
	}
}

func TestFinishedStreamThatThenStallsIsCompleteNotFailed(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, holdOpen(
		data(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`),
	))
	src := source(srv, "openai")
	src.Timeout, src.TTFTTimeout, src.InterTokenTimeout = 10*time.Second, 2*time.Second, 300*time.Millisecond
	start := time.Now()
	r, err := c.Do(context.Background(), src, chatCall(true))
	if err != nil {
		t.Fatalf("a finished answer failed: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second || r.Content != "hi" || r.UsageSource != core.UsageEstimated {
		t.Fatalf("took %v, r = %+v", took, r)
	}
}

// recordingDeltas collects deltas; failAfter > 0 makes the n-th Delta fail.
type recordingDeltas struct {
	mu        sync.Mutex
	content   strings.Builder
	calls     int
	failAfter int
}

func (d *recordingDeltas) Delta(content, thinking string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls++
	if d.failAfter > 0 && d.calls >= d.failAfter {
		return errors.New("client went away")
	}
	d.content.WriteString(content)
	return nil
}
func (d *recordingDeltas) Committed() bool             { return false }
func (d *recordingDeltas) Reset()                      {}
func (d *recordingDeltas) Delivered() (string, string) { return "", "" }

func TestDeltasArriveInOrderAndAConsumerFailureAbortsTheAttempt(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	frames := []string{}
	for _, w := range []string{"a", "b", "c", "d"} {
		frames = append(frames, data(`{"choices":[{"index":0,"delta":{"content":"`+w+`"}}]}`))
	}
	frames = append(frames, data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), data(`[DONE]`))
	srv := newServer(t, sse(frames...))

	d := &recordingDeltas{}
	call := chatCall(true)
	call.Deltas = d
	r, err := c.Do(context.Background(), source(srv, "openai"), call)
	if err != nil || d.content.String() != "abcd" || r.Content != "abcd" || d.calls != 4 {
		t.Fatalf("err=%v deltas=%q (%d calls) content=%q", err, d.content.String(), d.calls, r.Content)
	}

	failing := &recordingDeltas{failAfter: 2}
	call = chatCall(true)
	call.Deltas = failing
	_, err = c.Do(context.Background(), source(srv, "openai"), call)
	var re *core.RequestRejectedError
	if !errors.As(err, &re) || re.Code != "stream_consumer_failed" || re.Reason != core.ReasonConsumerFailed {
		t.Fatalf("err = %v, want the attempt aborted as rejected", err)
	}
}

func TestCachedPromptTokensAreReadInBothDialects(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	cases := map[string]string{
		"openai":   `{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0}}`,
		"deepseek": `{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_cache_hit_tokens":64,"prompt_cache_miss_tokens":36}`,
	}
	for provider, usage := range cases {
		srv := newServer(t, sse(
			data(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}`),
			data(`{"choices":[],"usage":`+usage+`}`),
			data(`[DONE]`),
		))
		r, err := c.Do(context.Background(), source(srv, provider), chatCall(true))
		if err != nil {
			t.Fatal(err)
		}
		if r.PromptTokens != 100 || r.CachedPromptTokens != 64 {
			t.Errorf("%s: prompt %d cached %d, want 100 and 64", provider, r.PromptTokens, r.CachedPromptTokens)
		}
	}
}
