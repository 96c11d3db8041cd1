package polygateway_test

import (
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/config"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite docs/configuration.md from the parser's key table")

// renderKeyReference renders the configuration reference from the one key
// table the parser itself is driven by.
func renderKeyReference() string {
	var b strings.Builder
	b.WriteString("# Configuration keys\n\n")
	b.WriteString("Generated from the parser's key table (`internal/config.Keys`); `go test -run TestKeyReference -update-docs .` rewrites it, and the test fails when the two disagree.\n\n")
	b.WriteString("Every `…_S` value is in seconds and accepts decimals; booleans are `true`/`false`/`1`/`0`. ")
	b.WriteString("A missing required key or a bad value is an assembly error naming the key.\n\n")
	b.WriteString("| key | required | default | form | meaning |\n|---|---|---|---|---|\n")
	esc := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
	for _, k := range config.Keys() {
		form := k.Form
		if len(k.Values) > 0 {
			form = strings.Join(k.Values, " | ")
		}
		b.WriteString("| `" + k.Pattern + "` | " + esc(k.Required) + " | " + esc(k.Default) + " | " + esc(form) + " | " + esc(k.Meaning) + " |\n")
	}
	return b.String()
}

// TestKeyReference fails when docs/configuration.md does not list exactly
// the keys the parser knows.
func TestKeyReference(t *testing.T) {
	want := renderKeyReference()
	if *updateDocs {
		if err := os.WriteFile("docs/configuration.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/configuration.md is out of date with the parser's key table: run go test -run TestKeyReference -update-docs .")
	}
}
