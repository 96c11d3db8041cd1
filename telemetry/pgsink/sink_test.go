package pgsink

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/registry"
	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
	"github.com/polygateway/polygateway/telemetry/telemetrytest"
)

func openSink(t *testing.T, dsn string, opts ...Option) *Sink {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dsn, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func closeSink(t *testing.T, s *Sink) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func TestPostgresSinkConformance(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	telemetrytest.RunSinkSuite(t, func(t *testing.T) (core.TelemetrySink, telemetrytest.Reader) {
		schema := freshSchema(t, dsn, true)
		return openSink(t, dsn, WithSchema(schema)), pgReader{dsn: dsn, schema: schema}
	})
}

func TestOpenCreatesTheTableWithPostgresTypesAndIndexes(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, false) // WithSchema creates it
	closeSink(t, openSink(t, dsn, WithSchema(schema)))

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, _ := conn.Query(ctx, `SELECT column_name, data_type, is_nullable FROM information_schema.columns
		WHERE table_schema = $1 AND table_name = 'llm_calls' ORDER BY ordinal_position`, schema)
	type col struct{ Name, Type, Nullable string }
	cols, err := pgx.CollectRows(rows, pgx.RowToStructByPos[col])
	if err != nil {
		t.Fatal(err)
	}
	want := []col{
		{"call_id", "text", "NO"}, {"parent_call_id", "text", "NO"}, {"session_id", "text", "NO"},
		{"model", "text", "NO"}, {"provider", "text", "NO"}, {"source_name", "text", "NO"},
		{"messages", "text", "NO"}, {"response", "text", "NO"}, {"thinking", "text", "NO"},
		{"prompt_tokens", "bigint", "NO"}, {"completion_tokens", "bigint", "NO"}, {"usage_source", "text", "NO"},
		{"latency_ms", "double precision", "NO"}, {"ttft_ms", "double precision", "YES"},
		{"max_inter_token_ms", "double precision", "YES"}, {"cache_hit", "boolean", "NO"},
		{"error", "text", "NO"}, {"cost", "double precision", "YES"}, {"scope", "text", "NO"},
		{"created_at", "timestamp with time zone", "NO"},
		{"degraded", "text", "NO"},
		{"queue_wait_ms", "double precision", "NO"},
	}
	if !slices.Equal(cols, want) {
		t.Fatalf("columns:\n got %v\nwant %v", cols, want)
	}
	rows, _ = conn.Query(ctx, `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'llm_calls' ORDER BY indexname`, schema)
	idx, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(idx, []string{"llm_calls_created_at_idx", "llm_calls_pkey", "llm_calls_session_id_idx", "llm_calls_source_name_idx"}) {
		t.Fatalf("indexes = %v", idx)
	}
}

func TestManyProcessesCreatingTheTableAtOnceAllSucceed(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, false)
	const n = 8
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		sinks = make([]*Sink, n)
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			sinks[i], errs[i] = Open(context.Background(), dsn, WithSchema(schema))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Open #%d: %v", i, errs[i])
			continue
		}
		_ = sinks[i].Write(context.Background(), telemetrytest.SparseRecord(fmt.Sprintf("p%d", i), telemetrytest.Base))
		closeSink(t, sinks[i])
	}
	if got := (pgReader{dsn, schema}).ids(t); len(got) != n {
		t.Fatalf("rows = %v, want %d", got, n)
	}
}

func TestSearchPathInTheDSNPicksTheSchema(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	s := openSink(t, withHost(t, dsn, hostOf(t, dsn), "search_path", schema))
	_ = s.Write(context.Background(), telemetrytest.SparseRecord("via-search-path", telemetrytest.Base))
	closeSink(t, s)
	if got := (pgReader{dsn, schema}).ids(t); !slices.Equal(got, []string{"via-search-path"}) {
		t.Fatalf("rows in %s = %v", schema, got)
	}
}

func hostOf(t *testing.T, dsn string) string {
	t.Helper()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", cfg.Host, cfg.Port)
}

