package proxy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// lastEvent returns the last SSE data payload.
func lastEvent(events []string) string {
	if len(events) == 0 {
		return ""
	}
	return events[len(events)-1]
}

func countErrorEvents(events []string) int {
	n := 0
	for _, ev := range events {
		if strings.HasPrefix(ev, `{"error"`) {
			n++
		}
	}
	return n
}

func TestStreamFirstTokenFailsOverInvisiblyBeforeFirstToken(t *testing.T) {
	for name, b := range map[string]fakeupstream.Behavior{
		"cut before any token": fakeupstream.CutAfter(0),
		"http 503":             fakeupstream.ServerError(503),
	} {
		t.Run(name, func(t *testing.T) {
			primary := fake(t, fakeupstream.WithBehavior(b))
			fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(6)))
			f := sdkFixture(t, primary, fallback, proxy.Config{})
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
			}
			events := sseEvents(body)
			if got := streamText(t, events); got != fakeupstream.Tokens(6) {
				t.Fatalf("client saw %q, want exactly the fallback's answer %q", got, fakeupstream.Tokens(6))
			}
			if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
				t.Fatalf("stream does not end cleanly: %v", events)
			}
			// The primary is retried once in its tier before the fallback.
			if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,primary_1,fallback_2" {
				t.Errorf("X-PolyGateway-Attempts = %q", got)
			}
			if got := resp.Header.Get("X-PolyGateway-Source"); got != "fallback_2" {
				t.Errorf("X-PolyGateway-Source = %q", got)
			}
			var first struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal([]byte(events[0]), &first)
			if first.Model != "fallback-model" {
				t.Errorf("first chunk model = %q, want the fallback's", first.Model)
			}
			// The SDK sees one clean stream too.
			client := f.sdk()
			s := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
				Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
			})
			acc := openai.ChatCompletionAccumulator{}
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if s.Err() != nil || acc.Choices[0].Message.Content != fakeupstream.Tokens(6) {
				t.Fatalf("SDK: err %v content %q", s.Err(), acc.Choices[0].Message.Content)
			}
		})
	}
}

func TestStreamFirstTokenCutAfterTokensEndsWithErrorEvent(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	f := sdkFixture(t, primary, fallback, proxy.Config{})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, `,"stream_options":{"include_usage":true}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if got := streamText(t, events); got != fakeupstream.Tokens(3) {
		t.Errorf("relayed %q, want the 3 tokens sent before the cut", got)
	}
	if strings.Contains(string(body), "data: [DONE]") {
		t.Fatalf("a cut stream ended with [DONE]: %v", events)
	}
	last := lastEvent(events)
	var ev struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(last), &ev); err != nil || ev.Error.Message == "" || ev.Error.Type == "" {
		t.Fatalf("last event %q is not an OpenAI error event", last)
	}
	if strings.Contains(string(body), `"finish_reason":"stop"`) {
		t.Errorf("a cut stream carried a finish chunk")
	}
	if fallback.Requests() != 0 {
		t.Errorf("a committed stream failed over (%d fallback requests)", fallback.Requests())
	}
	// The SDK reports the failure instead of a short answer (whichever
	// source it gets: both cut).
	client := f.sdk()
	s := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	for s.Next() {
	}
	if s.Err() == nil {
		t.Fatal("SDK saw a cut stream as complete")
	}
	// The log records the 200 the client received and how the stream ended.
	if !strings.Contains(f.logs.String(), `"status":200`) || !strings.Contains(f.logs.String(), `"outcome":"stream_interrupted"`) {
		t.Errorf("log does not record the failed stream: %s", f.logs.String())
	}
}

func TestStreamBufferReplacesCutStreamWithFallbackAnswer(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(4).WithTokens(10)))
	fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(7)))
	f := sdkFixture(t, primary, fallback, proxy.Config{StreamCommit: proxy.CommitBuffer})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, `,"stream_options":{"include_usage":true}`))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if got := streamText(t, events); got != fakeupstream.Tokens(7) {
		t.Fatalf("client saw %q, want only the fallback's complete answer %q", got, fakeupstream.Tokens(7))
	}
	if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
		t.Fatalf("stream does not end cleanly: %v", events)
	}
	if resp.Header.Get("X-PolyGateway-Attempts") != "primary_1,primary_1,fallback_2" || resp.Header.Get("X-PolyGateway-Source") != "fallback_2" {
		t.Errorf("headers %v", resp.Header)
	}
	// Token by token as the fallback sent them, then finish, usage, [DONE].
	if len(events) < 7+3 {
		t.Errorf("only %d events", len(events))
	}
	var usage struct {
		Choices []any `json:"choices"`
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
		Model   string `json:"model"`
		Gateway struct {
			Attempts []string `json:"attempts"`
		} `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(events[len(events)-2]), &usage); err != nil {
		t.Fatal(err)
	}
	if len(usage.Choices) != 0 || usage.Usage.CompletionTokens != 7 || usage.Model != "fallback-model" || len(usage.Gateway.Attempts) != 3 {
		t.Errorf("usage chunk = %s", events[len(events)-2])
	}
}

