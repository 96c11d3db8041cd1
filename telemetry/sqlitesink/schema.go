package sqlitesink

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// TableName is the table every row goes to.
const TableName = "llm_calls"

// TimeLayout is how created_at is stored: UTC with microseconds and a fixed
// width, so that text order is time order and SQLite's date functions
// (date(created_at), strftime, julianday) read it.
const TimeLayout = "2006-01-02T15:04:05.000000Z07:00"

// schemaSQL creates the table and its indexes when they are missing.
var schemaSQL = []string{
	`CREATE TABLE IF NOT EXISTS llm_calls (
	call_id            TEXT    NOT NULL PRIMARY KEY,
	parent_call_id     TEXT    NOT NULL DEFAULT '',
	session_id         TEXT    NOT NULL DEFAULT '',
	model              TEXT    NOT NULL DEFAULT '',
	provider           TEXT    NOT NULL DEFAULT '',
	source_name        TEXT    NOT NULL DEFAULT '',
	messages           TEXT    NOT NULL DEFAULT '',
	response           TEXT    NOT NULL DEFAULT '',
	thinking           TEXT    NOT NULL DEFAULT '',
	prompt_tokens      INTEGER NOT NULL DEFAULT 0,
	completion_tokens  INTEGER NOT NULL DEFAULT 0,
	usage_source       TEXT    NOT NULL DEFAULT '',
	latency_ms         REAL    NOT NULL DEFAULT 0,
	ttft_ms            REAL,
	max_inter_token_ms REAL,
	cache_hit          INTEGER NOT NULL DEFAULT 0 CHECK (cache_hit IN (0, 1)),
	error              TEXT    NOT NULL DEFAULT '',
	cost               REAL,
	scope              TEXT    NOT NULL DEFAULT '',
	created_at         TEXT    NOT NULL,
	degraded           TEXT    NOT NULL DEFAULT '',
	queue_wait_ms      REAL    NOT NULL DEFAULT 0
)`,
	`CREATE INDEX IF NOT EXISTS llm_calls_created_at_idx ON llm_calls (created_at)`,
	`CREATE INDEX IF NOT EXISTS llm_calls_source_name_idx ON llm_calls (source_name, created_at)`,
	`CREATE INDEX IF NOT EXISTS llm_calls_session_id_idx ON llm_calls (session_id) WHERE session_id <> ''`,
}

// addedColumns are the columns added to the design's 18 frozen ones, with
// their definitions: a table made before them gets them with ALTER TABLE,
// then runs fill, when set, over its rows. The rows of a table without
// created_at get the time of the migration (SQLite's 'now' has milliseconds:
// the microseconds are zeros, so that the text keeps TimeLayout's width).
var addedColumns = []struct{ name, def, fill string }{
	{"scope", "TEXT NOT NULL DEFAULT ''", ""},
	{"created_at", "TEXT NOT NULL DEFAULT ''", "UPDATE " + TableName + " SET created_at = strftime('%Y-%m-%dT%H:%M:%f000Z', 'now')"},
	{"degraded", "TEXT NOT NULL DEFAULT ''", ""},
	{"queue_wait_ms", "REAL NOT NULL DEFAULT 0", ""},
}

// insertSQL writes one row; an existing call_id keeps its first row.
const insertSQL = `INSERT INTO llm_calls (
	call_id, parent_call_id, session_id, model, provider, source_name,
	messages, response, thinking, prompt_tokens, completion_tokens, usage_source,
	latency_ms, ttft_ms, max_inter_token_ms, cache_hit, error, cost,
	scope, created_at, degraded, queue_wait_ms
) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (call_id) DO NOTHING`

// args returns rec's column values in insertSQL's order.
func args(rec *core.TelemetryRecord) []any {
	cacheHit := 0
	if rec.CacheHit {
		cacheHit = 1
	}
	return []any{
		rec.CallID, rec.ParentCallID, rec.SessionID, rec.Model, rec.Provider, rec.SourceName,
		rec.Messages, rec.Response, rec.Thinking, int64(rec.PromptTokens), int64(rec.CompletionTokens), rec.UsageSource,
		rec.LatencyMS, nullable(rec.TTFTMS), nullable(rec.MaxInterTokenMS), cacheHit, rec.Error, nullable(rec.Cost),
		rec.Scope, rec.CreatedAt.UTC().Format(TimeLayout), rec.Degraded, rec.QueueWaitMS,
	}
}

// nullable turns a nil pointer into SQL NULL.
func nullable(p *float64) any {
	if p == nil {
		return nil
	}
	return *p
}

// ParseTime reads a created_at value written by the sink.
func ParseTime(s string) (time.Time, error) { return time.Parse(time.RFC3339Nano, s) }
