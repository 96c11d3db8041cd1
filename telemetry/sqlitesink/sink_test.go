package sqlitesink

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/registry"
	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
	"github.com/polygateway/polygateway/telemetry/telemetrytest"
)

// fileReader reads llm_calls through its own connection, as another
// process would.
type fileReader struct{ path string }

func (r fileReader) Rows(ctx context.Context) ([]core.TelemetryRecord, error) {
	db, err := sql.Open("sqlite", fileURI(r.path))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return readAll(ctx, db)
}

// fileURI names path for the driver whatever characters it holds.
func fileURI(path string) string { return (&url.URL{Scheme: "file", Path: path}).String() }

// readAll scans every row of llm_calls in created_at, call_id order.
func readAll(ctx context.Context, db *sql.DB) ([]core.TelemetryRecord, error) {
	rows, err := db.QueryContext(ctx, `SELECT call_id, parent_call_id, session_id, model, provider, source_name,
		messages, response, thinking, prompt_tokens, completion_tokens, usage_source,
		latency_ms, ttft_ms, max_inter_token_ms, cache_hit, error, cost, scope, created_at, degraded, queue_wait_ms
		FROM llm_calls ORDER BY created_at, call_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []core.TelemetryRecord
	for rows.Next() {
		var (
			r                  core.TelemetryRecord
			ttft, gap, cost    sql.NullFloat64
			cacheHit           int
			createdAt          string
			prompt, completion int64
		)
		if err := rows.Scan(&r.CallID, &r.ParentCallID, &r.SessionID, &r.Model, &r.Provider, &r.SourceName,
			&r.Messages, &r.Response, &r.Thinking, &prompt, &completion, &r.UsageSource,
			&r.LatencyMS, &ttft, &gap, &cacheHit, &r.Error, &cost, &r.Scope, &createdAt, &r.Degraded, &r.QueueWaitMS); err != nil {
			return nil, err
		}
		r.PromptTokens, r.CompletionTokens, r.CacheHit = int(prompt), int(completion), cacheHit == 1
		r.TTFTMS, r.MaxInterTokenMS, r.Cost = floatPtr(ttft), floatPtr(gap), floatPtr(cost)
		if r.CreatedAt, err = ParseTime(createdAt); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

func floatPtr(v sql.NullFloat64) *float64 {
	if !v.Valid {
		return nil
	}
	return &v.Float64
}

func openSink(t *testing.T, path string, opts ...Option) *Sink {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestSQLiteSinkConformance(t *testing.T) {
	t.Parallel()
	telemetrytest.RunSinkSuite(t, func(t *testing.T) (core.TelemetrySink, telemetrytest.Reader) {
		s := openSink(t, filepath.Join(t.TempDir(), "telemetry.db"))
		return s, fileReader{path: s.Path()}
	})
}

func TestOpenCreatesTheDirectoryTheTableAndTheIndexesInWALMode(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "a dir", "with ünïcode?#%", "t.db")
	s := openSink(t, path)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file: %v", err)
	}
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
		t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
	}
	cols := columnNames(t, db)
	want := []string{"call_id", "parent_call_id", "session_id", "model", "provider", "source_name",
		"messages", "response", "thinking", "prompt_tokens", "completion_tokens", "usage_source",
		"latency_ms", "ttft_ms", "max_inter_token_ms", "cache_hit", "error", "cost", "scope", "created_at", "degraded", "queue_wait_ms"}
	if !slices.Equal(cols, want) {
		t.Fatalf("columns = %v\nwant %v", cols, want)
	}
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'llm_calls' AND name LIKE 'llm_calls_%_idx' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var idx []string
	for rows.Next() {
		var n string
		_ = rows.Scan(&n)
		idx = append(idx, n)
	}
	if !slices.Equal(idx, []string{"llm_calls_created_at_idx", "llm_calls_session_id_idx", "llm_calls_source_name_idx"}) {
		t.Fatalf("indexes = %v", idx)
	}
}

func columnNames(t *testing.T, db *sql.DB) []string {
	t.Helper()
	rows, err := db.Query(`SELECT name FROM pragma_table_info('llm_calls') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	return cols
}

func TestOpenReusesAnExistingTableAndKeepsItsRows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "t.db")
	s := openSink(t, path)
	_ = s.Write(context.Background(), telemetrytest.SparseRecord("one", telemetrytest.Base))
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := openSink(t, path)
	_ = s2.Write(context.Background(), telemetrytest.SparseRecord("two", telemetrytest.Base))
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := fileReader{path}.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %d, %v; want 2", len(rows), err)
	}
}

