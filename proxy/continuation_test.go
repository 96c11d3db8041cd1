package proxy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// prefillServer streams n tokens, or, asked to continue a trailing
// assistant prefill (vLLM's continue_final_message), the tokens after it;
// with refuse it answers a continuation with 400.
func prefillServer(t *testing.T, n int, refuse bool) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body struct {
			Messages []struct {
				Role, Content string
			} `json:"messages"`
			Continue bool `json:"continue_final_message"`
		}
		_ = json.Unmarshal(raw, &body)
		from := 0
		if last := body.Messages[len(body.Messages)-1]; last.Role == "assistant" && body.Continue {
			if refuse {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, `{"error":{"message":"cannot continue","type":"invalid_request_error"}}`)
				return
			}
			from = len(strings.Fields(last.Content))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := from; i < n; i++ {
			tok := fmt.Sprintf("tok%d", i)
			if i > 0 {
				tok = " " + tok
			}
			b, _ := json.Marshal(tok)
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", b)
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

func continuationGateway(t *testing.T, refuse bool) *fixture {
	primary := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(40).WithTokens(60)))
	cont := prefillServer(t, 60, refuse)
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
	if strings.Contains(errEvent, "cannot continue") || strings.Contains(errEvent, "invalid_request_error") {
		t.Errorf("the error event is the refusal, want the cut: %s", errEvent)
	}
}
