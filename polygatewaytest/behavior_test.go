package polygatewaytest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/internal/testkit"
)

func TestOKNonStream(t *testing.T) {
	t.Parallel()
	s := NewServer(t)
	resp, body := mustPost(t, s, plainReq)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
	if c.Object != "chat.completion" || c.Model != "m-req" || len(c.Choices) != 1 {
		t.Fatalf("unexpected answer %s", body)
	}
	if got := c.Choices[0].Message.Content; got != wantContent(DefaultTokens) {
		t.Errorf("content %q", got)
	}
	if c.Choices[0].Message.Role != "assistant" || c.Choices[0].FinishReason != "stop" {
		t.Errorf("role/finish %s", body)
	}
	if c.Usage == nil || *c.Usage != (usage{PromptTokens, DefaultTokens, PromptTokens + DefaultTokens}) {
		t.Errorf("usage %+v", c.Usage)
	}
}

func TestOKStream(t *testing.T) {
	t.Parallel()
	s := NewServer(t)

	t.Run("without include_usage", func(t *testing.T) {
		t.Parallel()
		resp, err := post(t, s, streamReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.readErr != nil || !r.done || r.finish != "stop" || r.usage != nil || r.malformed != 0 {
			t.Fatalf("stream %+v", r)
		}
		if r.tokens != DefaultTokens || r.content.String() != wantContent(DefaultTokens) || r.model != "m-req" {
			t.Errorf("tokens %d content %q model %q", r.tokens, r.content.String(), r.model)
		}
		if last := r.events[len(r.events)-1]; last.data != "[DONE]" {
			t.Errorf("last event %q", last.data)
		}
	})

	t.Run("with include_usage", func(t *testing.T) {
		t.Parallel()
		resp, err := post(t, s, usageReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.readErr != nil || !r.done || r.finish != "stop" {
			t.Fatalf("stream %+v", r)
		}
		if r.usage == nil || *r.usage != (usage{PromptTokens, DefaultTokens, PromptTokens + DefaultTokens}) {
			t.Fatalf("usage %+v", r.usage)
		}
		// The usage chunk is separate, has "choices": [] and precedes [DONE].
		n := len(r.events)
		var c chunk
		if err := json.Unmarshal([]byte(r.events[n-2].data), &c); err != nil || c.Usage == nil {
			t.Fatalf("penultimate event %q", r.events[n-2].data)
		}
		if !strings.Contains(r.events[n-2].data, `"choices":[]`) {
			t.Errorf("usage chunk without empty choices: %s", r.events[n-2].data)
		}
	})
}

func TestOKModifiers(t *testing.T) {
	t.Parallel()

	t.Run("model thinking and tokens", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithModel("served-model").WithThinking(`let me "think"`).WithTokens(3)))
		_, body := mustPost(t, s, plainReq)
		var c completion
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if c.Model != "served-model" || c.Choices[0].Message.ReasoningContent != `let me "think"` ||
			c.Choices[0].Message.Content != "tok0 tok1 tok2" || c.Usage.CompletionTokens != 3 {
			t.Errorf("answer %s", body)
		}
		resp, err := post(t, s, usageReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.model != "served-model" || r.thinking != `let me "think"` || r.content.String() != "tok0 tok1 tok2" || !r.done {
			t.Errorf("stream %+v", r)
		}
	})

	t.Run("thinking field", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithThinking("hmm").WithThinkingField("reasoning")))
		_, body := mustPost(t, s, plainReq)
		var c completion
		if err := json.Unmarshal(body, &c); err != nil {
			t.Fatal(err)
		}
		if c.Choices[0].Message.Reasoning != "hmm" || c.Choices[0].Message.ReasoningContent != "" {
			t.Errorf("answer %s", body)
		}
	})

	t.Run("default model", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t)
		_, body := mustPost(t, s, `{"messages":[]}`)
		var c completion
		if err := json.Unmarshal(body, &c); err != nil || c.Model != DefaultModel {
			t.Errorf("answer %s (%v)", body, err)
		}
	})

	t.Run("empty answer", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithTokens(0)))
		_, body := mustPost(t, s, plainReq)
		var c completion
		if err := json.Unmarshal(body, &c); err != nil || c.Choices[0].Message.Content != "" || c.Usage.CompletionTokens != 0 {
			t.Errorf("answer %s (%v)", body, err)
		}
	})

	t.Run("no done no usage", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithoutDone().WithoutUsage()))
		resp, err := post(t, s, usageReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.readErr != nil || r.done || r.usage != nil || r.finish != "stop" || r.tokens != DefaultTokens {
			t.Errorf("stream %+v", r)
		}
		_, body := mustPost(t, s, plainReq)
		if strings.Contains(string(body), "usage") {
			t.Errorf("usage in %s", body)
		}
		var c completion
		if err := json.Unmarshal(body, &c); err != nil {
			t.Errorf("invalid JSON %s", body)
		}
	})

	t.Run("thousand tokens", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithTokens(1000)))
		resp, err := post(t, s, usageReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.tokens != 1000 || r.content.String() != wantContent(1000) || r.usage.CompletionTokens != 1000 || !r.done {
			t.Errorf("tokens %d usage %+v done %v", r.tokens, r.usage, r.done)
		}
	})

	t.Run("latency and delays", func(t *testing.T) {
		t.Parallel()
		b := OK().WithLatency(60 * time.Millisecond).WithFirstTokenDelay(80 * time.Millisecond).
			WithInterTokenDelay(20 * time.Millisecond).WithTokens(3).WithKeepAlive(25 * time.Millisecond)
		s := NewServer(t, WithBehavior(b))
		start := time.Now()
		resp, err := post(t, s, streamReq)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 60*time.Millisecond {
			t.Errorf("headers after %v, want >= latency", d)
		}
		r := parseStream(t, resp)
		if d := r.tokenTime[0].Sub(start); d < 140*time.Millisecond {
			t.Errorf("first token after %v", d)
		}
		// Each token leaves an inter-token delay after the one before, so
		// token k arrives no sooner than latency + first-token delay + k
		// delays after the request was sent. (The gap between two reads
		// is not measured: a token read late makes the next one seem early.)
		for k, at := range r.tokenTime {
			if d, want := at.Sub(start), 140*time.Millisecond+time.Duration(k)*20*time.Millisecond; d < want {
				t.Errorf("token %d after %v, want >= %v", k, d, want)
			}
		}
		if r.comments < 2 {
			t.Errorf("%d keep-alive comments, want >= 2", r.comments)
		}
		if !r.done || r.tokens != 3 {
			t.Errorf("stream %+v", r)
		}

		start = time.Now()
		mustPost(t, s, plainReq)
		if d := time.Since(start); d < 60*time.Millisecond+80*time.Millisecond+2*20*time.Millisecond {
			t.Errorf("non-streaming answer after %v", d)
		}
	})

	t.Run("headers", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(OK().WithHeader("x-request-id", "req-1")))
		resp, _ := mustPost(t, s, plainReq)
		if resp.Header.Get("X-Request-Id") != "req-1" {
			t.Errorf("header %v", resp.Header)
		}
	})
}

