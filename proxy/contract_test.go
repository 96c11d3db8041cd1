package proxy_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/fakeupstream"
	"github.com/polygateway/polygateway/proxy"
)

func TestNonStreamingClientStillFailsOverOnASilentFirstTokenWithAWatchdog(t *testing.T) {
	t.Parallel()
	silent := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4).WithFirstTokenDelay(20*time.Second)))
	healthy := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(4)))
	e := baseEnv().
		source("LLM", "primary", 1, silent.URL(), secretKey1, "primary-model", "TTFT_TIMEOUT_S", "0.3", "INTER_TOKEN_TIMEOUT_S", "0.2", "TIMEOUT_S", "30").
		source("LLM", "fallback", 2, healthy.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:  map[string]string{"gpt-4o": "LLM"},
	}})
	start := time.Now()
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the answer took %v: the silent first token was not cut by the watchdog", took)
	}
	if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,fallback_2" {
		t.Fatalf("X-PolyGateway-Attempts = %q, want the failover primary_1,fallback_2", got)
	}
	var sent map[string]any
	if err := json.Unmarshal(silent.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["stream"] != true {
		t.Errorf("a source with a TTFT watchdog was not asked to stream: %v", sent["stream"])
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Choices[0].Message.Content != tokens(4) {
		t.Fatalf("body %s (%v)", body, err)
	}
}

func TestPerRequestBufferCommitRescuesALateCutOnAFirstTokenGateway(t *testing.T) {
	t.Parallel()
	for name, how := range map[string]struct {
		extra string
		hdr   []string
	}{
		"header":     {"", []string{"X-PolyGateway-Stream-Commit", "buffer"}},
		"body field": {`,"polygateway":{"stream_commit":"buffer"}`, nil},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(4).WithTokens(10)))
			fallback := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(7)))
			f := sdkFixture(t, primary, fallback, proxy.Config{StreamCommit: proxy.CommitFirstToken})
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, how.extra), how.hdr...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			events := sseEvents(body)
			if got := streamText(t, events); got != tokens(7) {
				t.Fatalf("client saw %q, want only the fallback's complete answer %q", got, tokens(7))
			}
			if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
				t.Fatalf("stream does not end cleanly: %v", events)
			}
			if got := resp.Header.Get("X-PolyGateway-Attempts"); got != "primary_1,fallback_2" {
				t.Errorf("X-PolyGateway-Attempts = %q", got)
			}
			if bytes.Contains(primary.LastBody(), []byte("polygateway")) || bytes.Contains(primary.LastBody(), []byte("stream_commit")) {
				t.Errorf("the gateway's own field went upstream: %s", primary.LastBody())
			}
		})
	}
	// The server's default still holds without the override: the late cut
	// ends the stream with an error event.
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(4).WithTokens(10)))
	f := sdkFixture(t, primary, fake(t), proxy.Config{StreamCommit: proxy.CommitFirstToken})
	_, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
	if countErrorEvents(sseEvents(body)) != 1 {
		t.Fatalf("without the override a late cut should end in an error event: %s", body)
	}
}

func TestInvalidPerRequestCommitIs400(t *testing.T) {
	t.Parallel()
	up := fake(t)
	f := sdkFixture(t, up, fake(t), proxy.Config{})
	for name, tc := range map[string]struct {
		extra string
		hdr   []string
		param string
	}{
		"header":     {"", []string{"X-PolyGateway-Stream-Commit", "later"}, "X-PolyGateway-Stream-Commit"},
		"body field": {`,"polygateway":{"stream_commit":"later"}`, nil, "polygateway.stream_commit"},
		"not object": {`,"polygateway":"buffer"`, nil, "polygateway"},
	} {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, tc.extra), tc.hdr...)
		var e struct {
			Error struct {
				Type  string `json:"type"`
				Param string `json:"param"`
			} `json:"error"`
		}
		_ = json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Type != "invalid_request_error" || e.Error.Param != tc.param {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	if up.Requests() != 0 {
		t.Errorf("an invalid commit policy reached the upstream (%d requests)", up.Requests())
	}
}
