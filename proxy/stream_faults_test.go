package proxy_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// cutAnswer is what every upstream of the cut-chunk test answers in whole.
const cutAnswer = "alpha beta gamma"

// cutStream serves cutAnswer as a stream whose second chunk is broken,
// the stream going on after it.
func cutStream(t *testing.T, broken string) *httptest.Server {
	t.Helper()
	words := strings.SplitAfter(cutAnswer, " ")
	return fakeupstream.NewRawStream(t, fakeupstream.ContentChunk(words[0]), broken, fakeupstream.ContentChunk(words[2]), fakeupstream.FinishChunk, "[DONE]")
}

// Through the gateway, for streaming and non-streaming clients, a token
// chunk cut at any byte is never a success with other text: without a
// fallback an error (a status, or an error event with no [DONE]), with one
// the fallback's whole answer.
func TestThroughTheGatewayACutTokenChunkIsNeverASuccessWithOtherText(t *testing.T) {
	t.Parallel()
	ev := fakeupstream.ContentChunk("beta ")
	for cut := 1; cut < len(ev); cut++ {
		srv := cutStream(t, ev[:cut])
		for _, fallback := range []bool{false, true} {
			e := baseEnv().source("LLM", "openai", 1, srv.URL, "sk-a", "gpt-4o").set("LLM__RETRY__TIER_PATIENCE_S", "0")
			if fallback {
				fb := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithContent(cutAnswer)))
				e = e.source("LLM", "qwen", 1, fb.URL(), "sk-b", "qwen", "PRIORITY", "1")
			} else {
				e = e.set("LLM__RETRY__MAX_ATTEMPTS", "1")
			}
			cfg := proxy.Config{}
			cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
			cfg.Routes = map[string]string{"gpt-4o": "LLM"}
			f := serve(t, cfg)
			// Non-streaming.
			resp, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
			if resp.StatusCode == http.StatusOK {
				var c struct {
					Choices []struct {
						Message struct{ Content string } `json:"message"`
					} `json:"choices"`
				}
				if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 || c.Choices[0].Message.Content != cutAnswer {
					t.Fatalf("cut at %d (fallback %v): non-streaming 200 with %s", cut, fallback, body)
				}
			} else if fallback {
				t.Fatalf("cut at %d: non-streaming with a fallback = %d %s, want the fallback's answer", cut, resp.StatusCode, body)
			}
			// Streaming.
			resp, body = f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", true, ""))
			evs := sseEvents(body)
			done := len(evs) > 0 && evs[len(evs)-1] == "[DONE]"
			switch {
			case resp.StatusCode != http.StatusOK:
				if fallback {
					t.Fatalf("cut at %d: stream with a fallback = %d %s", cut, resp.StatusCode, body)
				}
			case done:
				if got := streamText(t, evs); got != cutAnswer {
					t.Fatalf("cut at %d (fallback %v): a stream ending with [DONE] relayed %q", cut, fallback, got)
				}
			default:
				if len(evs) == 0 || !strings.HasPrefix(evs[len(evs)-1], `{"error"`) {
					t.Fatalf("cut at %d (fallback %v): a stream ending with neither [DONE] nor an error event: %s", cut, fallback, body)
				}
				for _, e := range evs {
					if e == "[DONE]" {
						t.Fatalf("cut at %d: an error event and a [DONE]: %s", cut, body)
					}
				}
			}
		}
	}
}
