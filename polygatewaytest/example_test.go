package polygatewaytest_test

import (
	"context"
	"fmt"
	"maps"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// One fake server plays two upstream models: gpt-a answers every request
// with HTTP 503, gpt-b answers normally. The client's preferred source asks
// for gpt-a and its fallback tier for gpt-b, so a governed call fails over
// within the same Chat; the attempt log shows what reached the server. In
// a test, use polygatewaytest.NewServer(t, …), which closes the server when
// the test ends.
func Example() {
	fake := polygatewaytest.New(
		polygatewaytest.WithModel("gpt-a", polygatewaytest.ServerError(503)),
		polygatewaytest.WithModel("gpt-b", polygatewaytest.OK().WithContent("Paris.")))
	defer fake.Close()

	env := fake.Env("LLM", polygatewaytest.EnvModel("gpt-a")) // source openai_1
	maps.Copy(env, fake.Env("LLM", polygatewaytest.EnvSource("openai", 2),
		polygatewaytest.EnvModel("gpt-b"), polygatewaytest.EnvField("PRIORITY", "1"))) // openai_2, the fallback tier
	env["LLM__RETRY__TIER_PATIENCE_S"] = "0" // fail over at once instead of retrying tier 0

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	resp, err := client.Chat(context.Background(), []polygateway.Message{
		polygateway.User("What is the capital of France?"),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("answer:", resp.Content)
	fmt.Println("source:", resp.SourceName, "attempts:", resp.Attempts)
	for _, a := range fake.Attempts() {
		fmt.Println("upstream saw:", a.Model, a.Kind, a.Status)
	}
	// Output:
	// answer: Paris.
	// source: openai_2 attempts: [openai_1 openai_2]
	// upstream saw: gpt-a status 503
	// upstream saw: gpt-b ok 200
}

// The fake's embeddings endpoint returns deterministic unit vectors
// (EmbeddingFor) of the configured length and reports one prompt token
// per word, so an embedding client can be tested end to end.
func Example_embeddings() {
	fake := polygatewaytest.New(polygatewaytest.WithEmbeddingDim(4))
	defer fake.Close()

	env := fake.Env("EMBED", polygatewaytest.EnvModel("text-embedding-3-small"))
	env["EMBED__BATCH_SIZE"] = "2"
	env["EMBED__ENCODING_FORMAT"] = "base64"
	client, err := embed.FromEnv("EMBED", polygateway.WithEnv(env))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	texts := []string{"red apple", "green pear", "blue plum"}
	resp, err := client.Embed(context.Background(), texts)
	if err != nil {
		fmt.Println(err)
		return
	}
	same := fmt.Sprint(resp.Vectors[0]) == fmt.Sprint(polygatewaytest.EmbeddingFor("red apple", 4))
	fmt.Println(len(resp.Vectors), "vectors of", resp.Dim, "dimensions; as expected:", same)
	fmt.Println(resp.PromptTokens, "tokens", resp.UsageSource, "in", len(resp.BatchCallIDs), "batches")
	// Output:
	// 3 vectors of 4 dimensions; as expected: true
	// 6 tokens measured in 2 batches
}
