package embed_test

import (
	"context"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// TestAnEmbeddingsAnswerClaimingAbsurdUsageIsBoundedByItsTexts: a batch
// whose answer claims 2^63-1 prompt tokens is settled at the bytes of its
// texts (plus the request's framing), reported "bounded".
func TestAnEmbeddingsAnswerClaimingAbsurdUsageIsBoundedByItsTexts(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithUsage(`{"prompt_tokens":1000000000,"total_tokens":1000000000}`)))
	c, err := embed.FromEnv("EMB", polygateway.WithEnv(map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"EMB__OPENAI__1__BASE_URL": srv.URL(), "EMB__OPENAI__1__API_KEY": "sk-test", "EMB__OPENAI__1__MODEL": "emb-model",
		"EMB__OPENAI__1__TIMEOUT_S": "5", "EMB__BATCH_SIZE": "8",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Embed(context.Background(), []string{"one", "two"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.PromptTokens > 6+4096 || resp.UsageSource != "bounded" {
		t.Errorf("prompt tokens %d (%s), want at most the texts' 6 bytes and the framing, bounded", resp.PromptTokens, resp.UsageSource)
	}
}
