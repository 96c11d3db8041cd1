package proxy_test

import (
	"net/http"
	"strings"
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
