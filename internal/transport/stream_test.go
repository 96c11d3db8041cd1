package transport

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

func contentChunk(s string) string {
	return data(`{"choices":[{"index":0,"delta":{"content":"` + s + `"},"finish_reason":null}]}`)
}

func TestStreamCompleteness(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	finishWithContent := data(`{"choices":[{"index":0,"delta":{"content":" end"},"finish_reason":"stop"}]}`)
	tests := []struct {
		name        string
		frames      []string
		missingDone core.MissingDonePolicy
		wantErr     bool
		content     string
		finish      string
	}{
		{"done", []string{contentChunk("a"), data("[DONE]")}, "", false, "a", ""},
		{"finish shares chunk with last content, no DONE", []string{contentChunk("a"), finishWithContent}, "", false, "a end", "stop"},
		{"finish then EOF, usage later missing", []string{contentChunk("a"), data(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`)}, "", false, "a", "length"},
		{"neither: retry (default)", []string{contentChunk("a"), contentChunk("b")}, "", true, "", ""},
		{"neither: retry explicit", []string{contentChunk("a")}, core.MissingDoneRetry, true, "", ""},
		{"neither: salvage", []string{contentChunk("a"), contentChunk("b")}, core.MissingDoneSalvage, false, "ab", ""},
		{"salvage needs a token", []string{": ping\n\n"}, core.MissingDoneSalvage, true, "", ""},
		{"empty stream", nil, "", true, "", ""},
		{"cut inside the last event", []string{contentChunk("a"), `data: {"choices":[{"index":0,"delta":{"cont`}, "", true, "", ""},
		{"cut inside the last event: salvage", []string{contentChunk("a"), `data: {"choices":[{"index":0,"delta":{"cont`}, core.MissingDoneSalvage, false, "a", ""},
		{"malformed event", []string{contentChunk("a"), data(`{"choices":[{"index":0,"delta":{"content":"b"}}]`), data("[DONE]")}, core.MissingDoneSalvage, true, "", ""},
		// A malformed event that carries nothing of the answer is skipped;
		// more than a few fail the attempt.
		{"malformed event without the answer is skipped", []string{contentChunk("a"), data(`hello`), contentChunk("b"), data("[DONE]")}, "", false, "ab", ""},
		{"too many malformed events", []string{contentChunk("a"), data(`x`), data(`y`), data(`z`), data(`w`), data("[DONE]")}, "", true, "", ""},
		{"malformed event with content", []string{contentChunk("a"), data(`{"choices":[{"delta":{"content":"b"}}`), data("[DONE]")}, "", true, "", ""},
		{"blank data lines ignored", []string{data(""), "data:\n\n", contentChunk("x"), data("[DONE]")}, "", false, "x", ""},
		{"DONE without trailing blank line", []string{contentChunk("x"), "data: [DONE]"}, "", false, "x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, sse(tt.frames...))
			src := source(srv, "openai")
			src.MissingDone = tt.missingDone
			r, err := c.Do(context.Background(), src, chatCall(true))
			if tt.wantErr {
				if r != nil {
					t.Fatalf("truncated success %+v", r)
				}
				if e := asTransient(t, err); e.Source != "openai_1" || e.StatusCode != 200 {
					t.Fatalf("%+v", e)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Content != tt.content || r.FinishReason != tt.finish {
				t.Fatalf("content/finish = %q/%q, want %q/%q", r.Content, r.FinishReason, tt.content, tt.finish)
			}
			if r.UsageSource != core.UsageEstimated || r.PromptTokens == 0 || r.CompletionTokens == 0 {
				t.Fatalf("usage = %d/%d %q", r.PromptTokens, r.CompletionTokens, r.UsageSource)
			}
		})
	}
}

func TestStreamUsageCountedOnce(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	// Usage on the finish chunk and again on a separate chunk: the last
	// complete one wins, nothing is added up; incomplete ones are ignored.
	srv := newServer(t, sse(
		data(`{"choices":[{"index":0,"delta":{"content":"a"}}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`),
		data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`),
		data(`{"choices":[],"usage":{"prompt_tokens":5,"total_tokens":9}}`),
		data(`{"choices":[],"usage":{"completion_tokens":100}}`),
		data(`{"choices":[],"usage":null}`),
		data(`[DONE]`),
	))
	r, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
	if err != nil {
		t.Fatal(err)
	}
	if r.PromptTokens != 5 || r.CompletionTokens != 4 || r.UsageSource != core.UsageMeasured {
		t.Fatalf("usage = %d/%d %s", r.PromptTokens, r.CompletionTokens, r.UsageSource)
	}
}

func TestStreamThinkTagsSplitEverywhere(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	full := "<think>I ponder</think>\n\nThe answer <b>is</b> 42."
	// Split the content at every position into two deltas.
	for i := 0; i <= len(full); i++ {
		a, b := full[:i], full[i:]
		srv := newServer(t, sse(
			data(`{"choices":[{"index":0,"delta":{"content":`+jsonStr(a)+`}}]}`),
			data(`{"choices":[{"index":0,"delta":{"content":`+jsonStr(b)+`},"finish_reason":"stop"}]}`),
		))
		r, err := c.Do(context.Background(), source(srv, "minimax"), chatCall(true))
		if err != nil {
			t.Fatal(err)
		}
		if r.Content != "The answer <b>is</b> 42." || r.Thinking != "I ponder" {
			t.Fatalf("split at %d: content=%q thinking=%q", i, r.Content, r.Thinking)
		}
		srv.Close()
	}
}

func jsonStr(s string) string { return string(appendJSONString(nil, s)) }

// TestAStreamedAnswerIsTheTextOfItsDeltas: an answer whose think block is
// stripped is, when its deltas went to a sink, exactly the text of those
// deltas — white space around the block included — with a sink that keeps
// them (a relay, ChatStream) and with one that does not (a continuation's
// guard). Trimmed after the deltas went out, it once no longer continued
// what the caller had, and ChatStream and the relay failed the whole answer
// as a broken stream. Without a sink the white space is trimmed as before.
func TestAStreamedAnswerIsTheTextOfItsDeltas(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	for _, tc := range []struct{ provider, text string }{
		{"openai", "<think>\nI ponder\n</think>\n\nThe answer."},
		{"minimax", "  <think>\nI ponder\n</think>\n\nThe answer <think>more</think> here."},
	} {
		var frames []string
		for _, piece := range []string{tc.text[:9], tc.text[9:20], tc.text[20:]} {
			frames = append(frames, contentChunk(strings.ReplaceAll(piece, "\n", `\n`)))
		}
		frames = append(frames, data(`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`), data("[DONE]"))
		srv := newServer(t, sse(frames...))
		for _, name := range []string{"keeper", "plain sink"} {
			ks := &keeperSink{}
			var sink core.DeltaSink = ks
			if name == "keeper" {
				sink = keeping{ks}
			}
			call := chatCall(true)
			call.Deltas = sink
			r, err := c.Do(context.Background(), source(srv, tc.provider), call)
			if err != nil {
				t.Fatal(err)
			}
			content, thinking := ks.Delivered()
			if r.Content != content || r.Thinking != thinking || !strings.Contains(r.Content, "The answer") {
				t.Errorf("%s, %s: answer (%q, %q), deltas (%q, %q)", tc.provider, name, r.Content, r.Thinking, content, thinking)
			}
		}
		r, err := c.Do(context.Background(), source(srv, tc.provider), chatCall(true))
		if err != nil || strings.TrimSpace(r.Content) != r.Content || r.Thinking != strings.TrimSpace(r.Thinking) || r.Thinking == "" {
			t.Errorf("%s without a sink: %v (%q, %q), want it trimmed", tc.provider, err, r.Content, r.Thinking)
		}
	}
}

func TestStreamUnclosedThink(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, sse(
		contentChunk("<think>still thinking</thi"),
		data(`{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`),
	))
	r, err := c.Do(context.Background(), source(srv, "vllm"), chatCall(true))
	if err != nil {
		t.Fatal(err)
	}
	if r.Content != "" || r.Thinking != "still thinking</thi" || r.FinishReason != "length" {
		t.Fatalf("content=%q thinking=%q", r.Content, r.Thinking)
	}
}

func TestStreamDuplicateReasoningFields(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	// Some servers send the same text in reasoning and reasoning_content.
	srv := newServer(t, sse(
		data(`{"choices":[{"index":0,"delta":{"reasoning":"abc","reasoning_content":"abc"}}]}`),
		data(`{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"stop"}]}`),
	))
	r, err := c.Do(context.Background(), source(srv, "vllm"), chatCall(true))
	if err != nil || r.Thinking != "abc" {
		t.Fatalf("%v thinking=%q", err, r.Thinking)
	}
}

func TestStreamCutConnection(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	// The server writes part of a chunked stream and then drops the TCP
	// connection: a cut, never a success.
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io := contentChunk("partial")
		_, _ = w.Write([]byte(io)) // the connection is dropped next anyway
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}))
	for _, policy := range []core.MissingDonePolicy{"", core.MissingDoneSalvage} {
		src := source(srv, "openai")
		src.MissingDone = policy
		r, err := c.Do(context.Background(), src, chatCall(true))
		if policy == "" {
			if r != nil {
				t.Fatalf("cut stream returned success %+v", r)
			}
			_ = asTransient(t, err) // the assertion is the check
			continue
		}
		if err != nil || r.Content != "partial" || r.FinishReason != "" {
			t.Fatalf("salvage: %v %+v", err, r)
		}
	}
}

func TestConnectionResetBeforeHeaders(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			// Read a little of the request, then reset the connection.
			buf := make([]byte, 64)
			_, _ = conn.Read(buf) // how much arrives does not matter: the connection is reset next
			if tc, ok := conn.(*net.TCPConn); ok {
				if err := tc.SetLinger(0); err != nil {
					t.Errorf("set linger: %v", err)
				}
			}
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	src := &core.SourceConfig{Name: "x_1", Provider: "openai", BaseURL: "http://" + ln.Addr().String() + "/v1", APIKey: testKey, Model: "m"}
	for _, stream := range []bool{false, true} {
		_, err := c.Do(context.Background(), src, chatCall(stream))
		e := asTransient(t, err)
		if e.Reason != core.ReasonNetworkError || e.Source != "x_1" || e.StatusCode != 0 {
			t.Fatalf("%+v", e)
		}
		if strings.Contains(err.Error(), testKey) {
			t.Fatal("key leaked")
		}
	}
	// Nothing listening at all.
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln2.Addr().String()
	ln2.Close()
	src.BaseURL = "http://" + addr + "/v1"
	_, err = c.Do(context.Background(), src, chatCall(false))
	if e := asTransient(t, err); e.Reason != core.ReasonNetworkError {
		t.Fatalf("%+v", e)
	}
}

func TestCompleteStreamsReuseTheirConnection(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(sse(contentChunk("a"), contentChunk("b"), data("[DONE]")))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	src := source(srv, "openai")
	for i := range 5 {
		r, err := c.Do(context.Background(), src, chatCall(true))
		if err != nil || r.Content != "ab" {
			t.Fatalf("call %d: %v %+v", i, err, r)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("5 complete streams used %d connections, want 1: a stream closed before its end drops its connection", n)
	}
}

func TestAStreamLeftOpenAfterDoneCostsAtMostTheDrainWait(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sse(contentChunk("a"), data("[DONE]"))(w, r)
		select { // a server that keeps the response open after [DONE]
		case <-release:
		case <-r.Context().Done():
		}
	}))
	start := time.Now()
	r, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
	if err != nil || r.Content != "a" {
		t.Fatalf("%v %+v", err, r)
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("the attempt waited %v for a stream left open after [DONE]", took)
	}
}

// TestACutStreamRelaysNoTagItHeldBack: the bytes the think filter holds
// back because they may begin a tag ("<thi", "</thi") are decided by what
// follows; a stream cut right after them has nothing to decide them, and
// they never reach the sink as text — a continuation goes on from what the
// caller has, and would otherwise go on from half a tag. Salvaged, the
// stream's answer keeps them, as they arrived.
func TestACutStreamRelaysNoTagItHeldBack(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	for _, tc := range []struct {
		provider, content       string
		relayed, relayedThought string
	}{
		{"minimax", "Hello <thi", "Hello ", ""},
		{"minimax", "<think>pondering</thi", "", "pondering"},
		{"openai", "  <thi", "  ", ""},
	} {
		srv := newServer(t, sse(contentChunk(tc.content)))
		for _, policy := range []core.MissingDonePolicy{core.MissingDoneRetry, core.MissingDoneSalvage} {
			sink := &keeperSink{}
			call := chatCall(true)
			call.Deltas = sink
			src := source(srv, tc.provider)
			src.MissingDone = policy
			r, err := c.Do(context.Background(), src, call)
			content, thinking := sink.Delivered()
			if policy == core.MissingDoneSalvage {
				if err != nil || r.Content+r.Thinking != strings.NewReplacer("<think>", "").Replace(tc.content) {
					t.Errorf("%s %q salvaged: %v %+v, want the text as it arrived", tc.provider, tc.content, err, r)
				}
				continue
			}
			if err == nil || content != tc.relayed || thinking != tc.relayedThought {
				t.Errorf("%s %q cut: err %v, relayed (%q, %q), want an error and (%q, %q)",
					tc.provider, tc.content, err, content, thinking, tc.relayed, tc.relayedThought)
			}
		}
		srv.Close()
	}
}