func TestStreamBufferFailureBeforeAnythingIsAJSONError(t *testing.T) {
	// Both models refuse the prompt: the call fails before anything is sent.
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength()))
	f := sdkFixture(t, primary, fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength())), proxy.Config{StreamCommit: proxy.CommitBuffer})
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), `"code":"context_length_exceeded"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestStreamClientDisconnectCancelsTheCall(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(200).WithInterTokenDelay(20*time.Millisecond)))
	f := sdkFixture(t, primary, fake(t), proxy.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", f.ts.URL+"/v1/chat/completions", strings.NewReader(chatBody("gpt-4o", true, "")))
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first line %q: %v", line, err)
	}
	cancel()
	resp.Body.Close()
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the upstream call to be cancelled", func() bool { return primary.InFlight() == 0 && f.srv.InFlight() == 0 })
	// The client had its 200: the log keeps it and says the client left.
	testkit.WaitFor(t, 5*time.Second, 5*time.Millisecond, "the log line of the abandoned stream", func() bool {
		return strings.Contains(f.logs.String(), `"status":200`) && strings.Contains(f.logs.String(), `"outcome":"client_`)
	})
}

func TestFallbackAnswerNeverCompletesABrokenStream(t *testing.T) {
	fallback := polygateway.WithFallback(func(ctx context.Context, msgs []polygateway.Message, cause error) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{Content: "canned answer", Model: "canned", FinishReason: "stop"}, nil
	})
	for _, commit := range []string{proxy.CommitFirstToken, proxy.CommitBuffer} {
		t.Run(commit, func(t *testing.T) {
			up := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
			e := baseEnv().source("LLM", "only", 1, up.URL(), secretKey1, "only-model").set("LLM__RETRY__MAX_ATTEMPTS", "1")
			f := serve(t, proxy.Config{
				Backends:     proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e, fallback)}, DefaultScope: "LLM"},
				StreamCommit: commit,
			})
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", true, ""))
			events := sseEvents(body)
			if commit == proxy.CommitFirstToken {
				// tok0..tok2 went out: the canned answer cannot continue them,
				// and the stream ends with the error that cut it.
				if lastEvent(events) == "[DONE]" || !strings.Contains(lastEvent(events), `"code":"network_error"`) || streamText(t, events) != fakeupstream.Tokens(3) {
					t.Fatalf("broken stream completed by a fallback: %v", events)
				}
				return
			}
			if resp.Header.Get("X-PolyGateway-Degraded") != "fallback" || streamText(t, events) != "canned answer" || lastEvent(events) != "[DONE]" {
				t.Fatalf("buffered degraded answer: %v %v", resp.Header, events)
			}
			// Non-streaming: the degraded answer, marked.
			resp, body = f.do("POST", "/v1/chat/completions", chatBody("m", false, ""))
			if resp.StatusCode != 200 || resp.Header.Get("X-PolyGateway-Degraded") != "fallback" || !strings.Contains(string(body), `"degraded":true,"degraded_by":"fallback"`) {
				t.Fatalf("non-streaming degraded: %v %s", resp.Header, body)
			}
		})
	}
}

// Under first_token every delta is flushed as it arrives, even when what
// follows it in the same read from the upstream is not an event (a
// keep-alive comment, blank lines, an event without data): the gateway
// must not hold a token while it waits on the network for the next one.
// The upstream sends its last token only once the client has the one
// before it; a gateway that held it would wait until the request's
// deadline ended the stream with an error event.
func TestADeltaFollowedByANonEventIsFlushedBeforeTheGatewayWaits(t *testing.T) {
	t.Parallel()
	for name, trailer := range map[string]string{
		"keep-alive comment": ": keep-alive\n\n",
		"blank lines":        "\n\n",
		"crlf blank lines":   "\r\n\r\n",
		"event without data": "event: ping\n\n",
		"several comments":   ": a\n\n: b\n: c\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				_, _ = io.WriteString(w, "data: "+fakeupstream.ContentChunk("a")+"\n\n")
				w.(http.Flusher).Flush()
				// The token and what follows it, in one write.
				_, _ = io.WriteString(w, "data: "+fakeupstream.ContentChunk("b")+"\n\n"+trailer)
				w.(http.Flusher).Flush()
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
				_, _ = io.WriteString(w, "data: "+fakeupstream.ContentChunk("c")+"\n\ndata: "+fakeupstream.FinishChunk+"\n\ndata: [DONE]\n\n")
			}))
			t.Cleanup(up.Close)
			e := baseEnv().source("LLM", "openai", 1, up.URL, secretKey1, "gpt-4o", "TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0").
				set("LLM__RETRY__MAX_ATTEMPTS", "1")
			cfg := proxy.Config{StreamCommit: proxy.CommitFirstToken}
			cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
			cfg.Routes = map[string]string{"gpt-4o": "LLM"}
			f := serve(t, cfg)
			req, err := http.NewRequest("POST", f.ts.URL+"/v1/chat/completions", strings.NewReader(chatBody("gpt-4o", true, "")))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-PolyGateway-Timeout", "5")
			resp, err := f.ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var events []string
			br := bufio.NewReader(resp.Body)
			for {
				line, err := br.ReadString('\n')
				if d, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "data: "); ok {
					events = append(events, d)
					if len(events) == 2 {
						close(release) // the client has "b": the upstream goes on
					}
				}
				if err != nil {
					break
				}
			}
			if len(events) < 2 {
				close(release)
			}
			if got := streamText(t, events); got != "abc" || lastEvent(events) != "[DONE]" {
				t.Fatalf("client saw %q, ending with %s; want the whole answer, each token as it came", got, lastEvent(events))
			}
		})
	}
}
