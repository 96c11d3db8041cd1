package e2e

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestChatStreamDeliversTheFirstDeltaBeforeTheUpstreamFinishes(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(20).WithInterTokenDelay(50*time.Millisecond)))
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	start := time.Now()
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	defer s.Close()
	var got strings.Builder
	var first time.Duration
	n := 0
	for s.Next() {
		if n == 0 {
			first = time.Since(start)
		}
		n++
		got.WriteString(s.Delta().Content)
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	total := time.Since(start)
	if first > total/2 || n < 10 {
		t.Errorf("first delta after %v of %v, %d deltas: want it long before the 20 tokens paced at 50 ms finish", first, total, n)
	}
	resp := s.Response()
	if resp == nil || got.String() != resp.Content || resp.Content != fu.Tokens(20) || resp.CompletionTokens != 20 {
		t.Fatalf("deltas %q, Response %+v: want the concatenated deltas to be the answer", got.String(), resp)
	}
}

func TestChatStreamFailsOverBeforeTheFirstDeltaWithoutDuplicatingText(t *testing.T) {
	t.Parallel()
	broken := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(0)))
	fallback := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(6)))
	c := testenv.Base().Source("openai", 1, broken.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").
		Set("LLM__RETRY__TIER_PATIENCE_S", "0").Client(t)
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	defer s.Close()
	var got strings.Builder
	for d, err := range s.All() {
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(d.Content)
	}
	if got.String() != fu.Tokens(6) || s.Response() == nil || s.Response().SourceName != "qwen_1" {
		t.Fatalf("streamed %q (response %+v), want exactly the fallback's answer", got.String(), s.Response())
	}
}

func TestChatStreamCutAfterDeltasEndsWithAnErrorAndNoResponse(t *testing.T) {
	t.Parallel()
	cut := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(5).WithTokens(20)))
	other := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, cut.URL()).Source("qwen", 1, other.URL(), "PRIORITY", "1").Client(t)
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	defer s.Close()
	var got strings.Builder
	for s.Next() {
		got.WriteString(s.Delta().Content)
	}
	var te *polygateway.TransientError
	if !errors.As(s.Err(), &te) || s.Response() != nil {
		t.Fatalf("err = %v, response %v: want the cut, no truncated answer", s.Err(), s.Response())
	}
	if got.String() != fu.Tokens(5) || other.Requests() != 0 {
		t.Errorf("delivered %q, other source %d requests: a committed stream cannot fail over", got.String(), other.Requests())
	}
}

func TestChatStreamCloseMidStreamReleasesEverything(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithScript(fu.OK().WithTokens(200).WithInterTokenDelay(20*time.Millisecond), fu.OK()))
	c := testenv.Base().Source("openai", 1, srv.URL(), "MAX_CONCURRENCY", "1").Client(t)
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	if !s.Next() {
		t.Fatalf("no first delta: %v", s.Err())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s.Next() {
		t.Error("Next after Close returned a delta")
	}
	if !errors.Is(s.Err(), context.Canceled) {
		t.Errorf("Err after Close = %v, want context.Canceled", s.Err())
	}
	for _, st := range c.Sources(context.Background()) {
		if st.InFlight != 0 || st.Usage.InFlight != 0 {
			t.Errorf("%s holds in-flight %d, permits %d after Close", st.Name, st.InFlight, st.Usage.InFlight)
		}
	}
	// The slot is free: another call goes through.
	if _, err := testenv.Ask(t, c, polygateway.WithStream(false)); err != nil {
		t.Errorf("next call: %v", err)
	}
}

