package embed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

// An embedding client for the scope EMBED with one source, batches of two
// texts and L2 normalisation. The local server stands in for an
// OpenAI-compatible /v1/embeddings endpoint: it embeds a text as
// [len(text), 0, 1] and reports one token per text.
func ExampleFromEnv() {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		type item struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]item, len(req.Input))
		for i, text := range req.Input {
			data[i] = item{Index: i, Embedding: []float32{float32(len(text)), 0, 1}}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"data": data, "model": "text-embedding-3-small",
			"usage": map[string]int{"prompt_tokens": len(req.Input)},
		})
	}))
	defer upstream.Close()

	client, err := embed.FromEnv("EMBED", polygateway.WithEnv(map[string]string{
		"EMBED__OPENAI__1__BASE_URL":  upstream.URL + "/v1",
		"EMBED__OPENAI__1__API_KEY":   "sk-example",
		"EMBED__OPENAI__1__MODEL":     "text-embedding-3-small",
		"EMBED__OPENAI__1__TIMEOUT_S": "30",
		"EMBED__BATCH_SIZE":           "2",
		"EMBED__NORMALIZE":            "true",
		"PGW_LIMITER_BACKEND":         "memory",
		"PGW_BREAKER_BACKEND":         "memory",
		"PGW_CACHE_BACKEND":           "none",
		"PGW_TELEMETRY_BACKEND":       "none",
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	resp, err := client.Embed(context.Background(), []string{"hi", "hello", "hey"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, v := range resp.Vectors {
		fmt.Printf("%.3f\n", v)
	}
	fmt.Println(resp.Dim, resp.SourceName, len(resp.BatchCallIDs), "batches,", resp.PromptTokens, "tokens", resp.UsageSource)
	// Output:
	// [0.894 0.000 0.447]
	// [0.981 0.000 0.196]
	// [0.949 0.000 0.316]
	// 3 openai_1 2 batches, 3 tokens measured
}