func TestStatusHelpers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		b          Behavior
		code       int
		errCode    string
		retryAfter string
		html       bool
	}{
		{"rate limited", RateLimited("2"), 429, "rate_limit_exceeded", "2", false},
		{"rate limited without retry-after", RateLimited(""), 429, "rate_limit_exceeded", "", false},
		{"insufficient quota", InsufficientQuota(), 429, "insufficient_quota", "", false},
		{"500", ServerError(500), 500, "", "", false},
		{"503", ServerError(503), 503, "", "", false},
		{"502 html", ServerError(502), 502, "", "", true},
		{"bad key", BadKey(), 401, "invalid_api_key", "", false},
		{"context length", ContextLength(), 400, "context_length_exceeded", "", false},
		{"content filter", ContentFilter(), 400, "content_filter", "", false},
		{"custom", Status(418, "teapot", map[string]string{"X-Why": "because"}), 418, "", "", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewServer(t, WithBehavior(tc.b))
			for _, req := range []string{plainReq, streamReq} {
				resp, body := mustPost(t, s, req)
				if resp.StatusCode != tc.code {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.code)
				}
				if got := resp.Header.Get("Retry-After"); got != tc.retryAfter {
					t.Errorf("Retry-After %q, want %q", got, tc.retryAfter)
				}
				ct := resp.Header.Get("Content-Type")
				switch {
				case tc.html:
					if ct != "text/html" || !strings.Contains(string(body), "<html>") {
						t.Errorf("content type %q body %s", ct, body)
					}
				case tc.name == "custom":
					if string(body) != "teapot" || resp.Header.Get("X-Why") != "because" || !strings.HasPrefix(ct, "text/plain") {
						t.Errorf("custom answer %q %v", body, resp.Header)
					}
				default:
					var env struct {
						Error struct {
							Message string `json:"message"`
							Code    any    `json:"code"`
						} `json:"error"`
					}
					if err := json.Unmarshal(body, &env); err != nil || env.Error.Message == "" {
						t.Fatalf("envelope %s (%v)", body, err)
					}
					if tc.errCode != "" && env.Error.Code != tc.errCode {
						t.Errorf("code %v, want %s", env.Error.Code, tc.errCode)
					}
					if ct != "application/json" {
						t.Errorf("content type %q", ct)
					}
				}
			}
		})
	}
}

