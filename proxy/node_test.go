package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// nodeDir holds the Node SDK test: package.json, its lockfile and
// sdk.mjs; `npm ci` there installs the SDK into node_modules/ (never
// committed; .ci/run does it).
const nodeDir = "testdata/node"

// toolUpstream answers every chat request with a call of get_weather,
// as JSON or, when asked to stream, as SSE with the arguments in pieces.
func toolUpstream(t *testing.T) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var req struct {
			Stream bool `json:"stream"`
		}
		_ = json.Unmarshal(b, &req)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","created":1,"model":"tool-model","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]},"finish_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"city\":"}}]},"finish_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"Paris\"}"}}]},"finish_reason":null}]}`,
			`{"id":"x","object":"chat.completion.chunk","created":1,"model":"tool-model","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
			`[DONE]`,
		} {
			_, _ = io.WriteString(w, "data: "+ev+"\n\n")
		}
	}))
	t.Cleanup(ts.Close)
	return ts
}

func TestNodeSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed: the OpenAI Node SDK test is skipped")
	}
	if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", "openai", "package.json")); err != nil {
		t.Skipf("the OpenAI Node SDK is not installed: run `npm ci --prefix proxy/%s` (.ci/run does) to run this test", nodeDir)
	}
	chat := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(5)))
	rejects := fake(t, fakeupstream.WithBehavior(fakeupstream.Status(http.StatusBadRequest,
		`{"error":{"message":"Invalid value for 'temperature': must be at most 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, nil)))
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	tools := toolUpstream(t)
	emb := httptest.NewServer(embeddingsHandler(t))
	t.Cleanup(emb.Close)
	e := baseEnv().
		source("LLM", "primary", 1, chat.URL(), secretKey1, "primary-model").
		source("TOOLS", "tools", 1, tools.URL+"/v1", secretKey1, "tool-model").
		source("REJECTS", "strict", 1, rejects.URL(), secretKey1, "strict-model").
		source("DOWN", "down", 1, down.URL(), secretKey1, "down-model").
		set("DOWN__RETRY__MAX_ATTEMPTS", "2", "DOWN__BREAKER__FAIL_THRESHOLD", "1", "DOWN__BREAKER__COOLDOWN_S", "7")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{
			"LLM": chatClient(t, "LLM", e), "TOOLS": chatClient(t, "TOOLS", e),
			"REJECTS": chatClient(t, "REJECTS", e), "DOWN": chatClient(t, "DOWN", e),
		},
		Routes:      map[string]string{"gpt-4o": "LLM", "tools": "TOOLS", "rejects": "REJECTS", "down": "DOWN"},
		Embedders:   map[string]proxy.Embedder{"EMBED": embedClient(t, emb.URL)},
		EmbedRoutes: map[string]string{"embed": "EMBED"},
	}})
	expect, _ := json.Marshal(map[string]string{"content": fakeupstream.Tokens(5), "model": "primary-model"})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "sdk.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "PGW_BASE_URL="+f.ts.URL+"/v1", "PGW_EXPECT="+string(expect))
	out, err := cmd.CombinedOutput()
	t.Logf("node sdk.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the OpenAI Node SDK checks failed: %v", err)
	}
	for _, check := range []string{"chat", "stream", "streamHelper", "tools", "toolsStream", "embeddingsFloat", "embeddingsBase64", "models", "typedErrors"} {
		if !strings.Contains(string(out), "ok "+check+"\n") {
			t.Errorf("check %s did not pass", check)
		}
	}
}