func TestOpenFailsClearlyOnAnUnusablePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "plain-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	notADB := filepath.Join(dir, "not-a-db")
	if err := os.WriteFile(notADB, []byte(strings.Repeat("this is not a database ", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"", filepath.Join(file, "t.db"), notADB, dir} {
		s, err := Open(path)
		if err == nil {
			_ = s.Close(context.Background())
			t.Errorf("Open(%q) succeeded", path)
			continue
		}
		if !strings.Contains(err.Error(), "telemetry: sqlite") {
			t.Errorf("Open(%q) error %q does not say what failed", path, err)
		}
	}
}

func TestSQLiteSinkDropsABadRowAloneWithoutPoisoningItsBatch(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	path := filepath.Join(t.TempDir(), "t.db")
	// One long flush interval: the five records go into one transaction.
	s := openSink(t, path, WithLogger(slog.New(logs)), WithFlushInterval(time.Hour))
	ctx := context.Background()
	for i := range 5 {
		r := telemetrytest.SparseRecord(fmt.Sprintf("r%d", i), telemetrytest.Base.Add(time.Duration(i)*time.Second))
		if i == 2 {
			r.LatencyMS = math.NaN() // SQLite stores NaN as NULL: NOT NULL constraint
		}
		_ = s.Write(ctx, r)
	}
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinktest.IDs(t, fileReader{path}); !slices.Equal(got, []string{"r0", "r1", "r3", "r4"}) {
		t.Fatalf("stored %v, want every row but the bad one", got)
	}
	if s.Dropped() != 1 {
		t.Fatalf("Dropped = %d, want 1", s.Dropped())
	}
	if logs.Count(slog.LevelWarn, "refused a record") != 1 || logs.Count(slog.LevelWarn, "unavailable") != 0 {
		t.Fatalf("logs:\n%s", logs.Text())
	}
}

// TestSQLiteSinkQueueFullDropsAndCountsWhileTheWriterIsBlocked blocks the
// writer on a write lock held by another connection and fills the tiny queue.
func TestSQLiteSinkQueueFullDropsAndCountsWhileTheWriterIsBlocked(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "t.db")
	s := openSink(t, path, WithQueueSize(4), WithBatchSize(1), WithBusyTimeout(30*time.Second), WithFlushInterval(time.Millisecond))
	unlock := lockDatabase(t, path)
	ctx := context.Background()
	_ = s.Write(ctx, telemetrytest.SparseRecord("r00", telemetrytest.Base))
	sinktest.Eventually(t, "the writer took r00", func() bool { return s.e.Queued() == 0 })
	start := time.Now()
	for i := 1; i <= 20; i++ {
		if err := s.Write(ctx, telemetrytest.SparseRecord(fmt.Sprintf("r%02d", i), telemetrytest.Base)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(start)
	if s.Dropped() != 16 {
		t.Fatalf("Dropped = %d, want 16 (queue of 4, writer blocked)", s.Dropped())
	}
	if took > 100*time.Millisecond {
		t.Fatalf("20 writes took %s: Write blocked", took)
	}
	unlock()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := fileReader{path}.Rows(ctx)
	if err != nil || len(rows) != 5 {
		t.Fatalf("rows = %d, %v; want 5", len(rows), err)
	}
	t.Logf("20 non-blocking writes against a blocked writer: %s", took)
}

// lockDatabase takes SQLite's write lock from another connection and
// returns the function that releases it.
func lockDatabase(t *testing.T, path string) func() {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		_, _ = conn.ExecContext(context.Background(), "ROLLBACK")
		_ = conn.Close()
		_ = db.Close()
	}
	t.Cleanup(release)
	return release
}

func TestSQLiteSinkDegradesOnALockedDatabaseWarnsOnceAndRecovers(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	path := filepath.Join(t.TempDir(), "t.db")
	s := openSink(t, path, WithLogger(slog.New(logs)), WithBusyTimeout(50*time.Millisecond),
		WithBackoff(100*time.Millisecond, 200*time.Millisecond), WithFlushInterval(5*time.Millisecond))
	ctx := context.Background()
	_ = s.Write(ctx, telemetrytest.SparseRecord("before", telemetrytest.Base))
	sinktest.Eventually(t, "before is stored", func() bool { rows, _ := fileReader{path}.Rows(ctx); return len(rows) == 1 })

	unlock := lockDatabase(t, path)
	_ = s.Write(ctx, telemetrytest.SparseRecord("held", telemetrytest.Base.Add(time.Second)))
	sinktest.Eventually(t, "the sink is down", s.e.Down)
	for i := range 30 {
		_ = s.Write(ctx, telemetrytest.SparseRecord(fmt.Sprintf("during-%02d", i), telemetrytest.Base))
	}
	if s.Dropped() != 30 {
		t.Fatalf("Dropped = %d, want the 30 writes made while down", s.Dropped())
	}
	time.Sleep(500 * time.Millisecond) // several failed recovery attempts
	if !s.e.Down() {
		t.Fatal("the sink recovered while the database was still locked")
	}
	unlock()
	sinktest.Eventually(t, "the sink is up", func() bool { return !s.e.Down() })
	_ = s.Write(ctx, telemetrytest.SparseRecord("after", telemetrytest.Base.Add(2*time.Second)))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinktest.IDs(t, fileReader{path}); !slices.Equal(got, []string{"before", "held", "after"}) {
		t.Fatalf("stored %v, want before, held, after", got)
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.Text())
	}
	if s.Dropped() != 30 {
		t.Fatalf("Dropped = %d, want 30", s.Dropped())
	}
}