func TestReset(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBehavior(Reset()))
	for _, req := range []string{plainReq, streamReq} {
		resp, err := post(t, s, req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("got response %d, want transport error", resp.StatusCode)
		}
	}
	if s.Requests() != 2 {
		t.Errorf("Requests %d", s.Requests())
	}
}

func TestHangReleasedByClient(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBehavior(Hang()))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	resp, err := postCtx(ctx, t, s, plainReq)
	if err == nil {
		resp.Body.Close()
		t.Fatal("hang answered")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v", err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Errorf("returned after %v", d)
	}
	testkit.WaitFor(t, 5*time.Second, 2*time.Millisecond, "in-flight 0", func() bool { return s.InFlight() == 0 })
}

func TestHangReleasedByClose(t *testing.T) {
	t.Parallel()
	s := New(WithScript(Hang(), Hang(), OK().WithLatency(time.Hour), StallAfter(1, time.Hour)))
	errs := make(chan error, 4)
	for _, req := range []string{plainReq, streamReq, plainReq, streamReq} {
		go func() {
			resp, err := post(t, s, req)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			errs <- err
		}()
	}
	testkit.WaitFor(t, 5*time.Second, 2*time.Millisecond, "4 in flight", func() bool { return s.InFlight() == 4 })
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs")
	}
	for range 4 {
		if err := <-errs; err == nil {
			t.Error("held request completed without error")
		}
	}
	s.Close() // idempotent
}

func TestCutAfter(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBehavior(CutAfter(3)))
	resp, err := post(t, s, usageReq)
	if err != nil {
		t.Fatal(err)
	}
	r := parseStream(t, resp)
	if r.readErr == nil || r.tokens != 3 || r.finish != "" || r.done || r.usage != nil {
		t.Errorf("stream tokens %d finish %q done %v err %v", r.tokens, r.finish, r.done, r.readErr)
	}

	resp, err = post(t, s, plainReq)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("non-stream read error %v", err)
	}
}

func TestCutAfterZeroAndBeyond(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithScript(CutAfter(0), CutAfter(100).WithTokens(2)))
	for _, want := range []int{0, 2} {
		resp, err := post(t, s, streamReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.readErr == nil || r.tokens != want || r.finish != "" {
			t.Errorf("want %d tokens: got %d finish %q err %v", want, r.tokens, r.finish, r.readErr)
		}
	}
}

