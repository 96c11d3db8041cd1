// Package pgsink is the Postgres telemetry sink: every record becomes one
// row of the llm_calls table, written through a github.com/jackc/pgx/v5
// connection pool.
//
// # Enabling
//
// Importing the package registers it as the "postgres" telemetry backend:
//
//	import _ "github.com/polygateway/polygateway/telemetry/pgsink"
//
// and then PGW_TELEMETRY_BACKEND=postgres with PGW_TELEMETRY_PG_DSN=dsn
// (e.g. postgres://user:pass@host:5432/db?sslmode=disable) selects it; the
// client closes the sink (flushing it) when it closes. Open builds a sink
// directly; WithSchema, or search_path in the DSN, picks the schema.
//
// # Table
//
// Open creates the table llm_calls (the 18 frozen columns plus scope,
// created_at, degraded and queue_wait_ms, typed text, bigint, double
// precision, boolean and timestamptz; a table that lacks any of the four
// gets it)
// with indexes on created_at, (source_name, created_at) and session_id when
// it is missing. The creation holds a transaction-level advisory lock, so
// many processes starting at once do not trip over each other. Inserts are
// idempotent on call_id (ON CONFLICT (call_id) DO NOTHING): the first row
// wins.
//
// # Batching and degradation
//
// Write never blocks: it puts the record into a bounded queue (WithQueueSize)
// or, when the queue is full, drops it and counts it (Dropped). One goroutine
// drains the queue in batches of up to WithBatchSize records, writing a
// partial batch after WithFlushInterval. A batch is one statement,
// INSERT … SELECT FROM unnest($1::text[], …) WITH ORDINALITY: one round trip,
// atomic, and one prepared plan whatever the batch size.
//
// Text Postgres cannot hold — a NUL byte, invalid UTF-8, which an upstream's
// answer or error may carry — is stored with U+FFFD in their place: the row
// is kept. When a batch fails because of a row (SQLSTATE class 22, 23 or 54:
// a value out of range, a constraint, an over-long indexed value), it is
// retried row by row and only the bad row is dropped. When it fails for
// any other reason (connection refused or cut, server shutting down, table
// dropped), the sink warns once through the WithLogger logger, drops and
// counts every further Write, and retries with exponential backoff
// (WithBackoff), re-creating the table if needed; the failed batch and what
// was already queued are written once it succeeds. A server that cannot be
// reached at Open is handled the same way. Close writes everything still
// queued.
package pgsink
