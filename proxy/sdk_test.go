package proxy_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// sdkFixture serves scope LLM (primary + fallback tier) behind "gpt-4o"
// and EMBED behind "text-embedding-3-small".
func sdkFixture(t *testing.T, primary, fallback *fakeupstream.Server, cfg proxy.Config) *fixture {
	t.Helper()
	e := baseEnv().
		source("LLM", "primary", 1, primary.URL(), secretKey1, "primary-model").
		source("LLM", "fallback", 2, fallback.URL(), secretKey2, "fallback-model", "PRIORITY", "1")
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	return serve(t, cfg)
}

func TestSDKNonStreaming(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(5).WithThinking("let me think")))
	fb := fake(t)
	// Both sources without a stream watchdog (it is on by default).
	off := []string{"TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0"}
	e := baseEnv().
		source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model", off...).
		source("LLM", "fallback", 2, fb.URL(), secretKey2, "fallback-model", append([]string{"PRIORITY", "1"}, off...)...)
	cfg := proxy.Config{}
	cfg.Clients = map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}
	cfg.Routes = map[string]string{"gpt-4o": "LLM"}
	f := serve(t, cfg)
	client := f.sdk()
	var raw *http.Response
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:       "gpt-4o",
		Messages:    []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be terse"), openai.UserMessage("hello")},
		Temperature: openai.Float(0.2),
		MaxTokens:   openai.Int(64),
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("Chat.Completions.New: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != fakeupstream.Tokens(5) {
		t.Fatalf("content = %q, want %q", got, fakeupstream.Tokens(5))
	}
	if resp.Model != "primary-model" {
		t.Errorf("model = %q, want the answering source's model", resp.Model)
	}
	if resp.Usage.CompletionTokens != 5 || resp.Usage.TotalTokens != resp.Usage.PromptTokens+5 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	if resp.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason = %q", resp.Choices[0].FinishReason)
	}
	var msg struct {
		ReasoningContent string `json:"reasoning_content"`
	}
	if err := json.Unmarshal([]byte(resp.Choices[0].Message.RawJSON()), &msg); err != nil || msg.ReasoningContent != "let me think" {
		t.Errorf("reasoning_content = %q (%v)", msg.ReasoningContent, err)
	}
	var gw struct {
		Gateway struct {
			RequestID string   `json:"request_id"`
			Source    string   `json:"source"`
			Attempts  []string `json:"attempts"`
			CacheHit  bool     `json:"cache_hit"`
			Degraded  bool     `json:"degraded"`
		} `json:"gateway"`
	}
	if err := json.Unmarshal([]byte(resp.RawJSON()), &gw); err != nil {
		t.Fatal(err)
	}
	if gw.Gateway.Source != "primary_1" || strings.Join(gw.Gateway.Attempts, ",") != "primary_1" || gw.Gateway.CacheHit || gw.Gateway.RequestID == "" {
		t.Errorf("gateway = %+v", gw.Gateway)
	}
	h := raw.Header
	if h.Get("X-PolyGateway-Source") != "primary_1" || h.Get("X-PolyGateway-Attempts") != "primary_1" ||
		h.Get("X-PolyGateway-Cache") != "miss" || h.Get("X-PolyGateway-Degraded") != "false" || h.Get("X-Request-ID") != gw.Gateway.RequestID {
		t.Errorf("headers = %v", h)
	}
	// The generation fields went upstream; model was rewritten; without a
	// stream watchdog a non-streaming client's call is not streamed
	// upstream either.
	var sent map[string]any
	if err := json.Unmarshal(up.LastBody(), &sent); err != nil {
		t.Fatal(err)
	}
	if sent["model"] != "primary-model" || sent["temperature"] != 0.2 || sent["max_tokens"] != float64(64) || sent["stream"] != false {
		t.Errorf("upstream body = %v", sent)
	}
}

func TestSDKStreaming(t *testing.T) {
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(8)))
	f := sdkFixture(t, up, fake(t), proxy.Config{})
	client := f.sdk()
	stream := client.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model:         "gpt-4o",
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	chunks := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if got := acc.Choices[0].Message.Content; got != fakeupstream.Tokens(8) {
		t.Fatalf("accumulated %q, want %q", got, fakeupstream.Tokens(8))
	}
	if chunks < 8 {
		t.Errorf("got %d chunks: the answer was not relayed token by token", chunks)
	}
	if acc.Model != "primary-model" || acc.Usage.CompletionTokens != 8 {
		t.Errorf("model %q usage %+v", acc.Model, acc.Usage)
	}
	if acc.Choices[0].FinishReason != "stop" {
		t.Errorf("finish_reason = %q", acc.Choices[0].FinishReason)
	}
}

