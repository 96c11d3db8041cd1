// Command telemetrycost is the program of docs/howto-telemetry-cost.md: a
// batch job of governed calls against two fake providers on localhost,
// with a pricing file and telemetry in SQLite, followed by the SQL queries
// that answer "what did it cost" and "what failed where".
//
//	go run ./examples/telemetrycost [-pricing examples/telemetrycost/prices.json] [-db path]
//
// Run it from the repository root (or pass -pricing).
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
	_ "github.com/polygateway/polygateway/telemetry/sqlitesink" // PGW_TELEMETRY_BACKEND=sqlite
	_ "modernc.org/sqlite"                                      // database/sql driver for the queries
)

// The queries of the guide; the first three are those of docs/telemetry.md.
const (
	costPerModelPerDay = `SELECT date(created_at)       AS day,
       model,
       COUNT(*)               AS calls,
       COUNT(cost)            AS priced_calls,
       SUM(cost)              AS cost,
       SUM(prompt_tokens)     AS prompt_tokens,
       SUM(completion_tokens) AS completion_tokens
FROM llm_calls
GROUP BY date(created_at), model
ORDER BY day, cost DESC;`

	errorRatePerSource = `SELECT source_name,
       COUNT(*)                                         AS calls,
       SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END)     AS failures,
       ROUND(1.0 * SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END) / COUNT(*), 4) AS error_rate
FROM llm_calls
WHERE NOT cache_hit
GROUP BY source_name
ORDER BY error_rate DESC, source_name;`

	p95LatencyPerSource = `WITH ranked AS (
    SELECT source_name,
           latency_ms,
           ROW_NUMBER() OVER (PARTITION BY source_name ORDER BY latency_ms) AS rn,
           COUNT(*)     OVER (PARTITION BY source_name)                     AS n
    FROM llm_calls
    WHERE error = '' AND NOT cache_hit
)
SELECT source_name,
       MAX(n)          AS calls,
       MIN(latency_ms) AS p95_latency_ms
FROM ranked
WHERE rn >= 0.95 * n
GROUP BY source_name
ORDER BY p95_latency_ms DESC;`

	costPerSession = `SELECT session_id,
       COUNT(*)                                      AS calls,
       SUM(CASE WHEN cache_hit THEN 1 ELSE 0 END)    AS cache_hits,
       SUM(CASE WHEN error <> '' THEN 1 ELSE 0 END)  AS failures,
       ROUND(SUM(cost), 6)                           AS cost
FROM llm_calls
GROUP BY session_id
ORDER BY cost DESC;`

	failuresByClass = `SELECT substr(error, 1, instr(error, ':') - 1) AS class,
       source_name,
       COUNT(*)                                   AS calls
FROM llm_calls
WHERE error <> ''
GROUP BY class, source_name
ORDER BY calls DESC;`
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	pricing := flag.String("pricing", "examples/telemetrycost/prices.json", "the pricing file (PGW_PRICING_PATH)")
	dbPath := flag.String("db", "", "the SQLite file (default: a temporary one)")
	flag.Parse()
	if *dbPath == "" {
		dir, err := os.MkdirTemp("", "polygateway-telemetry-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*dbPath = filepath.Join(dir, "telemetry.db")
	}

	deepseek := fakellm.New(summarise)
	defer deepseek.Close()
	qwen := fakellm.New(summarise)
	defer qwen.Close()
	for _, s := range []*fakellm.Server{deepseek, qwen} {
		// Like a model with a small context window.
		s.FailWhen(func(r fakellm.Request) bool { return strings.Contains(r.LastUser(), "very long") },
			fakellm.Failure{Status: http.StatusBadRequest, Code: "context_length_exceeded",
				Message: "This model's maximum context length is 8192 tokens."})
	}

	if err := runJob(deepseek.BaseURL(), qwen.BaseURL(), *pricing, *dbPath); err != nil {
		return err
	}

	db, err := sql.Open("sqlite", *dbPath)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []struct{ title, sql string }{
		{"cost per model per day", costPerModelPerDay},
		{"error rate per source", errorRatePerSource},
		{"p95 latency per source (nearest rank)", p95LatencyPerSource},
		{"cost per session", costPerSession},
		{"failures by class and source", failuresByClass},
	} {
		fmt.Printf("\n== %s\n", q.title)
		if err := printQuery(db, q.sql); err != nil {
			return err
		}
	}
	return nil
}

// runJob makes the calls of two sessions. The client is closed before it
// returns, which writes every queued row.
func runJob(deepseekURL, qwenURL, pricingPath, dbPath string) error {
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(map[string]string{
		"LLM__DEEPSEEK__1__BASE_URL":  deepseekURL,
		"LLM__DEEPSEEK__1__API_KEY":   "sk-example-1",
		"LLM__DEEPSEEK__1__MODEL":     "deepseek-chat",
		"LLM__DEEPSEEK__1__TIMEOUT_S": "60",
		"LLM__QWEN__2__BASE_URL":      qwenURL,
		"LLM__QWEN__2__API_KEY":       "sk-example-2",
		"LLM__QWEN__2__MODEL":         "qwen-plus",
		"LLM__QWEN__2__TIMEOUT_S":     "60",

		"PGW_LIMITER_BACKEND":       "memory",
		"PGW_BREAKER_BACKEND":       "memory",
		"PGW_CACHE_BACKEND":         "memory",
		"PGW_CACHE_NAMESPACE":       "telemetry-demo",
		"PGW_CACHE_TTL_S":           "3600",
		"PGW_TELEMETRY_BACKEND":     "sqlite",
		"PGW_TELEMETRY_SQLITE_PATH": dbPath,
		"PGW_PRICING_PATH":          pricingPath,
	}))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	questions := []string{"Summarise chapter 1.", "Summarise chapter 2.", "Summarise chapter 3."}
	for _, session := range []string{"job-41", "job-42"} {
		for _, q := range questions {
			// The second session asks the same questions: cache hits, cost 0.
			_, err := client.Chat(ctx, []polygateway.Message{polygateway.User(q)}, polygateway.WithSessionID(session))
			if err != nil {
				return err
			}
		}
	}
	// A prompt too long for the model: rejected at once, recorded with its error.
	_, err = client.Chat(ctx, []polygateway.Message{polygateway.User("Summarise this very long document: …")},
		polygateway.WithSessionID("job-43"))
	fmt.Println("rejected call:", err)
	return nil
}

// summarise is the fake models' answer.
func summarise(req fakellm.Request) string {
	return "A short summary of: " + req.LastUser()
}

// printQuery prints the rows of a query as a plain table.
func printQuery(db *sql.DB, query string) error {
	rows, err := db.Query(query)
	if err != nil {
		return err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return err
	}
	fmt.Println(strings.Join(cols, " | "))
	vals := make([]any, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return err
		}
		cells := make([]string, len(vals))
		for i, v := range vals {
			switch v := v.(type) {
			case nil:
				cells[i] = "NULL"
			case float64:
				cells[i] = fmt.Sprintf("%.6g", v)
			case []byte:
				cells[i] = string(v)
			default:
				cells[i] = fmt.Sprint(v)
			}
		}
		fmt.Println(strings.Join(cells, " | "))
	}
	return rows.Err()
}
