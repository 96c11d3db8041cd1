package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// startGateway starts the app on env (one chat source at up) with the
// logger log and metrics on, and returns it with its base URL; the test
// shuts it down at its end.
func startGateway(t *testing.T, up *fakeupstream.Server, log *slog.Logger, extra map[string]string) (*app, string) {
	t.Helper()
	env := map[string]string{
		"PGW_LISTEN_ADDR": "127.0.0.1:0", "PGW_ROUTES": "gpt-4o=LLM",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__ONE__1__BASE_URL": up.URL(), "LLM__ONE__1__API_KEY": "none", "LLM__ONE__1__MODEL": "one-model", "LLM__ONE__1__TIMEOUT_S": "5",
	}
	maps.Copy(env, extra)
	hook, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	var current atomic.Pointer[map[string]string]
	current.Store(&env)
	a := newApp(log, envSource(func() (map[string]string, error) { return maps.Clone(*current.Load()), nil }), hook)
	addr, err := a.start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		_ = a.shutdown(context.Background()) // again after a test's own: harmless
	})
	return a, "http://" + addr.String()
}

// send makes one request and returns the response with its body read.
func send(t *testing.T, method, url, body string, hdr ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const chatHi = `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`

func TestGatewayMetricsAreScrapedAndLintClean(t *testing.T) {
	up := fakeupstream.NewServer(t)
	a, base := startGateway(t, up, slog.New(slog.DiscardHandler),
		map[string]string{"PGW_CLIENT_KEYS": "key-one", "PGW_METRICS_TOKEN": "tok-m", "PGW_MAX_BODY_BYTES": "1024"})
	send(t, "POST", base+"/v1/chat/completions", chatHi, "Authorization", "Bearer key-one")
	send(t, "POST", base+"/v1/chat/completions", chatHi) // no key
	send(t, "POST", base+"/v1/chat/completions", strings.Repeat(" ", 2048)+chatHi, "Authorization", "Bearer key-one")
	send(t, "GET", base+"/v1/models/gpt-4o", "", "Authorization", "Bearer key-one")
	if err := a.reload(); err != nil {
		t.Fatal(err)
	}
	resp, body := send(t, "GET", base+"/metrics", "", "Authorization", "Bearer tok-m")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	if _, err := parser.TextToMetricFamilies(strings.NewReader(body)); err != nil {
		t.Fatalf("the exposition does not parse: %v", err)
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	for _, want := range []string{
		`polygateway_http_requests_total{client="` + keyIDOf("key-one") + `",code="2xx",route="/v1/chat/completions"} 1`,
		`polygateway_http_requests_total{client="none",code="4xx",route="/v1/chat/completions"} 1`,
		`polygateway_http_requests_total{client="` + keyIDOf("key-one") + `",code="4xx",route="/v1/chat/completions"} 1`,
		`polygateway_http_requests_total{client="` + keyIDOf("key-one") + `",code="2xx",route="/v1/models/{id...}"} 1`,
		`polygateway_http_refusals_total{reason="auth"} 1`,
		`polygateway_http_refusals_total{reason="body_limit"} 1`,
		`polygateway_http_refusals_total{reason="in_flight"} 0`,
		`polygateway_reloads_total{result="applied"} 1`,
		`polygateway_reloads_total{result="refused"} 0`,
		`polygateway_build_info{goversion="go`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, "key-one\"") {
		t.Error("a client key is a label value")
	}
}

// keyIDOf is how the gateway names a client key outside: its digest id.
func keyIDOf(key string) string {
	h := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(h[:6])
}

func TestStartWarnsWhenOpenBeyondLoopback(t *testing.T) {
	up := fakeupstream.NewServer(t)
	warnings := regexp.MustCompile(`"level":"WARN","msg":"listening beyond loopback[^\n]*`)
	for _, tc := range []struct {
		name  string
		env   map[string]string
		warns bool
	}{
		{"loopback, nothing set", map[string]string{}, false},
		{"all addresses, nothing set", map[string]string{"PGW_LISTEN_ADDR": "0.0.0.0:0"}, true},
		{"all addresses, keys only", map[string]string{"PGW_LISTEN_ADDR": "0.0.0.0:0", "PGW_CLIENT_KEYS": "k-1"}, true},
		{"all addresses, keys and metrics token", map[string]string{"PGW_LISTEN_ADDR": "0.0.0.0:0", "PGW_CLIENT_KEYS": "k-1", "PGW_METRICS_TOKEN": "m-1"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := &testkit.Buffer{}
			_, base := startGateway(t, up, slog.New(slog.NewJSONHandler(logs, nil)), tc.env)
			_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
			base = "http://127.0.0.1:" + port // the all-addresses listener, reached on loopback
			wantMetrics := http.StatusOK      // open without a metrics token
			if tc.env["PGW_METRICS_TOKEN"] != "" {
				wantMetrics = http.StatusUnauthorized
			}
			if resp, _ := send(t, "GET", base+"/metrics", ""); resp.StatusCode != wantMetrics {
				t.Errorf("/metrics without a token: %d, want %d", resp.StatusCode, wantMetrics)
			}
			got := warnings.FindAllString(logs.String(), -1)
			if tc.warns != (len(got) == 1) || len(got) > 1 {
				t.Fatalf("warnings %q, want one: %v", got, tc.warns)
			}
			if tc.warns && (!strings.Contains(got[0], "/metrics (no PGW_METRICS_TOKEN)") || strings.Contains(got[0], "k-1")) {
				t.Errorf("warning %s", got[0])
			}
		})
	}
}

// TestSIGTERMDrainsWithTheListenerOpen: on shutdown /readyz turns 503 at
// once, a request arriving during the drain gets 503 with Retry-After (not
// a refused connection), the request in flight finishes with its answer,
// and the listener closes once it has.
func TestSIGTERMDrainsWithTheListenerOpen(t *testing.T) {
	release := make(chan struct{})
	arrived := make(chan struct{}, 1)
	up := fakeupstream.NewServer(t, fakeupstream.WithFunc(func(fakeupstream.RequestInfo) fakeupstream.Behavior {
		arrived <- struct{}{}
		<-release
		return fakeupstream.OK().WithContent("finished")
	}))
	a, base := startGateway(t, up, slog.New(slog.DiscardHandler), nil)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the shutdown of startGateway, should the test fail
	inflight := make(chan string, 1)
	go func() {
		resp, err := http.Post(base+"/v1/chat/completions", "application/json", strings.NewReader(chatHi))
		if err != nil {
			inflight <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		inflight <- resp.Status + " " + string(b)
	}()
	<-arrived
	stopped := make(chan error, 1)
	go func() { stopped <- a.shutdown(context.Background()) }()

	ready := func() int {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for deadline := time.Now().Add(10 * time.Second); ready() != http.StatusServiceUnavailable; {
		if time.Now().After(deadline) {
			t.Fatal("/readyz never turned 503")
		}
		time.Sleep(5 * time.Millisecond)
	}
	resp, body := send(t, "POST", base+"/v1/chat/completions", chatHi)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "server_shutting_down") {
		t.Fatalf("a request arriving during the drain: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	select {
	case err := <-stopped:
		t.Fatalf("shutdown returned while a request was in flight: %v", err)
	default:
	}
	free()
	if got := <-inflight; !strings.HasPrefix(got, "200") || !strings.Contains(got, "finished") {
		t.Fatalf("the request in flight: %s", got)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	_, err := net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second)
	if err == nil || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("the listener is still open after the drain: %v", err)
	}
}

func TestLogsWriteDurationsAsDurations(t *testing.T) {
	var buf bytes.Buffer
	log := newLogger(&buf, serverConfig{logFormat: "json"})
	log.Info("x", slog.Duration("drain_timeout", 30*time.Second), slog.Group("g", slog.Duration("wait", 1500*time.Millisecond)))
	if got := buf.String(); !strings.Contains(got, `"drain_timeout":"30s"`) || !strings.Contains(got, `"wait":"1.5s"`) {
		t.Errorf("durations logged as %s", got)
	}
	logs := &testkit.Buffer{}
	a, _ := startGateway(t, fakeupstream.NewServer(t), newLogger(logs, serverConfig{logFormat: "json"}), map[string]string{"PGW_DRAIN_TIMEOUT_S": "7"})
	if err := a.shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), `"drain_timeout":"7s"`) {
		t.Errorf("the shutdown line: %s", logs.String())
	}
}

func TestOperatorKeysAreRead(t *testing.T) {
	t.Parallel()
	sc, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=LLM", "PGW_REQUEST_TIMEOUT_S": "90.5", "PGW_SHARED_CACHE": "true"})
	if err != nil || sc.proxy.RequestTimeout != 90500*time.Millisecond || !sc.proxy.SharedCache {
		t.Fatalf("%+v %v", sc.proxy, err)
	}
	for key, bad := range map[string]string{"PGW_REQUEST_TIMEOUT_S": "0", "PGW_SHARED_CACHE": "sometimes"} {
		_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=LLM", key: bad})
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != key {
			t.Errorf("%s=%s: %v", key, bad, err)
		}
	}
}

// TestOperatorKeysHaveConfigFileTwins: the request deadline, the cache's
// sharing and the telemetry content have one place each in a config file.
func TestOperatorKeysHaveConfigFileTwins(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, path, `
assembly: {limiter_backend: memory, breaker_backend: memory, cache_backend: none, telemetry_backend: none, telemetry_content: redacted}
server:
  routes: {a: LLM}
  request_timeout_s: 42
  shared_cache: true
`)
	snap, sc, err := newApp(slog.New(slog.DiscardHandler), fileSource(path, noVars), nil).load()
	if err != nil {
		t.Fatal(err)
	}
	if sc.proxy.RequestTimeout != 42*time.Second || !sc.proxy.SharedCache || snap.env["PGW_TELEMETRY_CONTENT"] != "redacted" {
		t.Errorf("from the file: %+v, PGW_TELEMETRY_CONTENT=%q", sc.proxy, snap.env["PGW_TELEMETRY_CONTENT"])
	}
	writeFile(t, path, "server:\n  routes: {a: LLM}\n  request_timeout_s: 0\n")
	_, _, err = newApp(slog.New(slog.DiscardHandler), fileSource(path, noVars), nil).load()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "server.request_timeout_s" {
		t.Errorf("a zero deadline in a file: %v", err)
	}
}