func TestSQLiteSinkRecoversWhenItsDatabaseIsClosedUnderneath(t *testing.T) {
	t.Parallel()
	logs := &sinktest.LogCapture{}
	path := filepath.Join(t.TempDir(), "t.db")
	s := openSink(t, path, WithLogger(slog.New(logs)), WithBackoff(200*time.Millisecond, 400*time.Millisecond),
		WithFlushInterval(5*time.Millisecond))
	ctx := context.Background()
	_ = s.Write(ctx, telemetrytest.SparseRecord("before", telemetrytest.Base))
	sinktest.Eventually(t, "before is stored", func() bool { rows, _ := fileReader{path}.Rows(ctx); return len(rows) == 1 })

	_ = s.st.db.Close() // the handle dies under the writer
	_ = s.Write(ctx, telemetrytest.SparseRecord("held", telemetrytest.Base.Add(time.Second)))
	sinktest.Eventually(t, "the sink is down", s.e.Down)
	for i := range 7 {
		_ = s.Write(ctx, telemetrytest.SparseRecord(fmt.Sprintf("during-%d", i), telemetrytest.Base))
	}
	sinktest.Eventually(t, "the sink reopened the database", func() bool { return !s.e.Down() })
	_ = s.Write(ctx, telemetrytest.SparseRecord("after", telemetrytest.Base.Add(2*time.Second)))
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sinktest.IDs(t, fileReader{path}); !slices.Equal(got, []string{"before", "held", "after"}) {
		t.Fatalf("stored %v, want before, held, after", got)
	}
	if s.Dropped() != 7 || logs.Count(slog.LevelWarn, "unavailable") != 1 {
		t.Fatalf("Dropped = %d; logs:\n%s", s.Dropped(), logs.Text())
	}
}

