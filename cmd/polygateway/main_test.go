package main

import (
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestServeReloadAndShutdownFromEnv(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	one := fakeupstream.NewServer(t)
	two := fakeupstream.NewServer(t)
	env := map[string]string{
		"PGW_LISTEN_ADDR": "127.0.0.1:0", "PGW_ROUTES": "gpt-4o=LLM", "PGW_ADMIN_TOKEN": "tok-admin", "PGW_METRICS_TOKEN": "tok-metrics",
		"PGW_CLIENT_RATE": "100", "PGW_DRAIN_TIMEOUT_S": "5", "PGW_LOG_LEVEL": "debug",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__ONE__1__BASE_URL": one.URL(), "LLM__ONE__1__API_KEY": "sk-one-secret", "LLM__ONE__1__MODEL": "one-model", "LLM__ONE__1__TIMEOUT_S": "5",
	}
	var mu sync.Mutex
	current := maps.Clone(env)
	readEnv := func() (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		return maps.Clone(current), nil
	}
	logs := &testkit.Buffer{}
	hook, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), envSource(readEnv), hook)
	addr, err := a.start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	base := "http://" + addr.String()
	chat := `{"model":"MODEL","messages":[{"role":"user","content":"hi"}]}`

	if code, body := post(t, base+"/v1/chat/completions", strings.Replace(chat, "MODEL", "gpt-4o", 1)); code != 200 || !strings.Contains(body, `"model":"one-model"`) {
		t.Fatalf("first call: %d %s", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != http.StatusUnauthorized || strings.Contains(body, "polygateway_calls_total") {
		t.Fatalf("/metrics without PGW_METRICS_TOKEN: %d %.300s", code, body)
	}
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer tok-metrics")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(mb), "polygateway_calls_total") {
		t.Fatalf("/metrics with PGW_METRICS_TOKEN: %d %.300s", resp.StatusCode, mb)
	}

	// An invalid reload is logged and ignored.
	mu.Lock()
	current["LLM__ONE__1__TIMEOUT_S"] = "soon"
	mu.Unlock()
	if err := a.reload(); err == nil {
		t.Fatal("reload accepted an invalid configuration")
	}
	if code, _ := post(t, base+"/v1/chat/completions", strings.Replace(chat, "MODEL", "gpt-4o", 1)); code != 200 {
		t.Fatalf("serving stopped after a failed reload: %d", code)
	}

	// A valid reload adds a scope and re-routes.
	mu.Lock()
	current["LLM__ONE__1__TIMEOUT_S"] = "5"
	current["PGW_ROUTES"] = "gpt-4o=LLM,fast=FAST"
	current["FAST__TWO__1__BASE_URL"] = two.URL()
	current["FAST__TWO__1__API_KEY"] = "sk-two-secret"
	current["FAST__TWO__1__MODEL"] = "two-model"
	current["FAST__TWO__1__TIMEOUT_S"] = "5"
	mu.Unlock()
	if err := a.reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if code, body := post(t, base+"/v1/chat/completions", strings.Replace(chat, "MODEL", "fast", 1)); code != 200 || !strings.Contains(body, `"model":"two-model"`) {
		t.Fatalf("after reload: %d %s", code, body)
	}
	if two.Requests() != 1 {
		t.Fatalf("FAST upstream saw %d requests", two.Requests())
	}
	if code, body := get(t, base+"/v1/providers"); code != 200 || strings.Contains(body, "secret") {
		t.Fatalf("/v1/providers: %d %s", code, body)
	}

	// Shutdown drains a stream in flight.
	one.ResetStats()
	slow := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(8).WithInterTokenDelay(50*time.Millisecond)))
	mu.Lock()
	current["LLM__ONE__1__BASE_URL"] = slow.URL()
	mu.Unlock()
	if err := a.reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	streamed := make(chan string, 1)
	go func() {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			streamed <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		streamed <- string(b)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for slow.InFlight() == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := a.shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if s := <-streamed; !strings.HasSuffix(s, "data: [DONE]\n\n") {
		t.Fatalf("stream cut by shutdown: %q", s)
	}
	for _, secret := range []string{"sk-one-secret", "sk-two-secret", "tok-admin", "tok-metrics"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
	if !strings.Contains(logs.String(), "configuration reloaded") || !strings.Contains(logs.String(), "polygateway listening") {
		t.Errorf("logs: %s", logs.String())
	}
}

func TestParseServerConfig(t *testing.T) {
	sc, err := parseServerConfig(map[string]string{
		"PGW_ROUTES": " gpt-4o = llm , fast=FAST ", "PGW_DEFAULT_SCOPE": "llm", "PGW_EMBED_ROUTES": "emb=EMBED",
		"PGW_CLIENT_KEYS": "a, b,,", "PGW_CLIENT_RATE": "2.5", "PGW_CLIENT_BURST": "5", "PGW_STREAM_COMMIT": "buffer",
		"PGW_WRITE_TIMEOUT_S": "0.5", "PGW_MAX_BODY_BYTES": "1024", "PGW_MAX_BUFFERED_BODY_BYTES": "4096",
		"PGW_CLIENT_ID_RATE": "0.5", "PGW_CLIENT_ID_BURST": "2", "PGW_METRICS_TOKEN": " scrape ",
	})
	if err != nil {
		t.Fatal(err)
	}
	if sc.addr != "127.0.0.1:8400" || sc.routing.routes["gpt-4o"] != "LLM" || sc.routing.routes["fast"] != "FAST" || sc.routing.defaultScope != "LLM" {
		t.Errorf("routing = %+v addr %s", sc.routing, sc.addr)
	}
	if got := strings.Join(sc.routing.chatScopes(), ","); got != "FAST,LLM" {
		t.Errorf("chat scopes %s", got)
	}
	p := sc.proxy
	if len(p.ClientKeys) != 2 || p.ClientRate != 2.5 || p.ClientBurst != 5 || p.StreamCommit != "buffer" || p.WriteTimeout != 500*time.Millisecond || p.MaxBodyBytes != 1024 ||
		p.MaxBufferedBodyBytes != 4096 || p.ClientIDRate != 0.5 || p.ClientIDBurst != 2 || p.MetricsToken != "scrape" {
		t.Errorf("proxy config = %+v", p)
	}
	for key, bad := range map[string]string{
		"PGW_ROUTES": "gpt-4o", "PGW_STREAM_COMMIT": "eventually", "PGW_CLIENT_RATE": "-1",
		"PGW_WRITE_TIMEOUT_S": "0", "PGW_METRICS": "maybe", "PGW_LOG_LEVEL": "loud",
		"PGW_MAX_BUFFERED_BODY_BYTES": "1048576", // below the default body limit of 8 MiB
		"PGW_CLIENT_ID_RATE":          "1",       // without client keys
		"PGW_CLIENT_ID_BURST":         "many",
	} {
		env := map[string]string{"PGW_ROUTES": "a=B", key: bad}
		if _, err := parseServerConfig(env); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s=%s: err %v", key, bad, err)
		}
	}
	if _, err := parseServerConfig(map[string]string{}); err == nil {
		t.Error("no routes accepted")
	}
	// 2^55+1 seconds wrap to exactly one second in nanoseconds.
	_, err = parseServerConfig(map[string]string{"PGW_ROUTES": "a=B", "PGW_CLIENT_KEYS": "k1",
		"PGW_CLIENT_BUDGET_USD": "5", "PGW_CLIENT_BUDGET_WINDOW_S": "36028797018963969"})
	if err == nil || !strings.Contains(err.Error(), "PGW_CLIENT_BUDGET_WINDOW_S") || !strings.Contains(err.Error(), "too large") {
		t.Errorf("a client budget window beyond a duration: err %v", err)
	}
}

func TestClientPrioritiesAreDeclaredOnceByDigestID(t *testing.T) {
	sc, err := parseServerConfig(map[string]string{
		"PGW_ROUTES": "a=B", "PGW_CLIENT_KEYS": "k1,k2", "PGW_CLIENT_PRIORITIES": " key-0123456789ab = batch ,key-ba9876543210=interactive,",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]core.Priority{"key-0123456789ab": core.PriorityBatch, "key-ba9876543210": core.PriorityInteractive}
	if !maps.Equal(sc.proxy.ClientPriorities, want) {
		t.Errorf("ClientPriorities = %v, want %v", sc.proxy.ClientPriorities, want)
	}
	for _, bad := range []string{"key-0123456789ab", "=batch", "key-0123456789ab=urgent", "key-0123456789ab=batch,key-0123456789ab=normal"} {
		_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=B", "PGW_CLIENT_KEYS": "k1", "PGW_CLIENT_PRIORITIES": bad})
		if err == nil || !strings.Contains(err.Error(), "PGW_CLIENT_PRIORITIES") {
			t.Errorf("PGW_CLIENT_PRIORITIES=%s: err %v", bad, err)
		}
	}
}
