package proxy_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

func TestAnswersNameTheBreakerStateAndTheDegradation(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(3)))
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"}})
	for _, stream := range []bool{false, true} {
		resp, body := f.do("POST", "/v1/chat/completions", chatBody("m", stream, ""))
		if resp.StatusCode != http.StatusOK || resp.Header.Get("X-PolyGateway-Breaker") != "closed" || resp.Header.Get("X-PolyGateway-Degraded") != "false" {
			t.Fatalf("stream=%v: %d %v", stream, resp.StatusCode, resp.Header)
		}
		if !stream {
			var out struct {
				Gateway map[string]any `json:"gateway"`
			}
			if err := json.Unmarshal(body, &out); err != nil || out.Gateway["breaker_state"] != "closed" {
				t.Fatalf("gateway object %v (%v)", out.Gateway, err)
			}
		}
	}
}
