package pgsink

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/polygateway/polygateway/core"
)

// TableName is the table every row goes to.
const TableName = "llm_calls"

// columns lists the table's columns with their Postgres types, in order.
var columns = []struct{ name, typ, constraint string }{
	{"call_id", "text", "PRIMARY KEY"},
	{"parent_call_id", "text", "NOT NULL DEFAULT ''"},
	{"session_id", "text", "NOT NULL DEFAULT ''"},
	{"model", "text", "NOT NULL DEFAULT ''"},
	{"provider", "text", "NOT NULL DEFAULT ''"},
	{"source_name", "text", "NOT NULL DEFAULT ''"},
	{"messages", "text", "NOT NULL DEFAULT ''"},
	{"response", "text", "NOT NULL DEFAULT ''"},
	{"thinking", "text", "NOT NULL DEFAULT ''"},
	{"prompt_tokens", "bigint", "NOT NULL DEFAULT 0"},
	{"completion_tokens", "bigint", "NOT NULL DEFAULT 0"},
	{"usage_source", "text", "NOT NULL DEFAULT ''"},
	{"latency_ms", "double precision", "NOT NULL DEFAULT 0"},
	{"ttft_ms", "double precision", ""},
	{"max_inter_token_ms", "double precision", ""},
	{"cache_hit", "boolean", "NOT NULL DEFAULT false"},
	{"error", "text", "NOT NULL DEFAULT ''"},
	{"cost", "double precision", ""},
	{"scope", "text", "NOT NULL DEFAULT ''"},
	{"created_at", "timestamptz", "NOT NULL DEFAULT now()"},
	{"degraded", "text", "NOT NULL DEFAULT ''"},
	{"queue_wait_ms", "double precision", "NOT NULL DEFAULT 0"},
}

// addedColumns are the columns added to the design's 18 frozen ones (the
// tail of columns): a table made before them gets them with ALTER TABLE (the
// rows of a table without created_at get the time of the migration).
const addedColumns = 4

// names returns the column names joined with sep.
func names(sep string) string {
	out := make([]string, len(columns))
	for i, c := range columns {
		out[i] = c.name
	}
	return strings.Join(out, sep)
}

// table returns the quoted, possibly schema-qualified table name.
func table(schema string) string {
	if schema == "" {
		return pgx.Identifier{TableName}.Sanitize()
	}
	return pgx.Identifier{schema, TableName}.Sanitize()
}

// alterSQL returns the statements that add the added columns to a table
// made before them.
func alterSQL(schema string) []string {
	var out []string
	for _, c := range columns[len(columns)-addedColumns:] {
		out = append(out, "ALTER TABLE "+table(schema)+" ADD COLUMN IF NOT EXISTS "+c.name+" "+c.typ+" "+c.constraint)
	}
	return out
}

// schemaSQL returns the statements that create the table and its indexes
// when they are missing.
func schemaSQL(schema string) []string {
	t := table(schema)
	var b strings.Builder
	b.WriteString("CREATE TABLE IF NOT EXISTS " + t + " (\n")
	for i, c := range columns {
		b.WriteString("\t" + c.name + " " + c.typ)
		if c.constraint != "" {
			b.WriteString(" " + c.constraint)
		}
		if i < len(columns)-1 {
			b.WriteString(",")
		}
		b.WriteString("\n")
	}
	b.WriteString(")")
	var stmts []string
	if schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize())
	}
	return append(stmts, b.String(),
		"CREATE INDEX IF NOT EXISTS llm_calls_created_at_idx ON "+t+" (created_at)",
		"CREATE INDEX IF NOT EXISTS llm_calls_source_name_idx ON "+t+" (source_name, created_at)",
		"CREATE INDEX IF NOT EXISTS llm_calls_session_id_idx ON "+t+" (session_id) WHERE session_id <> ''",
	)
}

// insertSQL returns the batch insert: one statement whatever the batch size,
// each column sent as one array parameter and unnested in order, so that of
// two rows with the same call_id in one batch the first wins, as it does
// against rows already stored (ON CONFLICT DO NOTHING).
func insertSQL(schema string) string {
	var params []string
	for i, c := range columns {
		params = append(params, "$"+strconv.Itoa(i+1)+"::"+c.typ+"[]")
	}
	return "INSERT INTO " + table(schema) + " (" + names(", ") + ")\n" +
		"SELECT " + names(", ") + " FROM unnest(" + strings.Join(params, ", ") + ")\n" +
		"WITH ORDINALITY AS r(" + names(", ") + ", ord) ORDER BY ord\n" +
		"ON CONFLICT (call_id) DO NOTHING"
}

// text returns s as Postgres text can hold it: each NUL byte and each
// invalid UTF-8 sequence (an upstream's answer or error may carry them)
// replaced by U+FFFD, so that the row is stored rather than refused.
func text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// batchArgs returns the column arrays of recs in insertSQL's order.
func batchArgs(recs []core.TelemetryRecord) []any {
	n := len(recs)
	var (
		callID, parent, session, model, provider, source = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		messages, response, thinking, usage, errText     = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		scope, degraded                                  = make([]string, n), make([]string, n)
		prompt, completion                               = make([]int64, n), make([]int64, n)
		latency, queueWait                               = make([]float64, n), make([]float64, n)
		ttft, gap, cost                                  = make([]*float64, n), make([]*float64, n), make([]*float64, n)
		cacheHit                                         = make([]bool, n)
		createdAt                                        = make([]time.Time, n)
	)
	for i := range recs {
		r := &recs[i]
		callID[i], parent[i], session[i], model[i], provider[i], source[i] = text(r.CallID), text(r.ParentCallID), text(r.SessionID), text(r.Model), text(r.Provider), text(r.SourceName)
		messages[i], response[i], thinking[i], usage[i], errText[i] = text(r.Messages), text(r.Response), text(r.Thinking), text(r.UsageSource), text(r.Error)
		scope[i] = text(r.Scope)
		prompt[i], completion[i] = int64(r.PromptTokens), int64(r.CompletionTokens)
		latency[i], ttft[i], gap[i], cost[i] = r.LatencyMS, r.TTFTMS, r.MaxInterTokenMS, r.Cost
		cacheHit[i], createdAt[i] = r.CacheHit, r.CreatedAt
		degraded[i], queueWait[i] = text(r.Degraded), r.QueueWaitMS
	}
	return []any{callID, parent, session, model, provider, source, messages, response, thinking,
		prompt, completion, usage, latency, ttft, gap, cacheHit, errText, cost, scope, createdAt, degraded, queueWait}
}
