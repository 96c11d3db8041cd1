package pgsink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry/internal/sinkengine"
)

// Sink writes telemetry records to the llm_calls table of a Postgres
// database through a pgx connection pool. It is safe for concurrent use.
// Write only enqueues; one background goroutine writes batches.
type Sink struct {
	e *sinkengine.Engine
}

var _ core.TelemetrySink = (*Sink)(nil)

// Open parses dsn (a postgres:// URL or key=value string, as pgx reads it),
// connects, creates the llm_calls table and its indexes when missing, and
// starts the writer.
//
// An invalid DSN is an error, and so is a server that answers but refuses
// the sink (authentication failed, unknown database, no permission to create
// the table): those are configuration mistakes. A server that cannot be
// reached is not: Open then returns a sink that starts degraded (one warning,
// Writes dropped and counted) and connects in the background with backoff.
// ctx bounds the first connection attempt (and WithOpTimeout when ctx has no
// deadline); the sink registered for PGW_TELEMETRY_BACKEND=postgres gives it
// 5 s. The pool holds one connection (one writer needs no more) unless the
// DSN sets pool_max_conns.
func Open(ctx context.Context, dsn string, opts ...Option) (*Sink, error) {
	cfg := resolve(opts)
	pcfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("polygateway: telemetry: postgres: invalid DSN: %w", err)
	}
	if !strings.Contains(dsn, "pool_max_conns") {
		// One writer goroutine needs one connection.
		pcfg.MaxConns = 1
	}
	pcfg.MinConns = 0
	pool, err := pgxpool.NewWithConfig(context.Background(), pcfg)
	if err != nil {
		return nil, fmt.Errorf("polygateway: telemetry: postgres: %w", err)
	}
	st := &pgStore{pool: pool, schema: cfg.schema, insertSQL: insertSQL(cfg.schema), schemaSQL: schemaSQL(cfg.schema)}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.OpTimeout)
		defer cancel()
	}
	err = st.Recover(ctx)
	if err != nil && refusal(err) {
		pool.Close()
		return nil, fmt.Errorf("polygateway: telemetry: postgres: %w", err)
	}
	// Unreachable (err != nil): the engine starts degraded and warns once.
	return &Sink{e: sinkengine.New("postgres", st, cfg.Settings, err)}, nil
}

// refusal reports a server's answer that no retry will change: bad
// credentials, a missing database, a missing permission, a syntax or
// definition problem.
func refusal(err error) bool { return sqlstateClassIn(err, "28", "3D", "42") }

// sqlstateClassIn reports whether err is a server error whose SQLSTATE
// class (its first two characters) is one of classes.
func sqlstateClassIn(err error, classes ...string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && len(pe.Code) >= 2 && slices.Contains(classes, pe.Code[:2])
}

// Write enqueues rec and returns at once; it never waits for the database.
// A zero CreatedAt is set to the time of the call; RawMessages are rendered
// into Messages by the writer, off the call path. When the queue is full,
// or while the database is unavailable, the record is dropped and counted in
// Dropped (and nil is returned). After Close it returns telemetry.ErrClosed.
func (s *Sink) Write(_ context.Context, rec core.TelemetryRecord) error { return s.e.Write(rec) }

// Close writes everything queued, stops the writer and closes the pool. It
// waits for the writer; ctx bounds the final writes (records that could not
// be written are counted in Dropped and reported in the error). It is
// idempotent and safe to call concurrently.
func (s *Sink) Close(ctx context.Context) error { return s.e.Close(ctx) }

// Dropped returns how many records were accepted by Write but not stored: the
// queue was full, the database was unavailable, the database refused the
// row, or Close could not write it.
func (s *Sink) Dropped() uint64 { return s.e.Dropped() }

// pgStore is the engine's store (sinkengine.Store) over a pgx pool.
type pgStore struct {
	pool      *pgxpool.Pool
	schema    string
	insertSQL string
	schemaSQL []string
}

var _ sinkengine.Store = (*pgStore)(nil)

// Recover checks that the table exists, creating it when missing. The
// creation runs in a transaction holding an advisory lock on the table's
// name, so that concurrent creators (many processes starting at once)
// serialise instead of failing on the catalog's unique indexes. When the
// table already exists no DDL runs, so a role without CREATE permission can
// write to a table made by someone else.
func (st *pgStore) Recover(ctx context.Context) error {
	name := table(st.schema)
	var exists bool
	if err := st.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return st.addMissingColumns(ctx, name)
	}
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "polygateway.llm_calls:"+name); err != nil {
			return err
		}
		for _, q := range st.schemaSQL {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}

// Insert writes recs with one INSERT … SELECT FROM unnest(…) statement:
// one round trip, atomic, one prepared plan for every batch size.
func (st *pgStore) Insert(ctx context.Context, recs []core.TelemetryRecord) error {
	_, err := st.pool.Exec(ctx, st.insertSQL, batchArgs(recs)...)
	return err
}

// RowLevel reports errors caused by a row's content, which the server
// reports with SQLSTATE class 22 (data exception: e.g. a timestamp out of
// range), 23 (integrity constraint) or 54 (program limit: e.g. an
// indexed value too large for its index).
func (st *pgStore) RowLevel(err error) bool { return sqlstateClassIn(err, "22", "23", "54") }

// Close closes the pool.
func (st *pgStore) Close() error {
	st.pool.Close()
	return nil
}

// addMissingColumns adds the columns a table made by an older version
// lacks. It runs DDL only when a column is missing.
func (st *pgStore) addMissingColumns(ctx context.Context, name string) error {
	missing := false
	for _, c := range columns[len(columns)-addedColumns:] {
		var has bool
		if err := st.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_attribute
			WHERE attrelid = to_regclass($1) AND attname = $2 AND NOT attisdropped)`, name, c.name).Scan(&has); err != nil {
			return err
		}
		missing = missing || !has
	}
	if !missing {
		return nil
	}
	return pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext($1))", "polygateway.llm_calls:"+name); err != nil {
			return err
		}
		for _, q := range alterSQL(st.schema) {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
}