func TestOpenRefusesABadDSNOrAServerThatSaysNoWithoutLeakingThePassword(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	u, err := url.Parse(dsn)
	if err != nil || u.User == nil {
		t.Skip("PGW_TEST_PG_DSN is not a postgres:// URL with a user")
	}
	u.User = url.UserPassword(u.User.Username(), "hunter2")
	u.Path = "/no_such_db_pgw"
	for _, bad := range []string{
		"postgres://root:hunter2@[::1:bad/x",
		"not a dsn = = =",
		u.String(),
	} {
		s, err := Open(context.Background(), bad)
		if err == nil {
			_ = s.Close(context.Background())
			t.Errorf("Open(%q) succeeded", bad)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open error shows the password: %v", err)
		}
		if !strings.Contains(err.Error(), "telemetry: postgres") {
			t.Errorf("Open error does not say what failed: %v", err)
		}
	}
}

func TestPostgresSinkDropsBadRowsAloneWithoutPoisoningTheirBatch(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	logs := &sinktest.LogCapture{}
	s := openSink(t, dsn, WithSchema(schema), WithLogger(slog.New(logs)), WithFlushInterval(time.Hour))
	ctx := context.Background()
	for i := range 7 {
		r := telemetrytest.SparseRecord(fmt.Sprintf("r%d", i), telemetrytest.Base.Add(time.Duration(i)*time.Second))
		switch i {
		case 1:
			r.CreatedAt = time.Date(-5000, time.January, 1, 0, 0, 0, 0, time.UTC) // before timestamptz's range (4714 BC): 22008
		case 3:
			r.CreatedAt = time.Date(-100000, time.January, 1, 0, 0, 0, 0, time.UTC) // 22008
		case 5:
			r.SessionID = strings.Repeat("x", 1<<20) // too large for the btree index: 54000
		}
		_ = s.Write(ctx, r)
	}
	closeSink(t, s)
	if got := (pgReader{dsn, schema}).ids(t); !slices.Equal(got, []string{"r0", "r2", "r4", "r6"}) {
		t.Fatalf("stored %v, want every row but the three bad ones", got)
	}
	if s.Dropped() != 3 {
		t.Fatalf("Dropped = %d, want 3", s.Dropped())
	}
	if logs.Count(slog.LevelWarn, "refused a record") != 1 || logs.Count(slog.LevelWarn, "unavailable") != 0 {
		t.Fatalf("logs:\n%s", logs.Text())
	}
}

func TestPostgresOutageWarnsOnceDropsAndCountsThenRecovers(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	proxy := newProxy(t, hostOf(t, dsn))
	proxy.start(t)
	logs := &sinktest.LogCapture{}
	s := openSink(t, withHost(t, dsn, proxy.addr), WithSchema(schema), WithLogger(slog.New(logs)),
		WithFlushInterval(5*time.Millisecond), WithBackoff(50*time.Millisecond, 200*time.Millisecond), WithOpTimeout(2*time.Second))
	rd := pgReader{dsn, schema}
	ctx := context.Background()
	_ = s.Write(ctx, telemetrytest.SparseRecord("before", telemetrytest.Base))
	sinktest.Eventually(t, "before is stored", func() bool { return len(rd.ids(t)) == 1 })

	proxy.stop() // the connection is cut and new ones are closed at once
	_ = s.Write(ctx, telemetrytest.SparseRecord("held", telemetrytest.Base.Add(time.Second)))
	sinktest.Eventually(t, "the sink is down", s.e.Down)
	start := time.Now()
	const during = 1000
	for i := range during {
		if err := s.Write(ctx, telemetrytest.SparseRecord(fmt.Sprintf("during-%04d", i), telemetrytest.Base)); err != nil {
			t.Fatal(err)
		}
	}
	perWrite := time.Since(start) / during
	time.Sleep(400 * time.Millisecond) // several failed reconnection attempts
	if !s.e.Down() {
		t.Fatal("the sink is up while Postgres is unreachable")
	}
	if s.Dropped() != during {
		t.Fatalf("Dropped = %d, want %d", s.Dropped(), during)
	}

	proxy.start(t)
	sinktest.Eventually(t, "the sink is up", func() bool { return !s.e.Down() })
	_ = s.Write(ctx, telemetrytest.SparseRecord("after", telemetrytest.Base.Add(2*time.Second)))
	closeSink(t, s)
	if got := rd.ids(t); !slices.Equal(got, []string{"before", "held", "after"}) {
		t.Fatalf("stored %v, want before, held (written after recovery), after", got)
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.Text())
	}
	if n := logs.Count(slog.LevelInfo, "available again"); n != 1 {
		t.Fatalf("%d recovery notes, want 1:\n%s", n, logs.Text())
	}
	t.Logf("Write while Postgres is down: %s per call", perWrite)
}

