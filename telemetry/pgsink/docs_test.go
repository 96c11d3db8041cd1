package pgsink

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
)

func TestDocQueriesRunOnPostgres(t *testing.T) {
	t.Parallel()
	queries := sinktest.DocQueries(t, "postgres")
	if len(queries) != 4 {
		t.Fatalf("%d Postgres queries in docs/telemetry.md, want 4", len(queries))
	}
	dsn := testDSN(t)
	schema := freshSchema(t, dsn, true)
	s := openSink(t, dsn, WithSchema(schema))
	for _, r := range sinktest.SampleRecords() {
		_ = s.Write(context.Background(), r)
	}
	closeSink(t, s)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET search_path TO "+schema); err != nil {
		t.Fatal(err)
	}
	p95 := map[int]float64{}
	for i, q := range queries {
		rows, err := conn.Query(ctx, q)
		if err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		n := 0
		for rows.Next() {
			n++
			if i >= 2 {
				vals, err := rows.Values()
				if err != nil {
					t.Fatal(err)
				}
				if vals[0] == "src_1" {
					p95[i] = vals[2].(float64)
				}
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			t.Fatalf("%v\n%s", err, q)
		}
		if n == 0 {
			t.Fatalf("no rows from\n%s", q)
		}
	}
	// percentile_cont interpolates, the nearest rank does not; both near 95.
	for i, v := range p95 {
		if v < 90 || v > 100 {
			t.Errorf("query %d: p95 of src_1 = %v", i, v)
		}
	}
	if len(p95) != 2 {
		t.Fatalf("p95 values = %v", p95)
	}
	t.Logf("p95 of src_1: percentile_cont %v, nearest rank %v", p95[2], p95[3])
}
