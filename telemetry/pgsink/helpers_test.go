package pgsink

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/telemetry/internal/sinktest"
)

const defaultTestDSN = "postgres://root@127.0.0.1:5432/test?sslmode=disable"

// testDSN returns the Postgres of the tests (PGW_TEST_PG_DSN), skipping the
// test when it does not answer, or failing it when PGW_REQUIRE_SERVICES=1.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("PGW_TEST_PG_DSN")
	if dsn == "" {
		dsn = defaultTestDSN
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err == nil {
		err = conn.Ping(ctx)
		_ = conn.Close(context.Background())
	}
	if err != nil {
		msg := "Postgres is not available at PGW_TEST_PG_DSN (default " + defaultTestDSN + "): " + err.Error()
		if os.Getenv("PGW_REQUIRE_SERVICES") == "1" {
			t.Fatal(msg + " (PGW_REQUIRE_SERVICES=1)")
		}
		t.Skip(msg + "; set PGW_REQUIRE_SERVICES=1 to make this a failure")
	}
	return dsn
}

// randomName returns prefix followed by random hex.
func randomName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

// exec runs one statement on a connection of its own.
func exec(t *testing.T, dsn, sql string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// freshSchema returns the name of a new schema that is dropped when the
// test ends. When create is false only the name is reserved for cleanup.
func freshSchema(t *testing.T, dsn string, create bool) string {
	t.Helper()
	name := randomName("pgw_test_")
	if create {
		exec(t, dsn, "CREATE SCHEMA "+name)
	}
	t.Cleanup(func() { exec(t, dsn, "DROP SCHEMA IF EXISTS "+name+" CASCADE") })
	return name
}

// pgReader reads the llm_calls table of a schema over its own connection.
type pgReader struct{ dsn, schema string }

func (r pgReader) Rows(ctx context.Context) ([]core.TelemetryRecord, error) {
	conn, err := pgx.Connect(ctx, r.dsn)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.Background())
	rows, err := conn.Query(ctx, `SELECT call_id, parent_call_id, session_id, model, provider, source_name,
		messages, response, thinking, prompt_tokens, completion_tokens, usage_source,
		latency_ms, ttft_ms, max_inter_token_ms, cache_hit, error, cost, scope, created_at, degraded, queue_wait_ms
		FROM `+table(r.schema)+` ORDER BY created_at, call_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (core.TelemetryRecord, error) {
		var (
			rec                core.TelemetryRecord
			prompt, completion int64
		)
		err := row.Scan(&rec.CallID, &rec.ParentCallID, &rec.SessionID, &rec.Model, &rec.Provider, &rec.SourceName,
			&rec.Messages, &rec.Response, &rec.Thinking, &prompt, &completion, &rec.UsageSource,
			&rec.LatencyMS, &rec.TTFTMS, &rec.MaxInterTokenMS, &rec.CacheHit, &rec.Error, &rec.Cost, &rec.Scope, &rec.CreatedAt, &rec.Degraded, &rec.QueueWaitMS)
		rec.PromptTokens, rec.CompletionTokens = int(prompt), int(completion)
		return rec, err
	})
}

// ids returns the call_ids of every row.
func (r pgReader) ids(t *testing.T) []string {
	t.Helper()
	return sinktest.IDs(t, r)
}

// withHost returns dsn (a URL) pointing at addr instead.
func withHost(t *testing.T, dsn, addr string, params ...string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Skipf("PGW_TEST_PG_DSN is not a postgres:// URL; this test rewrites its host")
	}
	u.Host = addr
	q := u.Query()
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// tcpProxy forwards a local port to Postgres and can cut every connection
// and close each new one at once (an outage), then forward again. It holds
// its port for its whole life, so that no other test's listener can take
// the port during an outage and answer in Postgres's place.
type tcpProxy struct {
	target, addr string
	ln           net.Listener

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// newProxy listens on a free local port for a proxy to target; it forwards
// nothing until start.
func newProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, addr: ln.Addr().String(), ln: ln, conns: map[net.Conn]struct{}{}}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			up := p.up
			p.mu.Unlock()
			if !up {
				_ = c.Close() // down: the connection ends before a byte is read
				continue
			}
			p.forward(c)
		}
	})
	t.Cleanup(func() {
		p.stop()
		_ = ln.Close()
		p.wg.Wait()
	})
	return p
}

// start forwards new connections to the target.
func (p *tcpProxy) start(t *testing.T) {
	t.Helper()
	p.mu.Lock()
	p.up = true
	p.mu.Unlock()
}

func (p *tcpProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		_ = c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *tcpProxy) forward(client net.Conn) {
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !p.track(client) || !p.track(server) {
		_ = client.Close()
		_ = server.Close()
		return
	}
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		_ = dst.Close()
		_ = src.Close()
	}
	p.wg.Go(func() { pipe(server, client) })
	p.wg.Go(func() { pipe(client, server) })
}

// stop cuts every forwarded connection and closes new ones at once.
func (p *tcpProxy) stop() {
	p.mu.Lock()
	p.up = false
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
	p.mu.Unlock()
}