func TestChatStreamReplaysACacheHitAndANonStreamedAnswerAsOneDelta(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(4)))
	c := testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "60").Client(t)
	collect := func(opts ...polygateway.CallOption) ([]string, *polygateway.LLMResponse) {
		s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("same")}, opts...)
		defer s.Close()
		var parts []string
		for s.Next() {
			parts = append(parts, s.Delta().Content)
		}
		if s.Err() != nil {
			t.Fatal(s.Err())
		}
		return parts, s.Response()
	}
	if parts, _ := collect(); strings.Join(parts, "") != fu.Tokens(4) {
		t.Fatalf("first call streamed %q", parts)
	}
	parts, resp := collect()
	if len(parts) != 1 || parts[0] != fu.Tokens(4) || !resp.CacheHit || srv.Requests() != 1 {
		t.Errorf("cache hit streamed %q (hit %v, %d requests), want the answer as one delta", parts, resp.CacheHit, srv.Requests())
	}
	parts, resp = collect(polygateway.WithStream(false), polygateway.WithCacheSalt("other"))
	if len(parts) != 1 || parts[0] != fu.Tokens(4) || resp.CacheHit {
		t.Errorf("non-streamed answer came as %q", parts)
	}
}

func TestChatStreamOfAnAnswerWithAThinkBlockEndsWithItsResponse(t *testing.T) {
	t.Parallel()
	// A leading think block and the white space around it, as reasoning
	// models send them in the content: every delta reaches the caller and
	// the stream ends with the answer they make, not with a broken stream.
	for _, provider := range []string{"openai", "minimax"} {
		srv := fu.NewRawStream(t, fu.ContentChunk("<think>\nI ponder"), fu.ContentChunk("\n</think>\n\nThe"),
			fu.ContentChunk(" answer."), fu.FinishChunk, "[DONE]")
		c := testenv.Base().Source(provider, 1, srv.URL).Client(t)
		s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
		var content, thinking strings.Builder
		for s.Next() {
			content.WriteString(s.Delta().Content)
			thinking.WriteString(s.Delta().Thinking)
		}
		resp := s.Response()
		if s.Err() != nil || resp == nil || resp.Content != content.String() || resp.Thinking != thinking.String() ||
			strings.TrimSpace(resp.Content) != "The answer." || strings.TrimSpace(resp.Thinking) != "I ponder" {
			t.Errorf("%s: err %v, streamed (%q, %q), response %+v", provider, s.Err(), content.String(), thinking.String(), resp)
		}
		s.Close()
	}
}

// heldStream is an SSE body that hands out head, then holds until its
// request's context ends, closing asked when it is read past head: by
// then every event of head reached the call's stream.
type heldStream struct {
	head  []byte
	ctx   context.Context
	asked chan struct{}
}

func (b *heldStream) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	if b.asked != nil {
		close(b.asked)
		b.asked = nil
	}
	<-b.ctx.Done()
	return 0, b.ctx.Err()
}

func (b *heldStream) Close() error { return nil }

// TestChatStreamCloseDropsTheDeltasNotYetRead: Close ends the stream even
// when deltas the caller has not read are queued — Next then returns
// false, and Err says the call was cancelled.
func TestChatStreamCloseDropsTheDeltasNotYetRead(t *testing.T) {
	t.Parallel()
	var head strings.Builder
	for i := range 5 {
		head.WriteString("data: " + fu.ContentChunk(fmt.Sprintf("tok%d ", i)) + "\n\n")
	}
	asked := make(chan struct{})
	rt := roundTrip(func(r *http.Request) *http.Response {
		_, _ = io.Copy(io.Discard, r.Body)
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Request: r, ContentLength: -1,
			Body: &heldStream{head: []byte(head.String()), ctx: r.Context(), asked: asked}}
	})
	c := testenv.Base().Source("openai", 1, "http://upstream.invalid/v1").Client(t, polygateway.WithHTTPClient(&http.Client{Transport: rt}))
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("hi")})
	if !s.Next() {
		t.Fatalf("no first delta: %v", s.Err())
	}
	<-asked // the other four deltas are queued, unread
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	n := 0
	for s.Next() {
		n++
	}
	if n != 0 || !errors.Is(s.Err(), context.Canceled) || s.Response() != nil {
		t.Errorf("after Close: %d more deltas, err %v, response %v; want none, context.Canceled and no response", n, s.Err(), s.Response())
	}
}
