package proxy_test

import (
	"context"
	"encoding/json"
	"net/http"
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

// nodeModules returns the node binary for the packages of testdata/node,
// or skips the test when node or a package is missing — except under CI
// (CI=true) with npm installed, where .ci/run has installed them and a
// missing one fails the test instead.
func nodeModules(t *testing.T, packages ...string) string {
	t.Helper()
	_, npmErr := exec.LookPath("npm")
	ci := os.Getenv("CI") == "true" && npmErr == nil
	node, err := exec.LookPath("node")
	if err != nil {
		if ci {
			t.Fatal("CI=true and npm is installed, but node is not: the Node client tests must run in CI")
		}
		t.Skip("node is not installed: the Node client tests are skipped")
	}
	for _, p := range packages {
		if _, err := os.Stat(filepath.Join(nodeDir, "node_modules", p, "package.json")); err != nil {
			if ci {
				t.Fatalf("CI=true but %s is not installed under proxy/%s: .ci/run runs npm ci there", p, nodeDir)
			}
			t.Skipf("%s is not installed: run `npm ci --prefix proxy/%s` (.ci/run does) to run this test", p, nodeDir)
		}
	}
	return node
}

// The Responses API clients of today, unchanged, against the gateway: the
// OpenAI Node SDK's responses.create (plain, streamed, with a function
// tool, with text.format json_schema), the Vercel AI SDK's default OpenAI
// provider (generateText, streamText, generateObject) and LangChain JS
// with useResponsesApi; each check asserts the answer text, the tool call
// and the usage, and that a stream cut mid-answer is a failure.
func TestNodeResponsesClients(t *testing.T) {
	node := nodeModules(t, "openai", "ai", "@ai-sdk/openai", "@langchain/openai", "@langchain/core", "zod")
	const weather = `{"city":"Paris","temp":21}`
	chat := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(5).WithThinking("let me think")))
	jsonUp := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithContent(weather)))
	cut := fake(t, fakeupstream.WithBehavior(fakeupstream.CutAfter(3).WithTokens(10)))
	rejects := fake(t, fakeupstream.WithBehavior(fakeupstream.Status(http.StatusBadRequest,
		`{"error":{"message":"Invalid value for 'temperature': must be at most 2.","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`, nil)))
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	tools := toolUpstream(t)
	e := baseEnv().
		source("LLM", "primary", 1, chat.URL(), secretKey1, "primary-model").
		source("JSON", "json", 1, jsonUp.URL(), secretKey1, "json-model").
		source("CUT", "cut", 1, cut.URL(), secretKey1, "cut-model").
		source("TOOLS", "tools", 1, tools.URL+"/v1", secretKey1, "tool-model").
		source("REJECTS", "strict", 1, rejects.URL(), secretKey1, "strict-model").
		source("DOWN", "down", 1, down.URL(), secretKey1, "down-model").
		set("CUT__RETRY__MAX_ATTEMPTS", "1",
			"DOWN__RETRY__MAX_ATTEMPTS", "2", "DOWN__BREAKER__FAIL_THRESHOLD", "1", "DOWN__BREAKER__COOLDOWN_S", "7")
	clients := map[string]*polygateway.GatewayClient{}
	routes := map[string]string{"gpt-4o": "LLM", "json": "JSON", "cut": "CUT", "tools": "TOOLS", "rejects": "REJECTS", "down": "DOWN"}
	for _, scope := range routes {
		clients[scope] = chatClient(t, scope, e)
	}
	f := serve(t, proxy.Config{Backends: proxy.Backends{Clients: clients, Routes: routes}})
	expect, _ := json.Marshal(map[string]any{
		"content": fakeupstream.Tokens(5), "reasoning": "let me think", "model": "primary-model",
		"json": json.RawMessage(weather), "prefix": fakeupstream.Tokens(3),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "responses.mjs")
	cmd.Dir = nodeDir
	cmd.Env = append(os.Environ(), "PGW_BASE_URL="+f.ts.URL+"/v1", "PGW_EXPECT="+string(expect))
	out, err := cmd.CombinedOutput()
	t.Logf("node responses.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("the Node client checks failed: %v", err)
	}
	for _, check := range []string{
		"sdkCreate", "sdkStream", "sdkStreamHelper", "sdkTools", "sdkToolsStream", "sdkJSONSchema", "sdkErrors", "sdkStreamCut",
		"aiGenerateText", "aiGenerateTextTools", "aiMultiTurn", "aiStreamText", "aiStreamTextTools", "aiStreamTextCut", "aiGenerateObject",
		"langchainInvoke", "langchainStream", "langchainTools", "langchainStructured", "langchainStreamCut",
	} {
		if !strings.Contains(string(out), "ok "+check+"\n") {
			t.Errorf("check %s did not pass", check)
		}
	}
	// What the json route's upstream was asked for: the schema as chat
	// completions' response_format.
	var asked struct {
		ResponseFormat struct {
			Type       string `json:"type"`
			JSONSchema struct {
				Name string `json:"name"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	attempts := jsonUp.Attempts()
	if len(attempts) == 0 || json.Unmarshal(attempts[0].Body, &asked) != nil || asked.ResponseFormat.Type != "json_schema" || asked.ResponseFormat.JSONSchema.Name != "weather" {
		t.Errorf("the json upstream was not asked for the schema: %+v", asked)
	}
}
