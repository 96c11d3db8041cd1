package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"runtime"
	"strings"
	"testing"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

func TestVersionFlagPrintsTheBuildInformation(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"-version"}, &out, &errb, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	first := strings.SplitN(out.String(), "\n", 2)[0]
	if !strings.HasPrefix(first, "polygateway ") || !strings.Contains(first, runtime.Version()) {
		t.Fatalf("-version printed %q, want the binary's name and %s", out.String(), runtime.Version())
	}
	if !strings.Contains(out.String(), "module github.com/polygateway/polygateway") {
		t.Errorf("-version does not name the module: %q", out.String())
	}
}

// gatewayFor starts the app on a loopback port with one chat source and
// metrics on; it is shut down when the test ends.
func gatewayFor(t *testing.T, extra map[string]string) string {
	t.Helper()
	up := fakeupstream.NewServer(t)
	env := map[string]string{
		"PGW_LISTEN_ADDR": "127.0.0.1:0", "PGW_ROUTES": "gpt-4o=LLM", "PGW_LOG_LEVEL": "error",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__ONE__1__BASE_URL": up.URL(), "LLM__ONE__1__API_KEY": "none", "LLM__ONE__1__MODEL": "one-model", "LLM__ONE__1__TIMEOUT_S": "5",
	}
	maps.Copy(env, extra)
	hook, err := newMetrics()
	if err != nil {
		t.Fatal(err)
	}
	a := newApp(slog.New(slog.DiscardHandler), envSource(func() (map[string]string, error) { return maps.Clone(env), nil }), hook)
	addr, err := a.start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if err := a.shutdown(context.Background()); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return "http://" + addr.String()
}

func TestMetricsCarryTheGoRuntimeAndProcessCollectors(t *testing.T) {
	base := gatewayFor(t, nil)
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, name := range []string{"go_goroutines", "go_memstats_heap_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes", "polygateway_calls_in_flight"} {
		if !strings.Contains(body, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func TestPprofIsServedOnTheAdminListenerOnly(t *testing.T) {
	base := gatewayFor(t, nil)
	if code, _ := get(t, base+"/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("the public listener serves /debug/pprof/: %d", code)
	}
	if code, _ := get(t, base+"/debug/pprof/goroutine?debug=1"); code != http.StatusNotFound {
		t.Errorf("the public listener serves a profile: %d", code)
	}
	hs, addr, err := startAdmin(slog.New(slog.DiscardHandler), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	resp, err := http.Get("http://" + addr.String() + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "goroutine profile") {
		t.Fatalf("admin listener: %d %.200s", resp.StatusCode, b)
	}
	http.DefaultClient.CloseIdleConnections()
}

func TestAdminAddrIsReadFromTheEnvironment(t *testing.T) {
	sc, err := parseServerConfig(map[string]string{"PGW_ROUTES": "gpt-4o=LLM", "PGW_ADMIN_ADDR": "127.0.0.1:6060"})
	if err != nil || sc.adminAddr != "127.0.0.1:6060" {
		t.Fatalf("adminAddr = %q, %v", sc.adminAddr, err)
	}
}
