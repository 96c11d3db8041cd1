// Package sqlitesink is the SQLite telemetry sink: every record becomes one
// row of the llm_calls table in a local database file, written with the pure
// Go driver modernc.org/sqlite (no cgo).
//
// # Enabling
//
// Importing the package registers it as the "sqlite" telemetry backend:
//
//	import _ "github.com/polygateway/polygateway/telemetry/sqlitesink"
//
// and then PGW_TELEMETRY_BACKEND=sqlite with PGW_TELEMETRY_SQLITE_PATH=path
// selects it; the client closes the sink (flushing it) when it closes. The
// driver takes minutes to compile and is linked only into programs that
// import this package. Open builds a sink directly.
//
// # Table
//
// Open creates the parent directory, opens the file in WAL mode with a busy
// timeout, and creates the table llm_calls (the 18 frozen columns plus scope,
// created_at, degraded and queue_wait_ms; a table that lacks any of the four
// gets it) with indexes on created_at, (source_name, created_at) and
// session_id when they are missing. created_at is stored as UTC text with
// microseconds (TimeLayout), which SQLite's date functions read. Inserts are
// idempotent on call_id (ON CONFLICT DO NOTHING): the first row wins.
//
// # Batching and degradation
//
// Write never blocks: it puts the record into a bounded queue (WithQueueSize)
// or, when the queue is full, drops it and counts it (Dropped). One goroutine
// drains the queue into transactions of up to WithBatchSize rows, writing a
// partial batch after WithFlushInterval. When a batch fails because of a row
// (a constraint, a type, a size), the batch is retried row by row and only the
// bad row is dropped. When it fails for any other reason (the file is locked
// beyond the busy timeout, unwritable, closed, I/O error), the sink warns
// once through the WithLogger logger, drops and counts every further Write,
// and retries with exponential backoff (WithBackoff), reopening the file
// each time; the failed batch and what was already queued are written once it
// succeeds. Close writes everything still queued.
package sqlitesink
