// Command readme compiles and runs the Go snippets of the repository's
// README.md, word for word, against a fake provider on localhost (the
// documentation test checks that every snippet appears here). It sets the
// process environment itself, as a deployment's .env would:
//
//	go run ./examples/readme
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	server := fakellm.New(func(req fakellm.Request) string {
		if _, structured := req.Params["response_format"]; structured || strings.Contains(req.LastUser(), "JSON") {
			return `{"score": 4, "reason": "clear and short"}`
		}
		return "2, 3 and 5."
	})
	defer server.Close()
	for k, v := range map[string]string{
		"LLM__OPENAI__1__BASE_URL":  server.BaseURL(),
		"LLM__OPENAI__1__API_KEY":   "sk-readme",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "none",
		"PGW_TELEMETRY_BACKEND":     "none",
	} {
		if err := os.Setenv(k, v); err != nil {
			return err
		}
	}

	ctx := context.Background()
	intro(ctx)

	client, err := polygateway.FromEnv("LLM")
	if err != nil {
		return err
	}
	defer client.Close()
	handleErrors(ctx, client, []polygateway.Message{polygateway.User("Name three prime numbers.")})
	structured(ctx, client, []polygateway.Message{polygateway.User("Rate this answer as JSON: 2, 3 and 5.")})
	return nil
}

// intro is the README's first snippet.
func intro(ctx context.Context) {
	client, err := polygateway.FromEnv("LLM")
	if err != nil {
		log.Fatal(err) // names the missing or bad key
	}
	defer client.Close()

	resp, err := client.Chat(ctx, []polygateway.Message{
		polygateway.System("You are terse."),
		polygateway.User("Name three prime numbers."),
	})
	if err != nil {
		log.Print(err)
		return // client.Close still runs
	}
	fmt.Println("intro:", resp.Content)
}

// handleErrors is the README's "Handling errors" snippet.
func handleErrors(ctx context.Context, client *polygateway.GatewayClient, msgs []polygateway.Message) {
	resp, err := client.Chat(ctx, msgs)
	var unavailable *polygateway.GatewayUnavailableError
	var rejected *polygateway.RequestRejectedError
	switch {
	case err == nil:
		use(resp.Content)
	case errors.As(err, &unavailable):
		// no usable source right now: reschedule the task after unavailable.RetryAfter
		// errors.Is(err, polygateway.ErrCircuitOpen) tells "all breakers open" from
		// errors.Is(err, polygateway.ErrAllSourcesExhausted) "retry budget spent".
	case errors.As(err, &rejected):
		// the request itself is wrong (context too long, content filter): do not retry
		log.Print(rejected.Code, rejected.Message)
	case errors.Is(err, context.Canceled):
		// your context was cancelled; nothing was retried and no telemetry row was written
	default:
		// ResultInvalidError, GovernanceBackendError (limiter/breaker backend down)
	}
}

// structured is the README's "Structured output" snippet.
func structured(ctx context.Context, client *polygateway.GatewayClient, msgs []polygateway.Message) {
	type Verdict struct {
		Score  int    `json:"score"`
		Reason string `json:"reason"`
	}
	v, resp, err := polygateway.ChatInto[Verdict](ctx, client, msgs,
		polygateway.WithJSONSchema([]byte(`{"type":"object","required":["score","reason"]}`)))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("structured: %+v from %s\n", v, resp.SourceName)
}

func use(content string) { fmt.Println("errors:", content) }