func TestSDKEmbeddings(t *testing.T) {
	emb := fake(t, fakeupstream.WithHandler("/embeddings", embeddingsHandler(t)))
	up := fake(t)
	e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients:     map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
		Routes:      map[string]string{"gpt-4o": "LLM"},
		Embedders:   map[string]proxy.Embedder{"EMBED": embedClient(t, emb.URL())},
		EmbedRoutes: map[string]string{"text-embedding-3-small": "EMBED"},
	}})
	client := f.sdk()
	inputs := []string{"a", "bb", "ccc"} // two batches of BATCH_SIZE 2
	resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
	})
	if err != nil {
		t.Fatalf("Embeddings.New: %v", err)
	}
	if len(resp.Data) != 3 || resp.Model != "embed-model" {
		t.Fatalf("got %d vectors, model %q", len(resp.Data), resp.Model)
	}
	for i, d := range resp.Data {
		// Batch-local index+1, then the input's length.
		if d.Index != int64(i) || len(d.Embedding) != 3 || d.Embedding[1] != float64(len(inputs[i])) {
			t.Errorf("vector %d = %+v", i, d)
		}
	}
	if resp.Usage.PromptTokens != 9 {
		t.Errorf("usage = %+v", resp.Usage)
	}
	// base64, as the Python SDK asks by default: little-endian float32s.
	_, body := f.do("POST", "/v1/embeddings", `{"model":"text-embedding-3-small","input":["a","bb","ccc"],"encoding_format":"base64"}`)
	var b64 struct {
		Data []struct {
			Embedding string `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &b64); err != nil || len(b64.Data) != 3 {
		t.Fatalf("base64 embeddings: %s (%v)", body, err)
	}
	for i := range resp.Data {
		raw, err := base64.StdEncoding.DecodeString(b64.Data[i].Embedding)
		if err != nil || len(raw) != 12 {
			t.Fatalf("base64 vector %d: %q (%v)", i, b64.Data[i].Embedding, err)
		}
		if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4:])); float64(got) != resp.Data[i].Embedding[1] {
			t.Errorf("base64 vector %d: component 1 = %v, float answer %v", i, got, resp.Data[i].Embedding[1])
		}
	}
	// Chat models are not embeddings models.
	_, err = client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "gpt-4o", Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("x")},
	})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
		t.Fatalf("embeddings with a chat model: %v", err)
	}
}

func TestSDKTypedErrorKeepsProviderCode(t *testing.T) {
	// Both models refuse the prompt as too long (the fallback's model is
	// tried too: a context-length refusal routes to another model).
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength()))
	fb := fake(t, fakeupstream.WithBehavior(fakeupstream.ContextLength()))
	f := sdkFixture(t, up, fb, proxy.Config{})
	client := f.sdk()
	for _, stream := range []bool{false, true} {
		var err error
		params := openai.ChatCompletionNewParams{Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("a very long prompt")}}
		if stream {
			s := client.Chat.Completions.NewStreaming(context.Background(), params)
			for s.Next() {
			}
			err = s.Err()
		} else {
			_, err = client.Chat.Completions.New(context.Background(), params)
		}
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) {
			t.Fatalf("stream=%v: error %v (%T) is not *openai.Error", stream, err, err)
		}
		if apiErr.StatusCode != http.StatusBadRequest || apiErr.Code != "context_length_exceeded" || apiErr.Type != "invalid_request_error" {
			t.Errorf("stream=%v: status %d code %q type %q", stream, apiErr.StatusCode, apiErr.Code, apiErr.Type)
		}
		if !strings.Contains(apiErr.Message, "context length") {
			t.Errorf("stream=%v: message %q lost the provider's message", stream, apiErr.Message)
		}
	}
	// Each model was asked once per call: never resent to a model that refused it.
	if up.Requests() != 2 || fb.Requests() != 2 {
		t.Errorf("requests primary=%d fallback=%d, want 2 each (one per call)", up.Requests(), fb.Requests())
	}
}

func TestSDKUnavailableIs503WithRetryAfter(t *testing.T) {
	down := fake(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	e := baseEnv().
		source("LLM", "primary", 1, down.URL(), secretKey1, "primary-model").
		set("LLM__RETRY__MAX_ATTEMPTS", "2", "LLM__BREAKER__FAIL_THRESHOLD", "1", "LLM__BREAKER__COOLDOWN_S", "7")
	f := serve(t, proxy.Config{Backends: proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM",
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var raw *http.Response
	client := f.sdk()
	_, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "anything", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("x")},
	}, option.WithResponseInto(&raw))
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("err = %v", err)
	}
	if ra := apiErr.Response.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q", ra)
	}
	// The breaker is open now: the next call is refused at once, 503 circuit_open.
	resp, body := f.do("POST", "/v1/chat/completions", chatBody("anything", false, ""))
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"code":"circuit_open"`) {
		t.Fatalf("second call: %d %s", resp.StatusCode, body)
	}
	if ra := resp.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q", ra)
	}
}

// The part of the prompt an upstream served from its prompt cache
// (usage.prompt_tokens_details.cached_tokens) reaches a chat completions
// client, as it reaches a Responses client: whether the source answered
// in one body or streamed to the gateway's watchdog.
func TestAChatAnswerReportsTheCachedPromptTokensTheUpstreamSent(t *testing.T) {
	t.Parallel()
	const usage = `{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":4}}`
	for name, kv := range map[string][]string{
		"one body": {"TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0"},
		"streamed": nil,
	} {
		up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(3).WithUsage(usage)))
		e := baseEnv().source("LLM", "primary", 1, up.URL(), secretKey1, "primary-model", kv...)
		f := serve(t, proxy.Config{Backends: proxy.Backends{
			Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)},
			Routes:  map[string]string{"gpt-4o": "LLM"},
		}})
		client := f.sdk()
		resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
			Model: "gpt-4o", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")},
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if u := resp.Usage; u.PromptTokens != 10 || u.CompletionTokens != 3 || u.PromptTokensDetails.CachedTokens != 4 {
			t.Errorf("%s: usage = %s, want 10 prompt tokens of which 4 cached", name, u.RawJSON())
		}
	}
}

// An answer whose upstream reported no cached tokens carries no
// prompt_tokens_details: the gateway does not invent them.
func TestAChatAnswerWithoutCachedTokensHasNoPromptTokensDetails(t *testing.T) {
	t.Parallel()
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(3)))
	f := sdkFixture(t, up, fake(t), proxy.Config{})
	_, body := f.do("POST", "/v1/chat/completions", chatBody("gpt-4o", false, ""))
	if !strings.Contains(string(body), `"usage":{"prompt_tokens":`) || strings.Contains(string(body), "prompt_tokens_details") {
		t.Errorf("body = %s", body)
	}
}
