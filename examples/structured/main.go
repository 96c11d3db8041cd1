// Command structured is the program of docs/howto-structured-output.md:
// ChatInto with a JSON Schema, WithJSON, the re-ask with the validation
// error fed back, and the final ResultInvalidError — against a fake model
// on localhost that answers badly on purpose.
//
//	go run ./examples/structured
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
	"github.com/polygateway/polygateway/telemetry"
)

// Book is the shape the caller wants.
type Book struct {
	Title  string `json:"title"`
	Author string `json:"author"`
	Year   int    `json:"year"`
}

// bookSchema makes every field required: decoding into Book alone would
// accept a missing author as "".
var bookSchema = []byte(`{
	"type": "object",
	"required": ["title", "author", "year"],
	"properties": {
		"title":  {"type": "string"},
		"author": {"type": "string"},
		"year":   {"type": "integer"}
	}
}`)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	model := fakellm.New(fakeModel)
	defer model.Close()
	rows := telemetry.NewMemory() // keeps the telemetry rows in memory, to print them

	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__OPENAI__1__BASE_URL":   model.BaseURL(),
		"LLM__OPENAI__1__API_KEY":    "sk-example",
		"LLM__OPENAI__1__MODEL":      "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S":  "30",
		"PGW_STRUCTURED_MAX_RETRIES": "2", // re-asks after the first answer (the default)
		"PGW_LIMITER_BACKEND":        "memory",
		"PGW_BREAKER_BACKEND":        "memory",
		"PGW_CACHE_BACKEND":          "none",
		"PGW_TELEMETRY_BACKEND":      "none",
	}), polygateway.WithTelemetry(rows))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	// 1. Decode into a Go type, validated against a schema. The first answer
	// lacks the author; the model is asked again with the error.
	book, resp, err := polygateway.ChatInto[Book](ctx, client, []polygateway.Message{
		polygateway.User("Which novel starts on the planet Arrakis? Reply as JSON."),
	}, polygateway.WithJSONSchema(bookSchema))
	if err != nil {
		return err
	}
	fmt.Printf("1. %+v (call %s)\n", book, resp.CallID[:8])
	for _, r := range rows.Records() {
		parent := r.ParentCallID
		if parent != "" {
			parent = parent[:8]
		}
		fmt.Printf("   row %s parent=%-8s error=%q\n", r.CallID[:8], parent, r.Error)
	}

	// 2. Any JSON document: fences and trailing commas are repaired
	// without asking again.
	resp, err = client.Chat(ctx, []polygateway.Message{
		polygateway.User("List two sequels as a JSON array."),
	}, polygateway.WithJSON())
	if err != nil {
		return err
	}
	fmt.Printf("2. %v (raw %q)\n", resp.StructuredData, resp.Content)

	// 3. A model that never complies: after the re-asks, a
	// ResultInvalidError carrying the last raw answer. The breaker is not
	// told: a bad answer is not a bad service.
	_, _, err = polygateway.ChatInto[Book](ctx, client, []polygateway.Message{
		polygateway.User("Tell me about Dune, in prose."),
	}, polygateway.WithJSONSchema(bookSchema))
	var invalid *polygateway.ResultInvalidError
	if errors.As(err, &invalid) {
		fmt.Printf("3. invalid after re-asks: %s\n   last raw answer: %q\n", invalid.Message, invalid.Raw)
	}
	for _, s := range client.Sources(ctx) {
		fmt.Printf("   %s breaker %s, %d rows written in all\n", s.Name, s.Breaker.State, rows.Len())
	}
	return nil
}

// fakeModel answers like a model that is sloppy with JSON.
func fakeModel(req fakellm.Request) string {
	first := req.Messages[0].Content
	reasked := len(req.Messages) > 1 // the re-ask appends the answer and the error
	switch {
	case strings.Contains(first, "Arrakis") && !reasked:
		return "```json\n{\"title\": \"Dune\", \"year\": 1965,}\n```"
	case strings.Contains(first, "Arrakis"):
		return `{"title": "Dune", "author": "Frank Herbert", "year": 1965}`
	case strings.Contains(first, "sequels"):
		return "```json\n[\"Dune Messiah\", \"Children of Dune\",]\n```"
	}
	return "Dune is a 1965 novel by Frank Herbert."
}
