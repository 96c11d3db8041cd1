package polygatewaytest_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// client assembles a client of scope LLM from env and closes it at the end
// of the test.
func client(t *testing.T, env map[string]string, opts ...polygateway.Option) *polygateway.GatewayClient {
	t.Helper()
	c, err := polygateway.FromEnv("LLM", append([]polygateway.Option{polygateway.WithEnv(env)}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// chat makes one call with a short prompt and a deadline.
func chat(t *testing.T, c *polygateway.GatewayClient, opts ...polygateway.CallOption) (*polygateway.LLMResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Chat(ctx, []polygateway.Message{polygateway.User("hello")}, opts...)
}

// class names the error class of err and its reason or code.
func class(err error) string {
	var (
		te *polygateway.TransientError
		de *polygateway.SourceDeadError
		re *polygateway.RequestRejectedError
		ie *polygateway.ResultInvalidError
	)
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &te):
		return "transient/" + string(te.Reason)
	case errors.As(err, &de):
		return "dead/" + de.Code
	case errors.As(err, &re):
		return "rejected/" + re.Code
	case errors.As(err, &ie):
		return "invalid"
	}
	return "unclassified: " + err.Error()
}

// Every fault of the fake reaches a polygateway client, through the
// transport's classification, as the error class the library documents
// for it (docs/explanation-errors.md). One attempt per call, so the
// attempt's own error is what the call returns.
func TestEachFaultReachesTheClientAsItsErrorClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		b      polygatewaytest.Behavior
		stream bool
		want   string
	}{
		{"503 overloaded", polygatewaytest.ServerError(503), true, "transient/server_error"},
		{"502 html from a proxy", polygatewaytest.ServerError(502), false, "transient/server_error"},
		{"429 with Retry-After", polygatewaytest.RateLimited("1"), true, "transient/rate_limited"},
		{"401 bad key", polygatewaytest.BadKey(), true, "dead/invalid_api_key"},
		{"429 insufficient quota", polygatewaytest.InsufficientQuota(), true, "dead/insufficient_quota"},
		{"400 context length", polygatewaytest.ContextLength(), true, "rejected/context_length_exceeded"},
		{"400 content filter", polygatewaytest.ContentFilter(), false, "rejected/content_filter"},
		{"connection reset", polygatewaytest.Reset(), true, "transient/network_error"},
		{"silence", polygatewaytest.Hang(), true, "transient/timeout"},
		{"slow first token", polygatewaytest.OK().WithFirstTokenDelay(3 * time.Second), true, "transient/timeout"},
		{"stream cut", polygatewaytest.CutAfter(3), true, "transient/network_error"},
		{"body cut", polygatewaytest.CutAfter(3), false, "transient/network_error"},
		{"stream stall", polygatewaytest.StallAfter(2, 3*time.Second), true, "transient/stalled"},
		{"malformed event", polygatewaytest.MalformedAt(2), true, "transient/network_error"},
		{"malformed body", polygatewaytest.MalformedAt(2), false, "transient/network_error"},
		{"error event in a stream", polygatewaytest.ErrorEvent(2), true, "transient/server_error"},
		{"error inside a 200", polygatewaytest.ErrorEvent(2), false, "transient/server_error"},
		{"no [DONE] after finish_reason", polygatewaytest.OK().WithoutDone(), true, "ok"},
		{"stream cut before finish and [DONE]", polygatewaytest.CutAfter(8).WithoutDone(), true, "transient/network_error"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(tc.b))
			env := s.Env("LLM",
				polygatewaytest.EnvField("TIMEOUT_S", "2"),
				polygatewaytest.EnvField("TTFT_TIMEOUT_S", "0.5"),
				polygatewaytest.EnvField("INTER_TOKEN_TIMEOUT_S", "0.3"))
			maps.Copy(env, map[string]string{
				"LLM__RETRY__MAX_ATTEMPTS":           "1",
				"LLM__BACKPRESSURE__STALL_WINDOW_S":  "1", // a 429 on the only source ends the call after 1 s
				"LLM__BACKPRESSURE__POLL_INTERVAL_S": "0.1",
			})
			_, err := chat(t, client(t, env), polygateway.WithStream(tc.stream))
			if got := class(err); got != tc.want {
				t.Errorf("class %s, want %s (err: %v)", got, tc.want, err)
			}
			if n := s.Requests(); n < 1 {
				t.Errorf("the fake saw %d requests", n)
			}
		})
	}
}