func TestPostgresUnreachableAtOpenStartsDegradedAndResumesWhenItAppears(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	proxy := newProxy(t, hostOf(t, dsn)) // not forwarding yet: every connection is closed at once
	logs := &sinktest.LogCapture{}
	start := time.Now()
	s := openSink(t, withHost(t, dsn, proxy.addr), WithSchema(schema), WithLogger(slog.New(logs)),
		WithFlushInterval(5*time.Millisecond), WithBackoff(50*time.Millisecond, 100*time.Millisecond))
	openTook := time.Since(start)
	if !s.e.Down() {
		t.Fatal("Open against a closed port returned a healthy sink")
	}
	ctx := context.Background()
	start = time.Now()
	const n = 10000
	for i := range n {
		_ = s.Write(ctx, telemetrytest.SparseRecord(fmt.Sprintf("lost-%05d", i), telemetrytest.Base))
	}
	perWrite := time.Since(start) / n
	if s.Dropped() != n {
		t.Fatalf("Dropped = %d, want %d", s.Dropped(), n)
	}
	proxy.start(t)
	sinktest.Eventually(t, "the sink is up", func() bool { return !s.e.Down() })
	_ = s.Write(ctx, telemetrytest.SparseRecord("kept", telemetrytest.Base))
	closeSink(t, s)
	if got := (pgReader{dsn, schema}).ids(t); !slices.Equal(got, []string{"kept"}) {
		t.Fatalf("stored %v, want [kept]", got)
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.Text())
	}
	t.Logf("Open against a closed port: %s; Write while degraded: %s per call", openTook, perWrite)
}

func TestPostgresSinkSurvivesItsBackendsBeingTerminated(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	app := randomName("pgw_sink_")
	logs := &sinktest.LogCapture{}
	s := openSink(t, withHost(t, dsn, hostOf(t, dsn), "application_name", app), WithSchema(schema),
		WithLogger(slog.New(logs)), WithFlushInterval(2*time.Millisecond), WithBackoff(50*time.Millisecond, 100*time.Millisecond))
	rd := pgReader{dsn, schema}

	// A steady stream of writes keeps the connection busy (an idle pgx
	// connection would be pinged and replaced before use).
	var (
		written atomic.Int64
		stop    = make(chan struct{})
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			_ = s.Write(context.Background(), telemetrytest.SparseRecord(fmt.Sprintf("w%06d", i), time.Now()))
			written.Add(1)
		}
	})
	sinktest.Eventually(t, "rows arrive", func() bool { return len(rd.ids(t)) > 20 })
	terminated := 0
	for attempt := 0; attempt < 100 && terminated == 0; attempt++ {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&terminated)
		_ = conn.Close(ctx)
		time.Sleep(10 * time.Millisecond)
	}
	if terminated == 0 {
		t.Fatal("found no backend of the sink to terminate")
	}
	sinktest.Eventually(t, "the sink writes again after the termination", func() bool {
		return !s.e.Down() && logs.Count(slog.LevelWarn, "unavailable") > 0
	})
	before := len(rd.ids(t))
	sinktest.Eventually(t, "new rows arrive", func() bool { return len(rd.ids(t)) > before+20 })
	close(stop)
	wg.Wait()
	closeSink(t, s)
	stored := len(rd.ids(t))
	if int64(stored)+int64(s.Dropped()) != written.Load() {
		t.Fatalf("stored %d + dropped %d != written %d", stored, s.Dropped(), written.Load())
	}
	if n := logs.Count(slog.LevelWarn, "unavailable"); n != 1 {
		t.Fatalf("%d warnings, want 1:\n%s", n, logs.Text())
	}
	t.Logf("terminated %d backend(s): %d written, %d stored, %d dropped while down", terminated, written.Load(), stored, s.Dropped())
}