func TestStallAfter(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBehavior(StallAfter(2, 200*time.Millisecond).WithKeepAlive(50*time.Millisecond)))
	start := time.Now()
	resp, err := post(t, s, streamReq)
	if err != nil {
		t.Fatal(err)
	}
	r := parseStream(t, resp)
	if r.readErr != nil || !r.done || r.tokens != DefaultTokens || r.finish != "stop" {
		t.Fatalf("stream %+v", r)
	}
	// The gap between tokens as the client reads them can be shorter than
	// the stall when the read of the second token was itself late; what
	// always holds is that the third token comes at least the stall after
	// the request was sent, and that the keep-alives fall inside the stall.
	if d := r.tokenTime[2].Sub(start); d < 200*time.Millisecond {
		t.Errorf("third token %v after the request, want >= the 200ms stall", d)
	}
	tokens, inStall := 0, 0
	for _, e := range r.events {
		switch {
		case e.comment && tokens == 2:
			inStall++
		case !e.comment && strings.Contains(e.data, `"content":"`):
			tokens++
		}
	}
	if inStall < 2 {
		t.Errorf("%d keep-alive comments between the second and third token (%d in all), want >= 2", inStall, r.comments)
	}

	start = time.Now()
	_, body := mustPost(t, s, plainReq)
	if d := time.Since(start); d < 200*time.Millisecond {
		t.Errorf("non-stream answered after %v", d)
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		t.Errorf("body %s", body)
	}
}

func TestMalformedAt(t *testing.T) {
	t.Parallel()
	t.Run("continues", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(MalformedAt(2)))
		resp, err := post(t, s, streamReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.malformed != 1 || !r.done || r.tokens != DefaultTokens || r.readErr != nil {
			t.Errorf("stream %+v", r)
		}
		// The broken event comes right after the second token.
		var seen int
		for _, e := range r.events {
			if strings.HasPrefix(e.data, `{"choices":[{"delta":{"content":"x"`) {
				if seen != 2 {
					t.Errorf("malformed after %d tokens", seen)
				}
			} else if strings.Contains(e.data, `"content":"`) {
				seen++
			}
		}
		resp, body := mustPost(t, s, plainReq)
		var c completion
		if resp.StatusCode != 200 || json.Unmarshal(body, &c) == nil {
			t.Errorf("non-stream %d %s", resp.StatusCode, body)
		}
	})
	t.Run("and close", func(t *testing.T) {
		t.Parallel()
		s := NewServer(t, WithBehavior(MalformedAt(1).AndClose()))
		resp, err := post(t, s, streamReq)
		if err != nil {
			t.Fatal(err)
		}
		r := parseStream(t, resp)
		if r.malformed != 1 || r.done || r.tokens != 1 || r.readErr == nil {
			t.Errorf("stream %+v", r)
		}
	})
}

func TestErrorEvent(t *testing.T) {
	t.Parallel()
	s := NewServer(t, WithBehavior(ErrorEvent(4)))
	resp, err := post(t, s, usageReq)
	if err != nil {
		t.Fatal(err)
	}
	r := parseStream(t, resp)
	if r.errors != 1 || !r.done || r.tokens != 4 || r.finish != "" || r.usage != nil || r.readErr != nil {
		t.Errorf("stream %+v", r)
	}
	if n := len(r.events); n < 2 || !strings.HasPrefix(r.events[n-2].data, `{"error":`) {
		t.Errorf("error event not right before [DONE]")
	}
	resp, body := mustPost(t, s, plainReq)
	if resp.StatusCode != 200 || !strings.HasPrefix(string(body), `{"error":`) {
		t.Errorf("non-stream %d %s", resp.StatusCode, body)
	}
}

func TestNotFoundAndBadJSON(t *testing.T) {
	t.Parallel()
	emb := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	})
	s := NewServer(t, WithHandler("/embeddings", emb))
	resp, err := s.Client().Post(s.URL()+"/nope", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 {
		t.Errorf("status %d", resp.StatusCode)
	}
	resp, err = s.Client().Post(s.URL()+"/embeddings", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"list"`) {
		t.Errorf("embeddings %d %s", resp.StatusCode, body)
	}
	r2, body := mustPost(t, s, `{"model":`)
	if r2.StatusCode != 400 || !strings.Contains(string(body), "parse the JSON") {
		t.Errorf("bad JSON %d %s", r2.StatusCode, body)
	}
	if s.Requests() != 1 {
		t.Errorf("Requests %d, want 1 (chat only)", s.Requests())
	}
}
