package e2e

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

func TestTelemetryWritesOneRowPerCallIncludingFailuresAndCacheHitsButNotCancellations(t *testing.T) {
	t.Parallel()
	good := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(3)))
	rejecting := fu.NewServer(t, fu.WithBehavior(fu.ContextLength()))
	sink := telemetry.NewMemory()
	e := testenv.Base().Source("openai", 1, good.URL()).Set(
		"PGW_CACHE_BACKEND", "memory", "PGW_CACHE_NAMESPACE", "t", "PGW_CACHE_TTL_S", "60",
		"BAD__OPENAI__1__BASE_URL", rejecting.URL(), "BAD__OPENAI__1__API_KEY", "k", "BAD__OPENAI__1__MODEL", "m", "BAD__OPENAI__1__TIMEOUT_S", "5")
	c := e.Client(t, polygateway.WithTelemetry(sink), polygateway.WithPricing(polygateway.PricingTable{"openai-model": {InputPer1M: 1, OutputPer1M: 2}}))
	bad, err := polygateway.FromEnv("BAD", polygateway.WithEnv(e), polygateway.WithTelemetry(sink))
	if err != nil {
		t.Fatal(err)
	}
	defer bad.Close()

	img := polygateway.UserParts(polygateway.TextPart("what is this?"), polygateway.ImageBytesPart("image/png", []byte("\x89PNG-secret-pixels")))
	first, err := c.Chat(context.Background(), []polygateway.Message{img}, polygateway.WithSessionID("s1"), polygateway.WithParentCallID("p1"))
	if err != nil {
		t.Fatal(err)
	}
	hit, err := c.Chat(context.Background(), []polygateway.Message{img})
	if err != nil || !hit.CacheHit {
		t.Fatalf("second call: hit=%v err=%v", hit != nil && hit.CacheHit, err)
	}
	if _, err := bad.Chat(context.Background(), []polygateway.Message{polygateway.User("x")}); err == nil {
		t.Fatal("rejecting source succeeded")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Chat(ctx, []polygateway.Message{polygateway.User("cancelled")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled call: %v", err)
	}

	recs := sink.Records()
	if len(recs) != 3 {
		t.Fatalf("%d rows, want 3 (success, cache hit, failure; none for the cancelled call)", len(recs))
	}
	ok, cached, failed := recs[0], recs[1], recs[2]
	if ok.CallID != first.CallID || ok.SessionID != "s1" || ok.ParentCallID != "p1" || ok.SourceName != "openai_1" ||
		ok.Provider != "openai" || ok.Model != "openai-model" || ok.Response != fu.Tokens(3) || ok.CompletionTokens != 3 ||
		ok.PromptTokens == 0 || ok.UsageSource != "measured" || ok.LatencyMS <= 0 || ok.TTFTMS == nil || ok.CacheHit || ok.Error != "" ||
		ok.Cost == nil || *ok.Cost <= 0 || ok.Scope != "LLM" || ok.CreatedAt.IsZero() {
		t.Fatalf("success row = %+v", ok)
	}
	if strings.Contains(ok.Messages, "secret-pixels") || strings.Contains(ok.Messages, "base64") || !strings.Contains(ok.Messages, "sha256:") {
		t.Fatalf("messages column stores the image raw: %s", ok.Messages)
	}
	if !cached.CacheHit || cached.CallID != hit.CallID || cached.PromptTokens != 0 || cached.Cost == nil || *cached.Cost != 0 {
		t.Fatalf("cache-hit row = %+v", cached)
	}
	if !strings.HasPrefix(failed.Error, "RequestRejectedError: ") || failed.Scope != "BAD" {
		t.Fatalf("failure row = %+v", failed)
	}
}

func TestAPIKeysNeverAppearInErrorsOrLogs(t *testing.T) {
	t.Parallel()
	const key = "sk-very-secret-key-123"
	srv := fu.NewServer(t, fu.WithBehavior(fu.Status(401, `{"error":{"message":"Incorrect API key provided: sk-very-secret-key-123","type":"invalid_request_error","code":"invalid_api_key"}}`, nil)))
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	sink := telemetry.NewMemory()
	c := testenv.Base().Source("openai", 1, srv.URL(), "API_KEY", key).Client(t, polygateway.WithLogger(logger), polygateway.WithTelemetry(sink))
	_, err := testenv.Ask(t, c)
	if err == nil {
		t.Fatal("call succeeded")
	}
	for what, text := range map[string]string{"error": err.Error(), "logs": logs.String(), "telemetry": sink.Records()[0].Error} {
		if strings.Contains(text, key) {
			t.Fatalf("the API key appears in the %s: %s", what, text)
		}
	}
	if s := c.Settings(); s.Sources[0].APIKey == key {
		t.Fatal("Settings() exposes the API key")
	}
}

func TestMissingOptInBackendNamesTheImport(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	cases := map[string]string{
		"PGW_LIMITER_BACKEND":   "backend/redisstore",
		"PGW_TELEMETRY_BACKEND": "telemetry/sqlitesink",
	}
	for key, pkg := range cases {
		e := testenv.Base().Source("openai", 1, srv.URL()).Set("REDIS_URL", "redis://127.0.0.1:6379/0", "PGW_TELEMETRY_SQLITE_PATH", t.TempDir()+"/t.db")
		if key == "PGW_LIMITER_BACKEND" {
			e.Set(key, "redis")
		} else {
			e.Set(key, "sqlite")
		}
		_, err := polygateway.FromEnv("LLM", polygateway.WithEnv(e))
		var ce *polygateway.ConfigError
		if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), "github.com/polygateway/polygateway/"+pkg) {
			t.Fatalf("%s: err = %v, want a ConfigError naming the import of %s", key, err, pkg)
		}
	}
	pg := testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_TELEMETRY_BACKEND", "postgres", "PGW_TELEMETRY_PG_DSN", "postgres://127.0.0.1/test")
	if _, err := polygateway.FromEnv("LLM", polygateway.WithEnv(pg)); err == nil || !strings.Contains(err.Error(), "telemetry/pgsink") {
		t.Fatalf("postgres: err = %v", err)
	}
}
