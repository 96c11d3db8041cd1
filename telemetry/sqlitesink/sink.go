package sqlitesink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry/internal/sinkengine"
)

// Sink writes telemetry records to the llm_calls table of a SQLite file. It
// is safe for concurrent use. Write only enqueues; one background goroutine
// writes batches in transactions.
type Sink struct {
	path string
	st   *sqliteStore // the engine's store, kept for the tests
	e    *sinkengine.Engine
}

var _ core.TelemetrySink = (*Sink)(nil)

// Open opens (creating it and its parent directory when missing) the SQLite
// database at path in WAL mode, creates the llm_calls table and its indexes
// when missing, and starts the writer. An error means the file cannot be
// created, opened or written; the sink is then not usable.
func Open(path string, opts ...Option) (*Sink, error) {
	if path == "" {
		return nil, errors.New("polygateway: telemetry: sqlite: empty database path")
	}
	cfg := resolve(opts)
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("polygateway: telemetry: sqlite: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("polygateway: telemetry: sqlite: create directory: %w", err)
	}
	st := &sqliteStore{dsn: dsn(abs, cfg)}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.OpTimeout)
	defer cancel()
	if err := st.Recover(ctx); err != nil {
		_ = st.Close()
		return nil, fmt.Errorf("polygateway: telemetry: sqlite: open %s: %w", abs, err)
	}
	return &Sink{path: abs, st: st, e: sinkengine.New("sqlite", st, cfg.Settings, nil)}, nil
}

// dsn is the driver's name for the file: a file: URI (so that any character
// in the path is safe) with the per-connection pragmas.
func dsn(abs string, cfg settings) string {
	u := url.URL{Scheme: "file", Path: abs}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(cfg.busyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Set("_txlock", "immediate")
	return u.String() + "?" + q.Encode()
}

// Path returns the absolute path of the database file.
func (s *Sink) Path() string { return s.path }

// Write enqueues rec and returns at once; it never waits for the database.
// A zero CreatedAt is set to the time of the call; RawMessages are rendered
// into Messages by the writer, off the call path. When the queue is full,
// or while the database is unavailable, the record is dropped and counted in
// Dropped (and nil is returned). After Close it returns telemetry.ErrClosed.
func (s *Sink) Write(_ context.Context, rec core.TelemetryRecord) error { return s.e.Write(rec) }

// Close writes everything queued, stops the writer and closes the database.
// It waits for the writer; ctx bounds the final writes (records that could
// not be written are counted in Dropped and reported in the error). It is
// idempotent and safe to call concurrently.
func (s *Sink) Close(ctx context.Context) error { return s.e.Close(ctx) }

// Dropped returns how many records were accepted by Write but not stored: the
// queue was full, the database was unavailable, the database refused the
// row, or Close could not write it.
func (s *Sink) Dropped() uint64 { return s.e.Dropped() }

// sqliteStore is the engine's store (sinkengine.Store) over database/sql and
// modernc.org/sqlite.
type sqliteStore struct {
	dsn string
	db  *sql.DB
}

var _ sinkengine.Store = (*sqliteStore)(nil)

// open replaces the database handle by a fresh one.
func (st *sqliteStore) open() error {
	if st.db != nil {
		_ = st.db.Close()
		st.db = nil
	}
	db, err := sql.Open("sqlite", st.dsn)
	if err != nil {
		return err
	}
	// One writer goroutine: one connection keeps the pragmas and the lock
	// order simple.
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	st.db = db
	return nil
}

// Recover reopens the database and creates the schema inside an immediate
// transaction, which also proves that the write lock can be taken.
func (st *sqliteStore) Recover(ctx context.Context) error {
	if err := st.open(); err != nil {
		return err
	}
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, schemaSQL[0]); err != nil {
		return err
	}
	// An older table gets the added columns before the indexes name them.
	if err := addMissingColumns(ctx, tx); err != nil {
		return err
	}
	for _, q := range schemaSQL[1:] {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Insert writes recs in one transaction.
func (st *sqliteStore) Insert(ctx context.Context, recs []core.TelemetryRecord) error {
	if st.db == nil {
		return errors.New("database not open")
	}
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, insertSQL)
	if err != nil {
		return err
	}
	defer func() { _ = stmt.Close() }()
	for i := range recs {
		if _, err := stmt.ExecContext(ctx, args(&recs[i])...); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// RowLevel reports errors caused by a row's content: a violated constraint
// (e.g. a NaN latency, which SQLite turns into NULL), a type mismatch or a
// value beyond SQLite's size limit.
func (st *sqliteStore) RowLevel(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_CONSTRAINT, sqlite3.SQLITE_MISMATCH, sqlite3.SQLITE_TOOBIG:
		return true
	}
	return false
}

// Close closes the database handle.
func (st *sqliteStore) Close() error {
	if st.db == nil {
		return nil
	}
	err := st.db.Close()
	st.db = nil
	return err
}

// addMissingColumns brings a table made by an older version up to the
// current columns.
func addMissingColumns(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, "SELECT name FROM pragma_table_info('"+TableName+"')")
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return err
		}
		have[name] = true
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range addedColumns {
		if have[c.name] {
			continue
		}
		if _, err := tx.ExecContext(ctx, "ALTER TABLE "+TableName+" ADD COLUMN "+c.name+" "+c.def); err != nil {
			return err
		}
		if c.fill == "" {
			continue
		}
		if _, err := tx.ExecContext(ctx, c.fill); err != nil {
			return err
		}
	}
	return nil
}
