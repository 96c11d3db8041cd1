package proxy_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

func continuationGateway(t *testing.T, refuse bool) *fixture {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(40).WithTokens(60)))
	cont := testkit.NewContinuer(t, 60, refuse)
	e := baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "vllm", 1, cont.URL+"/v1", "none", "local", "PRIORITY", "1").
		set("LLM__RETRY__TIER_PATIENCE_S", "0")
	cfg := proxy.Config{StreamCommit: proxy.CommitFirstToken}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	return serve(t, cfg)
}

func TestGatewayContinuesACommittedStreamCutMidway(t *testing.T) {
	f := continuationGateway(t, false)
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if got := streamText(t, events); got != fakeupstream.Tokens(60) {
		t.Fatalf("client received %q, want exactly the 60-token answer", got)
	}
	if lastEvent(events) != "[DONE]" || countErrorEvents(events) != 0 {
		t.Fatalf("stream does not end cleanly: %v", events[len(events)-3:])
	}
}

func TestGatewayEndsWithTheCutWhenTheContinuationIsRefused(t *testing.T) {
	f := continuationGateway(t, true)
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	events := sseEvents(body)
	if lastEvent(events) == "[DONE]" || countErrorEvents(events) != 1 {
		t.Fatalf("want an error event and no [DONE]: %v", events[len(events)-2:])
	}
	errEvent := events[len(events)-1]
	if strings.Contains(errEvent, "not supported") || strings.Contains(errEvent, "invalid_request_error") {
		t.Errorf("the error event is the refusal, want the cut: %s", errEvent)
	}
}

// TestGatewayFlushesAContinuationsDeltasAsTheyCome: after a cut, the
// continuing source's deltas reach the client as they arrive, as the
// deltas before the cut did — not held until the continuation ends. The
// continuing source here sends part of the rest and then waits until the
// client has it.
func TestGatewayFlushesAContinuationsDeltasAsTheyCome(t *testing.T) {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(40).WithTokens(60)))
	seen := make(chan struct{})
	var once sync.Once
	cont := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		from := len(strings.Fields(body.Messages[len(body.Messages)-1].Content))
		w.Header().Set("Content-Type", "text/event-stream")
		for i := from; i < 60; i++ {
			if i == 55 {
				// The rest waits until the client has what came before.
				select {
				case <-seen:
				case <-r.Context().Done():
					return
				}
			}
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" tok%d\"}}]}\n\n", i)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(cont.Close)
	e := baseEnv().source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "vllm", 1, cont.URL+"/v1", "none", "local", "PRIORITY", "1",
			"TTFT_TIMEOUT_S", "4", "INTER_TOKEN_TIMEOUT_S", "2", "MISSING_DONE", "retry").
		set("LLM__RETRY__TIER_PATIENCE_S", "0", "LLM__RETRY__MAX_ATTEMPTS", "2")
	f := serve(t, proxy.Config{StreamCommit: proxy.CommitFirstToken,
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, Routes: map[string]string{"gpt-4o": "LLM"}}})
	resp, err := f.ts.Client().Post(f.ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(chatBody("gpt-4o", true, "")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text, raw strings.Builder
	br := bufio.NewReader(resp.Body)
	for {
		line, err := br.ReadString('\n')
		raw.WriteString(line)
		if err != nil {
			break
		}
		if ev, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok && ev != "[DONE]" {
			text.WriteString(streamText(t, []string{ev}))
		}
		if strings.HasSuffix(text.String(), " tok54") {
			once.Do(func() { close(seen) })
		}
	}
	// Held back, the deltas reach the client only once the waiting
	// continuation has stalled and the stream has ended with the cut.
	if events := sseEvents([]byte(raw.String())); streamText(t, events) != fakeupstream.Tokens(60) || lastEvent(events) != "[DONE]" {
		t.Fatalf("the client did not have the continuation's deltas while its stream went on: received %v, want the whole answer and [DONE]", events[max(0, len(events)-3):])
	}
}
