package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/configfile"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// TestServerKeysAreTheTablesKeys: the keys the server reads are exactly the
// key table's gateway rows, so the library accepts them, a config file has
// a place for each, and nothing else passes as a server key.
func TestServerKeysAreTheTablesKeys(t *testing.T) {
	t.Parallel()
	var table []string
	env := map[string]string{}
	for _, d := range config.Keys() {
		if d.Reader == config.ReaderGateway {
			table = append(table, d.Pattern)
			env[d.Pattern] = d.Example
		}
	}
	r := &keyReader{env: env, read: map[string]bool{}}
	if _, err := readServerConfig(r); err != nil {
		t.Fatalf("the table's examples: %v", err)
	}
	read := slices.Sorted(maps.Keys(r.read))
	slices.Sort(table)
	if !slices.Equal(read, table) {
		t.Errorf("the server reads %v\nthe key table's gateway keys are %v", read, table)
	}
}

// TestServerTyposAreErrors: a PGW_* key neither the library nor the gateway
// knows stops the gateway, with the key meant; both sets are one table, so
// a library key is no error for the gateway and a gateway key none for the
// library.
func TestServerTyposAreErrors(t *testing.T) {
	t.Parallel()
	for key, want := range map[string]string{
		"PGW_LISTEN_ADR":           "did you mean PGW_LISTEN_ADDR?",
		"PGW_STRUCTURED_MAX_RETRY": "did you mean PGW_STRUCTURED_MAX_RETRIES?",
		"PGW_LEASE_TTL":            "did you mean PGW_LEASE_TTL_S?",
		"PGW_CACHE_TTL":            "did you mean PGW_CACHE_TTL_S?",
		"PGW_DRAIN_TIMEOUT":        "did you mean PGW_DRAIN_TIMEOUT_S?",
		"LLM_TIMEOUTS":             "did you mean LLM_TIMEOUT?",
		"PGW_CLIENT_KEY":           "did you mean PGW_CLIENT_KEYS?", // the example client's key, alone
	} {
		_, err := parseServerConfig(map[string]string{"PGW_ROUTES": "a=LLM", key: "1"})
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Problem, want) {
			t.Errorf("%s: %v, want an error naming it with %q", key, err, want)
		}
	}
	ok := map[string]string{
		"PGW_ROUTES": "a=LLM", "PGW_LEASE_TTL_S": "100", "PGW_LIMITER_BACKEND": "memory", "LLM_TIMEOUT": "5",
		"PGW_X_MINE": "x", "PGW_TEST_REDIS_URL": "redis://x", "PGW_CLIENT_KEY": "k", "PGW_CLIENT_KEYS": "k",
		"PGW_ALLOW_KEYS": "PGW_LEGACY", "PGW_LEGACY": "x",
	}
	if _, err := parseServerConfig(ok); err != nil {
		t.Errorf("known keys refused: %v", err)
	}
}

// exampleVars are the variables of configfile/testdata/gateway.yaml.
var exampleVars = map[string]string{
	"REDIS_URL": "redis://127.0.0.1:6379/0", "OPENAI_API_KEY": "sk-a", "DEEPSEEK_API_KEY": "sk-b",
	"GROQ_API_KEY": "sk-c", "CLIENT_KEY_A": "key-a", "CLIENT_KEY_B": "key-b",
}

// TestServerConfigFromFileEqualsEnv: the server keys of a config file give
// the same server configuration as the equivalent environment.
func TestServerConfigFromFileEqualsEnv(t *testing.T) {
	t.Parallel()
	cf, err := configfile.Load("../../configfile/testdata/gateway.yaml", configfile.WithVariables(exampleVars))
	if err != nil {
		t.Fatal(err)
	}
	fromFile, err := parseServerConfig(cf.Env())
	if err != nil {
		t.Fatal(err)
	}
	env := cf.Env()
	maps.Copy(env, map[string]string{
		"PGW_LISTEN_ADDR": ":8400", "PGW_STREAM_COMMIT": "first_token", "PGW_CLIENT_KEYS": "key-a,key-b",
		"PGW_CLIENT_RATE": "20", "PGW_ROUTES": "fast=FAST,gpt-4o-mini=LLM", "PGW_DEFAULT_SCOPE": "LLM",
		"PGW_EMBED_ROUTES": "text-embedding-3-small=EMBED", "PGW_DRAIN_TIMEOUT_S": "15", "PGW_LOG_FORMAT": "text",
	})
	fromEnv, err := parseServerConfig(env)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromFile, fromEnv) {
		t.Errorf("file %+v\nenv  %+v", fromFile, fromEnv)
	}
	if fromFile.addr != ":8400" || fromFile.routing.routes["fast"] != "FAST" || fromFile.drainTimeout != 15*time.Second ||
		len(fromFile.proxy.ClientKeys) != 2 || fromFile.logFormat != "text" {
		t.Errorf("server config %+v", fromFile)
	}
	// A bad server value in a file names its path.
	for field, want := range map[string]string{"stream_commit: eventually": "server.stream_commit", "write_timeout_s: 0": "server.write_timeout_s"} {
		dir := t.TempDir()
		path := filepath.Join(dir, "gw.yaml")
		writeFile(t, path, "server:\n  routes: {a: LLM}\n  "+field+"\n")
		_, _, err := newApp(slog.New(slog.DiscardHandler), fileSource(path, noVars), nil).load()
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Key != want || !strings.Contains(ce.Problem, "(line 3)") {
			t.Errorf("%s: %v, want an error naming %s", field, err, want)
		}
	}
}

