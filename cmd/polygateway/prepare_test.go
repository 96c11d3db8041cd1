package main

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// checkError runs polygateway -check on the config file at path and
// returns its exit code and the error it logged.
func checkError(t *testing.T, path string) (int, string) {
	t.Helper()
	vars := filepath.Join(filepath.Dir(path), "vars.env")
	if err := os.WriteFile(vars, []byte("UP_KEY=sk-up-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	code := run([]string{"-check", "-config", path, "-env-file", vars}, io.Discard, logs, nil)
	for line := range strings.SplitSeq(logs.String(), "\n") {
		var rec struct{ Msg, Error string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "configuration invalid" {
			return code, rec.Error
		}
	}
	return code, ""
}

// TestCheckStartAndReloadRefuseTheSameConfigurations: a configuration the
// gateway refuses to start with is refused by -check with the same
// message, and by a reload, which keeps the configuration it serves.
func TestCheckStartAndReloadRefuseTheSameConfigurations(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	up := fakeupstream.NewServer(t)
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"fast-model": {"input_per_1m": 1, "output_per_1m": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	budgets := "  client_keys: [key-a]\n  client_budget_usd: 5\n"
	cases := []struct {
		name string
		file string
		want []string
	}{
		{name: "client budgets with an unpriced routed scope",
			file: gatewayFile("FAST", up.URL(), budgets),
			want: []string{"client budgets: scope FAST", `model "fast-model" has no price`}},
		{name: "client budgets with a priced scope and an unpriced one",
			file: strings.Replace(gatewayFile("FAST", up.URL(), budgets), "routes: {gpt-4o: FAST}", "routes: {gpt-4o: FAST, mini: SLOW}", 1) +
				"  SLOW:\n    sources:\n      - {provider: up, base_url: \"" + up.URL() + "\", api_key: k, model: slow-model, timeout_s: 5}\n" +
				"assembly_pricing_placeholder",
			want: []string{"client budgets: scope SLOW", `model "slow-model" has no price`}},
		{name: "a route to an unknown scope",
			file: strings.Replace(gatewayFile("FAST", up.URL(), ""), "routes: {gpt-4o: FAST}", "routes:\n    gpt-4o: FAST\n    mini: FSAT", 1),
			want: []string{"server.routes.mini: route mini=FSAT: scope FSAT has no keys", "(did you mean FAST?)", "gw.yaml, line 8)"}},
		{name: "a bad server key, a route to an unknown scope and a bad source at once",
			file: strings.Replace(strings.Replace(gatewayFile("FAST", up.URL(), "  write_timeout_s: 0\n"),
				"routes: {gpt-4o: FAST}", "routes: {gpt-4o: FAST, mini: FATS}", 1), "timeout_s: 5}", "timeout_s: soon}", 1),
			want: []string{"server.write_timeout_s", "route mini=FATS", "(did you mean FAST?)", "scopes.FAST.sources[0].timeout_s"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gw.yaml")
			file := strings.Replace(tc.file, "assembly_pricing_placeholder", "", 1)
			if strings.Contains(tc.file, "assembly_pricing_placeholder") {
				file = strings.Replace(file, "telemetry_backend: none}", "telemetry_backend: none, pricing_path: "+prices+"}", 1)
			}
			writeFile(t, path, file)
			code, checked := checkError(t, path)
			if code != 1 {
				t.Fatalf("-check: exit %d, want 1", code)
			}
			for _, w := range tc.want {
				if !strings.Contains(checked, w) {
					t.Errorf("-check error lacks %q:\n%s", w, checked)
				}
			}
			if strings.Contains(checked, "sk-up-secret") {
				t.Errorf("-check shows a secret: %s", checked)
			}
			vars := func() (map[string]string, error) { return map[string]string{"UP_KEY": "sk-up-secret"}, nil }
			a := newApp(slog.New(slog.DiscardHandler), fileSource(path, vars), nil)
			if _, err := a.start(); err == nil || err.Error() != checked {
				t.Errorf("start refuses with\n%v\n-check with\n%s", err, checked)
			}

			// A reload to it is refused the same way; the old one serves.
			writeFile(t, path, gatewayFile("FAST", up.URL(), ""))
			a = newApp(slog.New(slog.DiscardHandler), fileSource(path, vars), nil)
			addr, err := a.start()
			if err != nil {
				t.Fatalf("start of the good file: %v", err)
			}
			defer func() { _ = a.shutdown(t.Context()) }()
			writeFile(t, path, file)
			if err := a.reload(); err == nil || err.Error() != checked {
				t.Errorf("reload refuses with\n%v\n-check with\n%s", err, checked)
			}
			if code, body := post(t, "http://"+addr.String()+"/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`); code != 200 ||
				!strings.Contains(body, "fast-model") {
				t.Errorf("after the refused reload: %d %s", code, body)
			}
		})
	}
}

// TestCheckNamesTheEnvFileLineOfARouteToAnUnknownScope: from an env file,
// a route to a scope without keys names the file, the line and the scope
// meant, as from a config file.
func TestCheckNamesTheEnvFileLineOfARouteToAnUnknownScope(t *testing.T) {
	up := fakeupstream.NewServer(t)
	path := filepath.Join(t.TempDir(), "gw.env")
	env := "PGW_LIMITER_BACKEND=memory\nPGW_BREAKER_BACKEND=memory\nPGW_CACHE_BACKEND=none\nPGW_TELEMETRY_BACKEND=none\n" +
		"FAST__UP__1__BASE_URL=" + up.URL() + "\nFAST__UP__1__API_KEY=k\nFAST__UP__1__MODEL=m\nFAST__UP__1__TIMEOUT_S=5\n" +
		"PGW_ROUTES=gpt-4o=FAST,mini=FSAT\n"
	if err := os.WriteFile(path, []byte(env), 0o600); err != nil {
		t.Fatal(err)
	}
	logs := &testkit.Buffer{}
	code := run([]string{"-check", "-env-file", path}, io.Discard, logs, nil)
	want := "PGW_ROUTES: route mini=FSAT: scope FSAT has no keys (no FSAT__…) (did you mean FAST?) (" + path + ", line 9)"
	if code != 1 || !strings.Contains(logs.String(), want) {
		t.Errorf("-check: exit %d, want 1 and %q:\n%s", code, want, logs.String())
	}
}