func TestPostgresSinkRecreatesADroppedTable(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	logs := &sinktest.LogCapture{}
	s := openSink(t, dsn, WithSchema(schema), WithLogger(slog.New(logs)), WithFlushInterval(2*time.Millisecond),
		WithBackoff(20*time.Millisecond, 50*time.Millisecond))
	rd := pgReader{dsn, schema}
	_ = s.Write(context.Background(), telemetrytest.SparseRecord("gone", telemetrytest.Base))
	sinktest.Eventually(t, "the first row is stored", func() bool { return len(rd.ids(t)) == 1 })
	exec(t, dsn, "DROP TABLE "+table(schema))
	_ = s.Write(context.Background(), telemetrytest.SparseRecord("held", telemetrytest.Base))
	sinktest.Eventually(t, "the table is back with the held row", func() bool {
		rows, err := rd.Rows(context.Background())
		return err == nil && len(rows) == 1 && rows[0].CallID == "held"
	})
	closeSink(t, s)
}

func TestPostgresSinkIsRegisteredAsThePostgresTelemetryBackend(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	f, ok := registry.Lookup(registry.KindTelemetry, "postgres")
	if !ok {
		t.Fatal(`no "postgres" telemetry factory registered`)
	}
	pinned := withHost(t, dsn, hostOf(t, dsn), "search_path", schema)
	v, err := f(registry.NewAssembly(core.GatewaySettings{TelemetryBackend: "postgres", TelemetryPGDSN: pinned}, slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	s, ok := v.(*Sink)
	if !ok {
		t.Fatalf("factory returned %T", v)
	}
	_ = s.Write(context.Background(), telemetrytest.SparseRecord("registered", telemetrytest.Base))
	closeSink(t, s)
	if got := (pgReader{dsn, schema}).ids(t); !slices.Equal(got, []string{"registered"}) {
		t.Fatalf("rows = %v", got)
	}
	if _, err := f(registry.NewAssembly(core.GatewaySettings{TelemetryBackend: "postgres"}, nil)); err == nil ||
		!strings.Contains(err.Error(), "PGW_TELEMETRY_PG_DSN") {
		t.Fatalf("empty DSN: %v", err)
	}
}

// blackhole accepts TCP connections and never answers, like a server
// behind a dropped route; it closes everything when the test ends.
func blackhole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String()
}

func TestAHangingServerNeverBlocksWriteAndCloseIsBounded(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	logs := &sinktest.LogCapture{}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := Open(ctx, withHost(t, dsn, blackhole(t)), WithLogger(slog.New(logs)), WithOpTimeout(300*time.Millisecond),
		WithBackoff(50*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatalf("Open against a hanging server: %v", err)
	}
	openTook := time.Since(start)
	if !s.e.Down() {
		t.Fatal("the sink is up against a server that never answers")
	}
	start = time.Now()
	for i := range 1000 {
		if err := s.Write(context.Background(), telemetrytest.SparseRecord(fmt.Sprintf("r%d", i), telemetrytest.Base)); err != nil {
			t.Fatal(err)
		}
	}
	writes := time.Since(start)
	time.Sleep(200 * time.Millisecond) // a recovery attempt is hanging now
	start = time.Now()
	closeCtx, closeCancel := context.WithTimeout(context.Background(), time.Second)
	defer closeCancel()
	_ = s.Close(closeCtx)
	closeTook := time.Since(start)
	if openTook > 2*time.Second || writes > 500*time.Millisecond || closeTook > 2*time.Second {
		t.Fatalf("Open %s, 1000 writes %s, Close %s: something waited on the hanging server", openTook, writes, closeTook)
	}
	if s.Dropped() != 1000 || logs.Count(slog.LevelWarn, "unavailable") != 1 {
		t.Fatalf("Dropped = %d; logs:\n%s", s.Dropped(), logs.Text())
	}
	t.Logf("hanging server: Open %s, 1000 writes %s, Close %s", openTook, writes, closeTook)
}

func BenchmarkSinkWrite(b *testing.B) {
	dsn := os.Getenv("PGW_TEST_PG_DSN")
	if dsn == "" {
		dsn = defaultTestDSN
	}
	schema := randomName("pgw_bench_")
	s, err := Open(context.Background(), dsn, WithSchema(schema))
	if err != nil {
		b.Skipf("Postgres: %v", err)
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
	conn, err := pgx.Connect(context.Background(), dsn)
	if err == nil {
		_, _ = conn.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
		_ = conn.Close(context.Background())
	}
}

// A table made before the degraded and queue_wait_ms columns existed gets
// them on open, and keeps its rows.
func TestOpenAddsTheAddedColumnsToAnOlderTable(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	stmts := schemaSQL(schema)
	old := strings.Replace(stmts[len(stmts)-4], ",\n\tdegraded text NOT NULL DEFAULT ''", "", 1)
	old = strings.Replace(old, ",\n\tqueue_wait_ms double precision NOT NULL DEFAULT 0", "", 1)
	if strings.Contains(old, "degraded") || strings.Contains(old, "queue_wait_ms") {
		t.Fatalf("setup: the old schema still has an added column: %s", old)
	}
	exec(t, dsn, old)
	exec(t, dsn, "INSERT INTO "+table(schema)+" (call_id, created_at) VALUES ('before', '2025-01-01T00:00:00Z')")
	s := openSink(t, dsn, WithSchema(schema))
	r := telemetrytest.SparseRecord("after", telemetrytest.Base)
	r.Degraded, r.QueueWaitMS = "stale_cache", 250
	if err := s.Write(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	closeSink(t, s)
	rows, err := pgReader{dsn: dsn, schema: schema}.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %v, %v; want the old row and the new one", rows, err)
	}
	for _, row := range rows {
		if want := map[string]string{"before": "", "after": "stale_cache"}[row.CallID]; row.Degraded != want {
			t.Errorf("%s: degraded = %q, want %q", row.CallID, row.Degraded, want)
		}
		if want := map[string]float64{"before": 0, "after": 250}[row.CallID]; row.QueueWaitMS != want {
			t.Errorf("%s: queue_wait_ms = %v, want %v", row.CallID, row.QueueWaitMS, want)
		}
	}
}

// A table of the design's 18 frozen columns alone (made before scope and
// created_at were added, or by an administrator from the design) gets every
// added column on open: its rows keep their values, and new rows are
// written in full instead of failing batch after batch.
func TestOpenAddsEveryAddedColumnToATableOfTheFrozenColumns(t *testing.T) {
	t.Parallel()
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	stmts := schemaSQL(schema)
	old := stmts[len(stmts)-4]
	for _, c := range []string{
		",\n\tscope text NOT NULL DEFAULT ''",
		",\n\tcreated_at timestamptz NOT NULL DEFAULT now()",
		",\n\tdegraded text NOT NULL DEFAULT ''",
		",\n\tqueue_wait_ms double precision NOT NULL DEFAULT 0",
	} {
		old = strings.Replace(old, c, "", 1)
	}
	for _, c := range []string{"scope", "created_at", "degraded", "queue_wait_ms"} {
		if strings.Contains(old, c) {
			t.Fatalf("setup: the old schema still has %s:\n%s", c, old)
		}
	}
	exec(t, dsn, old)
	exec(t, dsn, "INSERT INTO "+table(schema)+" (call_id, model) VALUES ('before', 'm-old')")
	logs := &sinktest.LogCapture{}
	s := openSink(t, dsn, WithSchema(schema), WithLogger(slog.New(logs)))
	want := telemetrytest.FullRecord("after", time.Now().Add(time.Hour), false)
	if err := s.Write(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	closeSink(t, s)
	rows, err := pgReader{dsn: dsn, schema: schema}.Rows(context.Background())
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows = %v, %v; want the old row and the new one", rows, err)
	}
	if old := rows[0]; old.CallID != "before" || old.Model != "m-old" || old.Scope != "" {
		t.Errorf("old row = %+v, want its model kept and no scope", old)
	}
	if d := telemetrytest.Diff(want, rows[1]); d != "" {
		t.Errorf("new row differs:\n%s", d)
	}
	if s.Dropped() != 0 || logs.Count(slog.LevelWarn, "") != 0 {
		t.Errorf("Dropped = %d; logs:\n%s", s.Dropped(), logs.Text())
	}
}
