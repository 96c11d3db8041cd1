package sqlitesink

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
)

func TestDocQueriesRunOnSQLite(t *testing.T) {
	t.Parallel()
	queries := sinktest.DocQueries(t, "sqlite")
	if len(queries) != 3 {
		t.Fatalf("%d SQLite queries in docs/telemetry.md, want 3", len(queries))
	}
	path := filepath.Join(t.TempDir(), "t.db")
	s := openSink(t, path)
	for _, r := range sinktest.SampleRecords() {
		_ = s.Write(context.Background(), r)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range queries {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if n == 0 {
			t.Fatalf("no rows from\n%s", q)
		}
	}
	// The time-window form the doc gives for SQLite reads the stored text.
	var inWindow int
	var firstDay string
	if err := db.QueryRow(`SELECT COUNT(*), MIN(date(created_at)) FROM llm_calls WHERE julianday(created_at) >= julianday('2025-06-02', '-1 days')`).Scan(&inWindow, &firstDay); err != nil {
		t.Fatal(err)
	}
	if inWindow != 200 || firstDay != "2025-06-01" {
		t.Fatalf("window count = %d, first day = %q", inWindow, firstDay)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM llm_calls WHERE julianday(created_at) >= julianday('2025-06-02T00:00:00Z')`).Scan(&inWindow); err != nil {
		t.Fatal(err)
	}
	if inWindow != 200-56 { // 14 h of the first day at 4 calls an hour
		t.Fatalf("calls from June 2nd on = %d, want %d", inWindow, 200-56)
	}
	// The nearest-rank p95: latencies 1..100 per source, spread evenly.
	var p95 float64
	if err := db.QueryRow(`SELECT p95_latency_ms FROM (` + strings.TrimSuffix(strings.TrimSpace(queries[2]), ";") + `) AS q WHERE source_name = 'src_1'`).Scan(&p95); err != nil {
		t.Fatal(err)
	}
	if p95 < 90 || p95 > 100 {
		t.Fatalf("p95 of src_1 = %v", p95)
	}
}
