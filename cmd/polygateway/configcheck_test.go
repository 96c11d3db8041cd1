package main

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// productionEnv is the production profile the documentation recommends.
const productionEnv = "../../docs/production.env"

// placeholder is a ${NAME} left for the operator to fill in.
var placeholder = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// localProfile returns docs/production.env with every BASE_URL pointing
// at url and every ${NAME} replaced by a fake value, written to a file of
// dir, and its path.
func localProfile(t *testing.T, dir, url, extra string) string {
	t.Helper()
	raw, err := os.ReadFile(productionEnv)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		if k, _, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(strings.TrimSpace(k), "#") && strings.HasSuffix(k, "__BASE_URL") {
			lines[i] = k + "=" + url
		}
	}
	text := placeholder.ReplaceAllString(strings.Join(lines, "\n"), "fake-$1")
	path := filepath.Join(dir, "production.env")
	if err := os.WriteFile(path, []byte(text+extra), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestProductionProfileIsValid runs what polygateway -check runs on
// docs/production.env (every key known, every value valid, every client
// built), its upstreams replaced by a local fake.
func TestProductionProfileIsValid(t *testing.T) {
	up := fakeupstream.NewServer(t)
	dir := t.TempDir()
	logs := &testkit.Buffer{}
	if code := run([]string{"-check", "-env-file", localProfile(t, dir, up.URL(), "")}, io.Discard, logs, nil); code != 0 ||
		!strings.Contains(logs.String(), "configuration valid") {
		t.Fatalf("-check of %s: exit %d\n%s", productionEnv, code, logs.String())
	}
	if up.Requests() != 0 {
		t.Errorf("-check sent %d requests upstream", up.Requests())
	}
	// The check has teeth: the same file with a misspelt key is refused,
	// naming it.
	bad := &testkit.Buffer{}
	path := localProfile(t, dir, up.URL(), "\nLLM__OPENAI__1__TTFT_TIMEOUT=15\n")
	if code := run([]string{"-check", "-env-file", path}, io.Discard, bad, nil); code != 1 ||
		!strings.Contains(bad.String(), "LLM__OPENAI__1__TTFT_TIMEOUT") {
		t.Errorf("-check of the profile with a misspelt key: exit %d\n%s", code, bad.String())
	}
}

// TestCheckHoldsClientPrioritiesToTheKeys: -check accepts a default
// priority for a configured key, by its digest id, and refuses one for an
// id no key has, naming the key.
func TestCheckHoldsClientPrioritiesToTheKeys(t *testing.T) {
	up := fakeupstream.NewServer(t)
	dir := t.TempDir()
	sum := sha256.Sum256([]byte("pgw-client-key-replace-me-2"))
	known := "key-" + hex.EncodeToString(sum[:6])
	for _, tc := range []struct {
		priorities string
		code       int
	}{
		{known + "=batch", 0},
		{"key-000000000000=batch", 1},
	} {
		logs := &testkit.Buffer{}
		path := localProfile(t, dir, up.URL(), "\nPGW_CLIENT_PRIORITIES="+tc.priorities+"\n")
		code := run([]string{"-check", "-env-file", path}, io.Discard, logs, nil)
		if code != tc.code || tc.code == 1 && !strings.Contains(logs.String(), "key-000000000000") {
			t.Errorf("-check with PGW_CLIENT_PRIORITIES=%s: exit %d, want %d\n%s", tc.priorities, code, tc.code, logs.String())
		}
	}
	// An operator who writes a key itself where its id belongs: refused,
	// and the key is not logged.
	for _, raw := range []string{"pgw-client-key-replace-me-2=batch", "pgw-client-key-replace-me-2"} {
		logs := &testkit.Buffer{}
		path := localProfile(t, dir, up.URL(), "\nPGW_CLIENT_PRIORITIES="+raw+"\n")
		code := run([]string{"-check", "-env-file", path}, io.Discard, logs, nil)
		if code != 1 || strings.Contains(logs.String(), "replace-me-2") || !strings.Contains(logs.String(), "PGW_CLIENT_PRIORITIES") {
			t.Errorf("-check with a key itself in PGW_CLIENT_PRIORITIES: exit %d, want 1, and no key in the log:\n%s", code, logs.String())
		}
	}
}
