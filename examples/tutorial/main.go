// Command tutorial is the program of docs/tutorial.md. It runs offline: it
// starts its own fake provider on localhost, makes a first governed call,
// makes a call with a key the provider refuses (and gets a
// *polygateway.GatewayUnavailableError instead of a bare 401), adds a second
// key as a fallback tier and watches the call fail over, and finally reads
// the telemetry rows of those calls back from SQLite.
//
//	go run ./examples/tutorial
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	_ "github.com/polygateway/polygateway/telemetry/sqlitesink" // PGW_TELEMETRY_BACKEND=sqlite
	_ "modernc.org/sqlite"                                      // the database/sql driver, to read the rows back
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()

	// A fake provider on localhost that knows one API key.
	provider := httptest.NewServer(fakeProvider("sk-good"))
	defer provider.Close()
	baseURL := provider.URL + "/v1"

	dir, err := os.MkdirTemp("", "polygateway-tutorial-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	dbPath := filepath.Join(dir, "telemetry.db")

	if err := firstCall(ctx, baseURL, dbPath); err != nil {
		return err
	}
	if err := refusedKey(ctx, baseURL, dbPath); err != nil {
		return err
	}
	if err := fallbackTier(ctx, baseURL, dbPath); err != nil {
		return err
	}
	return readRows(dbPath)
}

// backends are the assembly keys every client of this tutorial uses.
func backends(dbPath string) map[string]string {
	return map[string]string{
		"PGW_LIMITER_BACKEND":       "memory", // rate limits kept in this process
		"PGW_BREAKER_BACKEND":       "memory", // circuit breakers kept in this process
		"PGW_CACHE_BACKEND":         "none",   // no response cache
		"PGW_TELEMETRY_BACKEND":     "sqlite", // one row per call, in SQLite
		"PGW_TELEMETRY_SQLITE_PATH": dbPath,
	}
}

// firstCall is step 1: one source, one governed call.
func firstCall(ctx context.Context, baseURL, dbPath string) error {
	env := backends(dbPath)
	maps.Copy(env, map[string]string{
		"LLM__OPENAI__1__BASE_URL":  baseURL,
		"LLM__OPENAI__1__API_KEY":   "sk-good",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
	})
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		return err // a *polygateway.ConfigError naming the bad key
	}
	defer client.Close()

	resp, err := client.Chat(ctx, []polygateway.Message{
		polygateway.System("Answer in one sentence."),
		polygateway.User("What is the capital of France?"),
	}, polygateway.WithSessionID("step-1"))
	if err != nil {
		return err
	}
	fmt.Println("== step 1: a governed call")
	fmt.Println("answer:  ", resp.Content)
	fmt.Println("source:  ", resp.SourceName, "attempts:", resp.Attempts)
	fmt.Println("usage:   ", resp.PromptTokens, "+", resp.CompletionTokens, "tokens,", resp.UsageSource)
	fmt.Println("call id: ", resp.CallID)
	return nil
}

// refusedKey is step 2: the only source's key is refused.
func refusedKey(ctx context.Context, baseURL, dbPath string) error {
	env := backends(dbPath)
	maps.Copy(env, map[string]string{
		"LLM__OPENAI__1__BASE_URL":  baseURL,
		"LLM__OPENAI__1__API_KEY":   "sk-revoked",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",
	})
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		return err
	}
	defer client.Close()

	_, err = client.Chat(ctx, []polygateway.Message{
		polygateway.User("What is the capital of France?"),
	}, polygateway.WithSessionID("step-2"))

	fmt.Println("\n== step 2: a key the provider refuses")
	fmt.Println("error:", err)
	var unavailable *polygateway.GatewayUnavailableError
	if errors.As(err, &unavailable) {
		fmt.Println("reason:     ", unavailable.Reason)
		fmt.Println("per source: ", unavailable.PerSource)
		fmt.Println("retry after:", unavailable.RetryAfter.Round(time.Second))
		fmt.Println("all circuits open:", errors.Is(err, polygateway.ErrCircuitOpen))
	}
	var dead *polygateway.SourceDeadError
	if errors.As(err, &dead) {
		fmt.Println("cause:", dead.Source, dead.StatusCode, dead.Code)
	}
	return nil
}

// fallbackTier is step 3: the refused key keeps tier 0, a good key is added
// as tier 1.
func fallbackTier(ctx context.Context, baseURL, dbPath string) error {
	env := backends(dbPath)
	maps.Copy(env, map[string]string{
		"LLM__OPENAI__1__BASE_URL":  baseURL,
		"LLM__OPENAI__1__API_KEY":   "sk-revoked",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "30",

		"LLM__OPENAI__2__BASE_URL":  baseURL,
		"LLM__OPENAI__2__API_KEY":   "sk-good",
		"LLM__OPENAI__2__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__2__TIMEOUT_S": "30",
		"LLM__OPENAI__2__PRIORITY":  "1", // the fallback tier
	})
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		return err
	}
	defer client.Close()

	fmt.Println("\n== step 3: a fallback tier")
	for i := 1; i <= 2; i++ {
		resp, err := client.Chat(ctx, []polygateway.Message{
			polygateway.User("What is the capital of France?"),
		}, polygateway.WithSessionID("step-3"))
		if err != nil {
			return err
		}
		fmt.Printf("call %d: answered by %s, attempts %v\n", i, resp.SourceName, resp.Attempts)
	}
	for _, s := range client.Sources(ctx) {
		fmt.Printf("%s: tier %d, breaker %s\n", s.Name, s.Priority, s.Breaker.State)
	}
	return nil
}

// readRows is step 4: the telemetry rows, read back with database/sql. The
// clients above are closed, so every queued row has been written.
func readRows(dbPath string) error {
	db, err := sql.Open("sqlite", dbPath)
	if err != nil {
		return err
	}
	defer db.Close()

	rows, err := db.Query(`SELECT session_id, source_name, prompt_tokens + completion_tokens, error
		FROM llm_calls ORDER BY created_at`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Println("\n== step 4: telemetry rows")
	for rows.Next() {
		var session, source, callErr string
		var tokens int
		if err := rows.Scan(&session, &source, &tokens, &callErr); err != nil {
			return err
		}
		if len(callErr) > 60 {
			callErr = callErr[:60] + "…"
		}
		fmt.Printf("%-7s %-9s %2d tokens  %s\n", session, source, tokens, callErr)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return nil
}

// fakeProvider is a tiny OpenAI-compatible chat endpoint. It accepts the
// one key it knows and refuses every other with 401, as a provider does
// with a revoked key; it answers every question with the same sentence,
// streamed when the request asks for a stream.
func fakeProvider(knownKey string) http.Handler {
	const answer = "The capital of France is Paris."
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+knownKey {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}`)
			return
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		usage := map[string]int{"prompt_tokens": 14, "completion_tokens": 7, "total_tokens": 21}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"model": req.Model,
				"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
					"message": map[string]string{"role": "assistant", "content": answer}}},
				"usage": usage,
			})
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		send := func(v any) {
			b, _ := json.Marshal(v)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		for _, word := range strings.SplitAfter(answer, " ") {
			send(map[string]any{"model": req.Model, "choices": []any{
				map[string]any{"index": 0, "delta": map[string]string{"content": word}}}})
		}
		send(map[string]any{"model": req.Model, "choices": []any{
			map[string]any{"index": 0, "delta": map[string]string{}, "finish_reason": "stop"}}})
		send(map[string]any{"model": req.Model, "choices": []any{}, "usage": usage})
		fmt.Fprint(w, "data: [DONE]\n\n")
	})
}
