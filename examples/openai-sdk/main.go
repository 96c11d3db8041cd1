// Command openai-sdk shows the official OpenAI Go SDK
// (github.com/openai/openai-go/v3) talking to the PolyGateway server: a
// plain answer, a streamed answer, embeddings and a typed error — with
// nothing gateway-specific in the client except its base URL.
//
// Against a running server (cmd/polygateway):
//
//	PGW_BASE_URL=http://127.0.0.1:8400/v1 PGW_MODEL=gpt-4o go run ./examples/openai-sdk
//
// Offline, with fake upstreams and the server started in-process:
//
//	go run ./examples/openai-sdk -demo
//
// Environment: PGW_BASE_URL (default http://127.0.0.1:8400/v1), PGW_MODEL
// (default gpt-4o), PGW_EMBED_MODEL (embeddings are skipped when unset),
// PGW_CLIENT_KEY (sent as the API key; needed when the server sets
// PGW_CLIENT_KEYS).
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

func main() {
	demo := flag.Bool("demo", false, "start fake upstreams and the gateway in-process")
	flag.Parse()
	if err := run(*demo); err != nil {
		fmt.Fprintln(os.Stderr, "openai-sdk:", err)
		os.Exit(1)
	}
}

func run(demo bool) error {
	base := cmp.Or(os.Getenv("PGW_BASE_URL"), "http://127.0.0.1:8400/v1")
	model := cmp.Or(os.Getenv("PGW_MODEL"), "gpt-4o")
	embedModel := os.Getenv("PGW_EMBED_MODEL")
	if demo {
		url, stop, err := startDemo()
		if err != nil {
			return err
		}
		defer stop()
		base, model, embedModel = url, "gpt-4o", "text-embedding-3-small"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The only gateway-specific line: the base URL.
	client := openai.NewClient(
		option.WithBaseURL(base+"/"),
		option.WithAPIKey(cmp.Or(os.Getenv("PGW_CLIENT_KEY"), "unused")),
		option.WithMaxRetries(0), // the gateway already retries and fails over
	)

	// 1. A plain answer. The "gateway" object is outside OpenAI's schema;
	// RawJSON gives access to it.
	resp, err := client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("Be terse."), openai.UserMessage("Name three primes.")},
	})
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	var extra struct {
		Gateway json.RawMessage `json:"gateway"`
	}
	_ = json.Unmarshal([]byte(resp.RawJSON()), &extra)
	fmt.Printf("answer  (%s): %q\n  usage %d+%d tokens\n  gateway %s\n", resp.Model, resp.Choices[0].Message.Content,
		resp.Usage.PromptTokens, resp.Usage.CompletionTokens, extra.Gateway)

	// 2. A streamed answer, accumulated as it arrives.
	stream := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Count to five.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	acc := openai.ChatCompletionAccumulator{}
	fmt.Print("stream: ")
	for stream.Next() {
		chunk := stream.Current()
		acc.AddChunk(chunk)
		if len(chunk.Choices) > 0 {
			fmt.Print(chunk.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		// A stream that fails after its first token ends with an error
		// event: the SDK reports it here, never as a short answer.
		return fmt.Errorf("stream: %w", err)
	}
	fmt.Printf("\n  complete (%s), %d completion tokens\n", acc.Choices[0].FinishReason, acc.Usage.CompletionTokens)

	// 3. Embeddings.
	if embedModel != "" {
		emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
			Model: embedModel,
			Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"gateway", "governance"}},
		})
		if err != nil {
			return fmt.Errorf("embeddings: %w", err)
		}
		fmt.Printf("embeddings (%s): %d vectors of %d dimensions\n", emb.Model, len(emb.Data), len(emb.Data[0].Embedding))
	}

	// 4. Errors are *openai.Error with the provider's code and an honest status.
	_, err = client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:    "no-such-model",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		fmt.Printf("typed error: HTTP %d, code %q, type %q\n", apiErr.StatusCode, apiErr.Code, apiErr.Type)
	} else if err != nil {
		return err
	}
	return nil
}

// startDemo serves scope LLM (a failing primary and a healthy fallback)
// and scope EMBED from fake upstreams on loopback, and returns the
// gateway's base URL.
func startDemo() (string, func(), error) {
	failing := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.ServerError(503)))
	healthy := polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.OK().WithTokens(6)))
	embeddings := polygatewaytest.New(polygatewaytest.WithHandler("/embeddings", http.HandlerFunc(fakeEmbeddings)))
	fakes := []*polygatewaytest.Server{failing, healthy, embeddings}
	closeFakes := func() {
		for _, f := range fakes {
			f.Close()
		}
	}
	env := map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__PRIMARY__1__BASE_URL": failing.URL(), "LLM__PRIMARY__1__API_KEY": "sk-demo", "LLM__PRIMARY__1__MODEL": "primary-model", "LLM__PRIMARY__1__TIMEOUT_S": "10",
		"LLM__FALLBACK__2__BASE_URL": healthy.URL(), "LLM__FALLBACK__2__API_KEY": "sk-demo", "LLM__FALLBACK__2__MODEL": "fallback-model", "LLM__FALLBACK__2__TIMEOUT_S": "10",
		"LLM__FALLBACK__2__PRIORITY": "1", "LLM__RETRY__BACKOFF_BASE_S": "0.05",
		"EMBED__OPENAI__1__BASE_URL": embeddings.URL(), "EMBED__OPENAI__1__API_KEY": "sk-demo", "EMBED__OPENAI__1__MODEL": "embed-model", "EMBED__OPENAI__1__TIMEOUT_S": "10",
		"EMBED__BATCH_SIZE": "16",
	}
	chat, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		closeFakes()
		return "", nil, err
	}
	emb, err := embed.FromEnv("EMBED", polygateway.WithEnv(env))
	if err != nil {
		_ = chat.Close()
		closeFakes()
		return "", nil, err
	}
	srv, err := proxy.New(proxy.Config{
		Backends: proxy.Backends{
			Clients: map[string]*polygateway.GatewayClient{"LLM": chat}, Routes: map[string]string{"gpt-4o": "LLM"},
			Embedders: map[string]proxy.Embedder{"EMBED": emb}, EmbedRoutes: map[string]string{"text-embedding-3-small": "EMBED"},
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		_ = chat.Close()
		_ = emb.Close()
		closeFakes()
		return "", nil, err
	}
	ts := httptest.NewServer(srv)
	return ts.URL + "/v1", func() {
		ts.Close()
		_ = srv.Shutdown(context.Background())
		closeFakes()
	}, nil
}

// fakeEmbeddings answers an OpenAI embeddings request with small vectors.
func fakeEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Model string   `json:"model"`
		Input []string `json:"input"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error"}}`, http.StatusBadRequest)
		return
	}
	data := make([]map[string]any, len(req.Input))
	for i, s := range req.Input {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": []float64{float64(len(s)), 0.25, -0.5, 1}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]int{"prompt_tokens": len(req.Input), "total_tokens": len(req.Input)}})
}