// failoverEnv is one server playing two models: source openai_1 asks for
// gpt-a, source openai_2 (the fallback tier) for gpt-b.
func failoverEnv(s *polygatewaytest.Server) map[string]string {
	env := s.Env("LLM", polygatewaytest.EnvModel("gpt-a"), polygatewaytest.EnvAPIKey("sk-a"))
	maps.Copy(env, s.Env("LLM", polygatewaytest.EnvSource("openai", 2), polygatewaytest.EnvModel("gpt-b"),
		polygatewaytest.EnvAPIKey("sk-b"), polygatewaytest.EnvField("PRIORITY", "1")))
	env["LLM__RETRY__TIER_PATIENCE_S"] = "0" // fail over at once
	env["LLM__RETRY__BACKOFF_BASE_S"] = "0.01"
	env["LLM__RETRY__BACKOFF_MAX_S"] = "0.02"
	return env
}

func TestAPerModelFaultFailsOverToTheOtherModelAndTheAttemptLogShowsBoth(t *testing.T) {
	t.Parallel()
	s := polygatewaytest.NewServer(t,
		polygatewaytest.WithModel("gpt-a", polygatewaytest.ServerError(503)),
		polygatewaytest.WithModel("gpt-b", polygatewaytest.OK().WithContent("fine, thanks")))
	resp, err := chat(t, client(t, failoverEnv(s)))
	if err != nil {
		t.Fatal(err)
	}
	if resp.SourceName != "openai_2" || resp.Content != "fine, thanks" || len(resp.Attempts) != 2 || resp.Attempts[0] != "openai_1" {
		t.Fatalf("answered by %s with %q after %v; want openai_2 after openai_1", resp.SourceName, resp.Content, resp.Attempts)
	}
	a, b := s.AttemptsFor("gpt-a"), s.AttemptsFor("gpt-b")
	if len(a) != 1 || len(b) != 1 {
		t.Fatalf("attempts: %d for gpt-a, %d for gpt-b; want 1 and 1", len(a), len(b))
	}
	if a[0].Kind != polygatewaytest.KindStatus || a[0].Status != http.StatusServiceUnavailable ||
		a[0].Header.Get("Authorization") != "Bearer sk-a" || !a[0].Stream || a[0].Path != "/v1/chat/completions" {
		t.Errorf("gpt-a attempt %+v", a[0])
	}
	if b[0].Kind != polygatewaytest.KindOK || b[0].Status != http.StatusOK || b[0].Header.Get("Authorization") != "Bearer sk-b" ||
		!b[0].Time.After(a[0].Time) || b[0].Seq <= a[0].Seq {
		t.Errorf("gpt-b attempt %+v after %+v", b[0], a[0])
	}
}

func TestAPerModelDeadKeyOpensThatBreakerAndLaterCallsSkipIt(t *testing.T) {
	t.Parallel()
	s := polygatewaytest.NewServer(t,
		polygatewaytest.WithModel("gpt-a", polygatewaytest.BadKey()),
		polygatewaytest.WithModel("gpt-b"))
	c := client(t, failoverEnv(s))
	for i := range 3 {
		resp, err := chat(t, c)
		if err != nil || resp.SourceName != "openai_2" {
			t.Fatalf("call %d = (%v, %v), want openai_2", i, resp, err)
		}
	}
	if n := len(s.AttemptsFor("gpt-a")); n != 1 {
		t.Errorf("gpt-a got %d requests, want 1: its breaker opens on the 401", n)
	}
	if n := len(s.AttemptsFor("gpt-b")); n != 3 {
		t.Errorf("gpt-b got %d requests, want 3", n)
	}
}

// embedClient assembles an embedding client of scope EMBED against s.
func embedClient(t *testing.T, s *polygatewaytest.Server, extra map[string]string) *embed.Client {
	t.Helper()
	env := s.Env("EMBED", polygatewaytest.EnvModel("text-embedding-3-small"))
	env["EMBED__BATCH_SIZE"] = "2"
	maps.Copy(env, extra)
	c, err := embed.FromEnv("EMBED", polygateway.WithEnv(env))
	if err != nil {
		t.Fatalf("embed.FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestEmbeddingsDecodeThroughTheEmbedClientAsFloatsAndAsBase64(t *testing.T) {
	t.Parallel()
	texts := []string{"the quick brown fox", "jumps", "over the lazy dog"}
	for _, format := range []string{"float", "base64"} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			s := polygatewaytest.NewServer(t, polygatewaytest.WithEmbeddingDim(24))
			c := embedClient(t, s, map[string]string{"EMBED__ENCODING_FORMAT": format})
			resp, err := c.Embed(context.Background(), texts)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Dim != 24 || len(resp.Vectors) != len(texts) {
				t.Fatalf("%d vectors of %d", len(resp.Vectors), resp.Dim)
			}
			for i, text := range texts {
				want := polygatewaytest.EmbeddingFor(text, 24)
				for j := range want {
					if resp.Vectors[i][j] != want[j] {
						t.Fatalf("vector %d differs at %d: %v, want %v", i, j, resp.Vectors[i][j], want[j])
					}
				}
			}
			// Usage: one token per word, measured; two batches.
			if resp.PromptTokens != 4+1+4 || resp.UsageSource != "measured" || len(resp.BatchCallIDs) != 2 {
				t.Errorf("usage %d %s, %d batches", resp.PromptTokens, resp.UsageSource, len(resp.BatchCallIDs))
			}
			if got := s.Attempts(); len(got) != 2 || got[0].Path != "/v1/embeddings" || got[0].Model != "text-embedding-3-small" {
				t.Errorf("attempt log %+v", got)
			}
			if s.Requests() != 2 {
				t.Errorf("Requests %d, want 2 batches", s.Requests())
			}
		})
	}
}