func noVars() (map[string]string, error) { return map[string]string{}, nil }

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	// Write beside and rename, as editors and deployment tools do.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// gatewayFile is a config file routing gpt-4o to scope, whose one source
// is upstream.
func gatewayFile(scope, upstream, extra string) string {
	return `
assembly: {limiter_backend: memory, breaker_backend: memory, cache_backend: none, telemetry_backend: none}
server:
  listen_addr: "127.0.0.1:0"
  drain_timeout_s: 5
  routes: {gpt-4o: ` + scope + `}
` + extra + `
scopes:
  ` + scope + `:
    sources:
      - {provider: up, base_url: "` + upstream + `", api_key: "${UP_KEY}", model: ` + strings.ToLower(scope) + `-model, timeout_s: 5}
`
}

// TestReloadFromFileSwapsScopesAndDrains: a reload of a config file routes
// new calls to the new scope at once, while a stream in flight finishes on
// the old scope's client, which is closed once it has drained; an invalid
// file is refused with its path and changes nothing.
func TestReloadFromFileSwapsScopesAndDrains(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	slow := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(20).WithInterTokenDelay(50*time.Millisecond)))
	fast := fakeupstream.NewServer(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeFile(t, path, gatewayFile("LLM", slow.URL(), ""))
	logs := &testkit.Buffer{}
	vars := func() (map[string]string, error) { return map[string]string{"UP_KEY": "sk-up-secret"}, nil }
	a := newApp(slog.New(slog.NewJSONHandler(logs, nil)), fileSource(path, vars), nil)
	addr, err := a.start()
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	base := "http://" + addr.String()
	old := a.current.Clients["LLM"]

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
	if slow.InFlight() == 0 {
		t.Fatal("the stream did not start")
	}

	// An invalid file: refused, naming the path; the old configuration serves.
	writeFile(t, path, strings.Replace(gatewayFile("FAST", fast.URL(), ""), "timeout_s: 5}", "timeout_s: soon}", 1))
	err = a.reload()
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Key != "scopes.FAST.sources[0].timeout_s" {
		t.Fatalf("invalid reload: %v", err)
	}

	// A valid file: the route moves to FAST, LLM is gone.
	writeFile(t, path, gatewayFile("FAST", fast.URL(), "  client_rate: 50\n"))
	if err := a.reload(); err != nil {
		t.Fatalf("reload: %v", err)
	}
	if code, body := post(t, base+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); code != 200 || !strings.Contains(body, `"model":"fast-model"`) {
		t.Fatalf("after reload: %d %s", code, body)
	}
	if _, ok := a.current.Clients["LLM"]; ok || fast.Requests() != 1 {
		t.Errorf("scopes after reload %v, FAST upstream saw %d requests", slices.Collect(maps.Keys(a.current.Clients)), fast.Requests())
	}
	if old.Closed() && slow.InFlight() > 0 {
		t.Error("the old scope's client was closed with a stream in flight")
	}
	if s := <-streamed; !strings.HasSuffix(s, "data: [DONE]\n\n") || !strings.Contains(s, "llm-model") {
		t.Fatalf("the stream in flight did not finish on the old scope: %q", s)
	}
	for deadline := time.Now().Add(5 * time.Second); !old.Closed() && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if !old.Closed() {
		t.Error("the old scope's client was not closed after draining")
	}
	if _, err := old.Chat(context.Background(), []polygateway.Message{{Role: "user", Content: "hi"}}); !errors.Is(err, polygateway.ErrClientClosed) {
		t.Errorf("old client after the drain: %v", err)
	}
	if err := a.shutdown(context.Background()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	out := logs.String()
	if !strings.Contains(out, "configuration reloaded") || !strings.Contains(out, "take effect at the next restart") ||
		!strings.Contains(out, "server.client_rate") || strings.Contains(out, "sk-up-secret") {
		t.Errorf("logs: %s", out)
	}
}

// TestRunWithConfigFileReloadsOnSIGHUP drives the command itself: -config,
// a SIGHUP after the file changed, SIGTERM.
func TestRunWithConfigFileReloadsOnSIGHUP(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	var auth atomic.Value
	one := fakeupstream.NewServer(t, fakeupstream.WithFunc(func(ri fakeupstream.RequestInfo) fakeupstream.Behavior {
		auth.Store(ri.Header.Get("Authorization"))
		return fakeupstream.OK()
	}))
	two := fakeupstream.NewServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	writeFile(t, path, gatewayFile("LLM", one.URL(), "  log_level: debug\n"))
	envFile := filepath.Join(dir, "vars.env")
	if err := os.WriteFile(envFile, []byte("UP_KEY=sk-from-dotenv\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	sigs := make(chan os.Signal, 1)
	code := make(chan int, 1)
	go func() { code <- run([]string{"-config", path, "-env-file", envFile}, io.Discard, logs, sigs) }()

	addr := waitLog(t, logs, regexp.MustCompile(`"addr":"([^"]+)"`))
	base := "http://" + addr
	chat := `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`
	if c, body := post(t, base+"/v1/chat/completions", chat); c != 200 || !strings.Contains(body, "llm-model") {
		t.Fatalf("first call: %d %s", c, body)
	}
	if got, _ := auth.Load().(string); got != "Bearer sk-from-dotenv" {
		t.Errorf("upstream Authorization %q: the variable is not from the .env file", got)
	}

	writeFile(t, path, gatewayFile("FAST", two.URL(), "  log_level: debug\n"))
	sigs <- syscall.SIGHUP
	waitLog(t, logs, regexp.MustCompile(`(configuration reloaded)`))
	if c, body := post(t, base+"/v1/chat/completions", chat); c != 200 || !strings.Contains(body, "fast-model") {
		t.Fatalf("after SIGHUP: %d %s", c, body)
	}
	sigs <- syscall.SIGTERM
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit code %d; logs: %s", c, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("run did not return after SIGTERM")
	}

	// -check with a bad file names the path and fails.
	writeFile(t, path, strings.Replace(gatewayFile("FAST", two.URL(), ""), "routes:", "routs:", 1))
	bad := &testkit.Buffer{}
	if c := run([]string{"-check", "-config", path, "-env-file", envFile}, io.Discard, bad, nil); c != 1 || !strings.Contains(bad.String(), "server.routs") ||
		!strings.Contains(bad.String(), "did you mean routes?") {
		t.Errorf("-check of a bad file: %d %s", c, bad.String())
	}
	if c := run([]string{"-config-poll", "10ms", "-config", path}, io.Discard, io.Discard, nil); c != 2 {
		t.Errorf("-config-poll below 1s: exit %d", c)
	}
}

// waitLog waits (bounded) for a log line matching re and returns its first
// group.
func waitLog(t *testing.T, logs *testkit.Buffer, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if m := re.FindStringSubmatch(logs.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no log line matches %s: %s", re, logs.String())
	return ""
}

// TestWatchFileCallsOnChange: the watcher reloads once per change of the
// file's modification time or size, not while it is unchanged or missing,
// and stops with its context.
func TestWatchFileCallsOnChange(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(path, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			watchFile(ctx, path, time.Second, func() { calls.Add(1) })
		}()
		tick := func() {
			time.Sleep(time.Second)
			synctest.Wait()
		}
		tick()
		if n := calls.Load(); n != 0 {
			t.Fatalf("%d reloads of an unchanged file", n)
		}
		if err := os.WriteFile(path, []byte("abc"), 0o600); err != nil {
			t.Fatal(err)
		}
		tick()
		tick()
		if n := calls.Load(); n != 1 {
			t.Fatalf("%d reloads after one change, want 1", n)
		}
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
		tick()
		if n := calls.Load(); n != 1 {
			t.Fatalf("a missing file reloaded: %d", n)
		}
		if err := os.WriteFile(path, []byte("abcdef"), 0o600); err != nil {
			t.Fatal(err)
		}
		tick()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d reloads after the file came back, want 2", n)
		}
		cancel()
		<-done
	})
}

func TestClientPrioritiesFromAFileAreAMappingOfDigestIDs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "gw.yaml")
	writeFile(t, path, "server:\n  routes: {a: LLM}\n  client_keys: [k1]\n  client_priorities: {key-0123456789ab: batch, key-ba9876543210: interactive}\n")
	_, sc, err := newApp(slog.New(slog.DiscardHandler), fileSource(path, noVars), nil).load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]core.Priority{"key-0123456789ab": core.PriorityBatch, "key-ba9876543210": core.PriorityInteractive}
	if !maps.Equal(sc.proxy.ClientPriorities, want) {
		t.Errorf("ClientPriorities = %v, want %v", sc.proxy.ClientPriorities, want)
	}
	writeFile(t, path, "server:\n  routes: {a: LLM}\n  client_keys: [k1]\n  client_priorities: {key-0123456789ab: urgent}\n")
	if _, _, err := newApp(slog.New(slog.DiscardHandler), fileSource(path, noVars), nil).load(); err == nil || !strings.Contains(err.Error(), "client_priorities") {
		t.Errorf("an unknown priority in a file: %v, want an error naming server.client_priorities", err)
	}
}
