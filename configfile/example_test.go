package configfile_test

import (
	"context"
	"fmt"
	"log"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/configfile"
	"github.com/polygateway/polygateway/embed"
)

// A library program reads the same file as the gateway: Settings builds
// any scope, and Env feeds any client's FromEnv.
func Example() {
	cf, err := configfile.Load("gateway.yaml") // ${NAME}s from the process environment
	if err != nil {
		log.Fatal(err) // names the path, e.g. scopes.LLM.sources[0].timeout_s
	}
	settings, err := cf.Settings("LLM")
	if err != nil {
		log.Fatal(err)
	}
	client, err := polygateway.FromSettings(settings)
	if err != nil {
		log.Fatal(cf.Explain(err))
	}
	defer client.Close()

	embedder, err := embed.FromEnv("EMBED", polygateway.WithEnv(cf.Env()))
	if err != nil {
		log.Print(cf.Explain(err)) // EMBED__BATCH_SIZE becomes scopes.EMBED.batch_size
		return                     // client.Close still runs
	}
	defer embedder.Close()

	ctx := context.Background()
	fmt.Println("chat sources:", len(client.Sources(ctx)), "embedding sources:", len(embedder.Sources(ctx)))
}

// Errors name the place in the file, and suggest the field meant; one
// error lists every problem of the file.
func ExampleParse() {
	file := []byte(`
assembly: {limiter_backend: memory, breaker_backend: memory, cache_backend: none, telemetry_backend: none}
scopes:
  LLM:
    sources:
      - provider: openai
        base_url: https://api.openai.com/v1
        api_key: "${OPENAI_API_KEY}"
        model: gpt-4o-mini
        timeout: 60
`)
	vars := configfile.WithVariables(map[string]string{"OPENAI_API_KEY": "sk-..."})
	_, err := configfile.Parse("gateway.yaml", file, vars)
	fmt.Println(err)

	_, err = configfile.Parse("gateway.yaml", file, configfile.WithVariables(nil)) // no variables set
	fmt.Println(err)
	// Output:
	// polygateway: config: scopes.LLM.sources[0].timeout: unknown field (did you mean timeout_s?); known fields: provider, base_url, api_key, model, timeout_s, max_concurrency, rpm, tpm, est_tokens, ttft_timeout_s, inter_token_timeout_s, context_window, continue, enable_thinking, missing_done, trust_env, priority, weight, region, extra_body, profile, breaker (line 10)
	// polygateway: config: scopes.LLM.sources[0].api_key: environment variable OPENAI_API_KEY is not set (line 8)
	//   scopes.LLM.sources[0].timeout: unknown field (did you mean timeout_s?); known fields: provider, base_url, api_key, model, timeout_s, max_concurrency, rpm, tpm, est_tokens, ttft_timeout_s, inter_token_timeout_s, context_window, continue, enable_thinking, missing_done, trust_env, priority, weight, region, extra_body, profile, breaker (line 10)
}