func TestSQLiteSinkIsRegisteredAsTheSQLiteTelemetryBackend(t *testing.T) {
	t.Parallel()
	f, ok := registry.Lookup(registry.KindTelemetry, "sqlite")
	if !ok {
		t.Fatal(`no "sqlite" telemetry factory registered`)
	}
	path := filepath.Join(t.TempDir(), "nested", "t.db")
	v, err := f(registry.NewAssembly(core.GatewaySettings{TelemetryBackend: "sqlite", TelemetrySQLitePath: path}, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := v.(*Sink)
	if !ok {
		t.Fatalf("factory returned %T", v)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if _, err := f(registry.NewAssembly(core.GatewaySettings{TelemetryBackend: "sqlite"}, nil)); err == nil ||
		!strings.Contains(err.Error(), "PGW_TELEMETRY_SQLITE_PATH") {
		t.Fatalf("empty path: %v", err)
	}
}

func BenchmarkSinkWrite(b *testing.B) {
	s, err := Open(filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	r := telemetrytest.FullRecord("bench", telemetrytest.Base, false)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_ = s.Write(context.Background(), r)
		}
	})
	b.StopTimer()
	_ = s.Close(context.Background())
}

// A table made before the degraded and queue_wait_ms columns existed gets
// them on open, and keeps its rows.
func TestOpenAddsTheAddedColumnsToAnOlderTable(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "old.db")
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(schemaSQL[0], ",\n\tdegraded           TEXT    NOT NULL DEFAULT ''", "", 1)
	old = strings.Replace(old, ",\n\tqueue_wait_ms      REAL    NOT NULL DEFAULT 0", "", 1)
	if strings.Contains(old, "degraded") || strings.Contains(old, "queue_wait_ms") {
		t.Fatal("setup: the old schema still has an added column")
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO llm_calls (call_id, created_at) VALUES ('before', '2025-01-01T00:00:00.000000Z')`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	s := openSink(t, path)
	r := telemetrytest.SparseRecord("after", telemetrytest.Base)
	r.Degraded, r.QueueWaitMS = "fallback", 250
	if err := s.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := fileReader{path}.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %v, %v; want the old row and the new one", rows, err)
	}
	for _, row := range rows {
		if want := map[string]string{"before": "", "after": "fallback"}[row.CallID]; row.Degraded != want {
			t.Errorf("%s: degraded = %q, want %q", row.CallID, row.Degraded, want)
		}
		if want := map[string]float64{"before": 0, "after": 250}[row.CallID]; row.QueueWaitMS != want {
			t.Errorf("%s: queue_wait_ms = %v, want %v", row.CallID, row.QueueWaitMS, want)
		}
	}
}

// A table of the design's 18 frozen columns alone (made before scope and
// created_at were added, or by hand from the design) gets every added
// column on open: its rows keep their values and get the time of the
// migration as created_at, and new rows are written in full.
func TestOpenAddsEveryAddedColumnToATableOfTheFrozenColumns(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "frozen.db")
	db, err := sql.Open("sqlite", fileURI(path))
	if err != nil {
		t.Fatal(err)
	}
	old := schemaSQL[0]
	for _, c := range []string{
		",\n\tscope              TEXT    NOT NULL DEFAULT ''",
		",\n\tcreated_at         TEXT    NOT NULL",
		",\n\tdegraded           TEXT    NOT NULL DEFAULT ''",
		",\n\tqueue_wait_ms      REAL    NOT NULL DEFAULT 0",
	} {
		old = strings.Replace(old, c, "", 1)
	}
	for _, c := range []string{"scope", "created_at", "degraded", "queue_wait_ms"} {
		if strings.Contains(old, c) {
			t.Fatalf("setup: the old schema still has %s:\n%s", c, old)
		}
	}
	if _, err := db.Exec(old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO llm_calls (call_id, model) VALUES ('before', 'm-old')`); err != nil {
		t.Fatal(err)
	}
	_ = db.Close()
	opened := time.Now().UTC().Truncate(time.Millisecond)
	s := openSink(t, path)
	want := telemetrytest.FullRecord("after", opened.Add(time.Hour), false)
	if err := s.Write(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, err := fileReader{path}.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %v, %v; want the old row and the new one", rows, err)
	}
	if old := rows[0]; old.CallID != "before" || old.Model != "m-old" || old.Scope != "" ||
		old.CreatedAt.Before(opened) || old.CreatedAt.After(time.Now()) {
		t.Errorf("old row = %+v, want its model kept, no scope and the time of the migration", old)
	}
	if d := telemetrytest.Diff(want, rows[1]); d != "" {
		t.Errorf("new row differs:\n%s", d)
	}
	if s.Dropped() != 0 {
		t.Errorf("Dropped = %d", s.Dropped())
	}
}