func TestEmbeddingsHonourDimensionsAndFailOverPerModel(t *testing.T) {
	t.Parallel()
	s := polygatewaytest.NewServer(t,
		polygatewaytest.WithModel("embed-a", polygatewaytest.ServerError(500)),
		polygatewaytest.WithModel("embed-b"))
	env := s.Env("EMBED", polygatewaytest.EnvModel("embed-a"))
	maps.Copy(env, s.Env("EMBED", polygatewaytest.EnvSource("openai", 2), polygatewaytest.EnvModel("embed-b"),
		polygatewaytest.EnvField("PRIORITY", "1")))
	maps.Copy(env, map[string]string{"EMBED__BATCH_SIZE": "8", "EMBED__RETRY__TIER_PATIENCE_S": "0"})
	c, err := embed.FromEnv("EMBED", polygateway.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Embed(context.Background(), []string{"a", "b"}, polygateway.WithParams(map[string]any{"dimensions": 5}))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Dim != 5 || resp.SourceName != "openai_2" || resp.Model != "embed-b" {
		t.Errorf("dim %d from %s (%s), want 5 from openai_2 (embed-b)", resp.Dim, resp.SourceName, resp.Model)
	}
	if a := s.AttemptsFor("embed-a"); len(a) != 1 || a[0].Status != 500 {
		t.Errorf("embed-a attempts %+v", a)
	}
}

func TestEmbeddingFaultsReachTheEmbedClientAsTheirClass(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		b    polygatewaytest.Behavior
		want string
	}{
		{"503", polygatewaytest.ServerError(503), "transient/server_error"},
		{"bad key", polygatewaytest.BadKey(), "dead/invalid_api_key"},
		{"cut", polygatewaytest.CutAfter(0), "transient/network_error"},
		{"malformed", polygatewaytest.MalformedAt(0), "transient/network_error"},
		{"error inside a 200", polygatewaytest.ErrorEvent(0), "transient/server_error"},
		{"no usage", polygatewaytest.OK().WithoutUsage(), "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(tc.b))
			c := embedClient(t, s, map[string]string{"EMBED__RETRY__MAX_ATTEMPTS": "1"})
			resp, err := c.Embed(context.Background(), []string{"one", "two"})
			if got := class(err); got != tc.want {
				t.Errorf("class %s, want %s (err: %v)", got, tc.want, err)
			}
			if err == nil && resp.UsageSource != "estimated" {
				t.Errorf("usage %s without usage in the answer", resp.UsageSource)
			}
		})
	}
}

// A TruncatedChunkAt fault never gives a whole answer: at or past the last
// token the chunk cut is the finish chunk, so a stream fails like the
// non-streaming body does, wherever the fault is placed.
func TestATruncatedChunkAtOrPastTheLastTokenStillBreaksTheStream(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		b    polygatewaytest.Behavior
	}{
		{"inside the answer", polygatewaytest.TruncatedChunkAt(2)},
		{"at the last token", polygatewaytest.TruncatedChunkAt(polygatewaytest.DefaultTokens)},
		{"past the last token", polygatewaytest.TruncatedChunkAt(polygatewaytest.DefaultTokens + 5)},
		{"of an answer of three words", polygatewaytest.TruncatedChunkAt(3).WithContent("one two three")},
	}
	for _, tc := range cases {
		for _, stream := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/stream=%v", tc.name, stream), func(t *testing.T) {
				t.Parallel()
				s := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(tc.b))
				env := s.Env("LLM")
				env["LLM__RETRY__MAX_ATTEMPTS"] = "1"
				resp, err := chat(t, client(t, env), polygateway.WithStream(stream))
				if err == nil {
					t.Fatalf("the call answered %q, want a failure", resp.Content)
				}
				if a := s.Attempts(); len(a) != 1 || a[0].Kind != polygatewaytest.KindMalformed {
					t.Errorf("attempts %+v", a)
				}
			})
		}
	}
}
