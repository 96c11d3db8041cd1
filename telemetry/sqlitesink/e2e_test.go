package sqlitesink_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	_ "github.com/polygateway/polygateway/telemetry/sqlitesink"
)

// TestClientWritesOneSQLiteRowPerCallThroughTheRegisteredBackend assembles a
// client from the environment keys alone, makes calls (one of them failing)
// against the fake upstream, closes the client and reads the table back as
// any other program would.
func TestClientWritesOneSQLiteRowPerCallThroughTheRegisteredBackend(t *testing.T) {
	t.Parallel()
	up := fu.NewServer(t, fu.WithScript(fu.OK(), fu.OK().WithTokens(3), fu.ContextLength(), fu.OK()))
	path := filepath.Join(t.TempDir(), "var", "telemetry", "calls.db")
	const apiKey = "sk-secret-e2e-0123456789"
	env := map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none",
		"PGW_TELEMETRY_BACKEND": "sqlite", "PGW_TELEMETRY_SQLITE_PATH": path,
		"LLM__RETRY__BACKOFF_BASE_S": "0.05", "LLM__RETRY__BACKOFF_MAX_S": "0.2",
		"LLM__OPENAI__1__BASE_URL": up.URL(), "LLM__OPENAI__1__API_KEY": apiKey,
		"LLM__OPENAI__1__MODEL": "gpt-e2e", "LLM__OPENAI__1__TIMEOUT_S": "5",
	}
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var okIDs []string
	failures := 0
	for i := range 4 {
		resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User("question ✓")}, polygateway.WithSessionID("sess-e2e"))
		switch {
		case err == nil:
			okIDs = append(okIDs, resp.CallID)
		case i == 2:
			failures++
		default:
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if len(okIDs) != 3 || failures != 1 {
		t.Fatalf("%d successes, %d failures; want 3 and 1", len(okIDs), failures)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(ctx, `SELECT call_id, session_id, model, source_name, scope, error, messages, response,
		prompt_tokens, completion_tokens, latency_ms, created_at FROM llm_calls ORDER BY created_at, call_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	byID := map[string]bool{}
	var errorsSeen []string
	n := 0
	for rows.Next() {
		var (
			id, session, model, source, scope, errText, msgs, response, createdAt string
			prompt, completion                                                    int
			latency                                                               float64
		)
		if err := rows.Scan(&id, &session, &model, &source, &scope, &errText, &msgs, &response,
			&prompt, &completion, &latency, &createdAt); err != nil {
			t.Fatal(err)
		}
		n++
		byID[id] = true
		for _, v := range []string{id, session, model, source, scope, errText, msgs, response} {
			if strings.Contains(v, apiKey) {
				t.Fatalf("row %s contains the API key", id)
			}
		}
		if session != "sess-e2e" || scope != "LLM" || source != "openai_1" || latency <= 0 || createdAt == "" {
			t.Errorf("row %s: session=%q scope=%q source=%q latency=%v created_at=%q", id, session, scope, source, latency, createdAt)
		}
		if !strings.Contains(msgs, "question ✓") {
			t.Errorf("row %s: messages = %q", id, msgs)
		}
		if errText != "" {
			errorsSeen = append(errorsSeen, errText)
			continue
		}
		if response == "" || completion <= 0 || model == "" {
			t.Errorf("successful row %s: response=%q completion_tokens=%d model=%q", id, response, completion, model)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("%d rows, want 4 (one per call)", n)
	}
	for _, id := range okIDs {
		if !byID[id] {
			t.Errorf("no row for successful call %s", id)
		}
	}
	if len(errorsSeen) != 1 || !strings.HasPrefix(errorsSeen[0], "RequestRejectedError: ") {
		t.Fatalf("error column of the failed call = %q, want one \"RequestRejectedError: …\"", errorsSeen)
	}
}
