package pgsink

import (
	"context"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Hooks for the external end-to-end tests of package pgsink_test.

// PostgresDSN returns the test Postgres DSN or skips (see testDSN).
func PostgresDSN(t *testing.T) string { return testDSN(t) }

// FreshSchema returns a new schema dropped at the end of the test.
func FreshSchema(t *testing.T, dsn string) string { return freshSchema(t, dsn, true) }

// PinnedDSN returns dsn with its host replaced by addr ("" keeps it) and
// search_path set to schema.
func PinnedDSN(t *testing.T, dsn, addr, schema string) string {
	if addr == "" {
		addr = hostOf(t, dsn)
	}
	return withHost(t, dsn, addr, "search_path", schema)
}

// ClosedPortProxy returns a local port that closes every connection at once
// until start is called, after which it forwards to the test Postgres.
func ClosedPortProxy(t *testing.T, dsn string) (addr string, start func()) {
	p := newProxy(t, hostOf(t, dsn))
	return p.addr, func() { p.start(t) }
}

// ReadRows reads every llm_calls row of schema.
func ReadRows(t *testing.T, dsn, schema string) []core.TelemetryRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := pgReader{dsn, schema}.Rows(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TryReadRows is ReadRows returning the error (e.g. while the table does
// not exist yet).
func TryReadRows(dsn, schema string) ([]core.TelemetryRecord, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return pgReader{dsn, schema}.Rows(ctx)
}
