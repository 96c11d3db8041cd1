package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// The ReadEnv tests use t.Setenv or t.Chdir and therefore cannot run in
// parallel.

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadEnvProcessEnvironmentWins(t *testing.T) {
	p := writeFile(t, ".env", strings.Join([]string{
		"# comment",
		"PGW_TEST_ONLY_IN_FILE=file",
		"export PGW_TEST_BOTH=file",
		`PGW_TEST_QUOTED="a b" # trailing comment`,
		"PGW_TEST_EMPTY_IN_ENV=file",
		"",
	}, "\n"))
	t.Setenv("PGW_TEST_BOTH", "process")
	t.Setenv("PGW_TEST_EMPTY_IN_ENV", "")
	t.Setenv("PGW_TEST_ONLY_IN_ENV", "process")

	env, err := ReadEnv(p, true)
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{
		"PGW_TEST_ONLY_IN_FILE": "file",
		"PGW_TEST_BOTH":         "process",
		"PGW_TEST_QUOTED":       "a b",
		"PGW_TEST_EMPTY_IN_ENV": "",
		"PGW_TEST_ONLY_IN_ENV":  "process",
	} {
		if got, ok := env[k]; !ok || got != want {
			t.Errorf("%s = %q (present %v), want %q", k, got, ok, want)
		}
	}
}

func TestReadEnvFeedsLoad(t *testing.T) {
	var b strings.Builder
	for k, v := range base() {
		b.WriteString(k + "=" + v + "\n")
	}
	p := writeFile(t, "app.env", b.String())
	t.Setenv("LLM__QWEN__1__TIMEOUT_S", "33")
	env, err := ReadEnv(p, false)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Load("LLM", env)
	if err != nil {
		t.Fatal(err)
	}
	if s.Sources[0].Timeout.Seconds() != 33 || s.Sources[0].APIKey != secretKey {
		t.Errorf("source = %+v", s.Sources[0])
	}
}

func TestReadEnvMissingDefaultFileIsFine(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("PGW_TEST_ONLY_IN_ENV", "process")
	for _, path := range []string{"", ".env", filepath.Join(t.TempDir(), "nope.env")} {
		env, err := ReadEnv(path, false)
		if err != nil {
			t.Fatalf("ReadEnv(%q, false): %v", path, err)
		}
		if env["PGW_TEST_ONLY_IN_ENV"] != "process" {
			t.Errorf("ReadEnv(%q, false) lost the process environment", path)
		}
	}
}

func TestReadEnvDefaultPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".env"), []byte("PGW_TEST_FROM_DEFAULT=yes\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	env, err := ReadEnv("", false)
	if err != nil {
		t.Fatal(err)
	}
	if env["PGW_TEST_FROM_DEFAULT"] != "yes" {
		t.Error("the default .env was not read")
	}
}

func TestReadEnvMissingExplicitFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.env")
	_, err := ReadEnv(p, true)
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if ce.Key != p || !strings.Contains(ce.Problem, "not found") || !strings.Contains(err.Error(), p) {
		t.Errorf("err = %v", err)
	}
	if !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, core.ErrGateway) {
		t.Error("want errors.Is fs.ErrNotExist and core.ErrGateway")
	}
}

func TestReadEnvUnreadableFile(t *testing.T) {
	dir := t.TempDir() // a directory is not a readable .env file
	_, err := ReadEnv(dir, false)
	var ce *Error
	if !errors.As(err, &ce) || ce.Key != dir || !strings.Contains(ce.Problem, "cannot read") {
		t.Fatalf("err = %v", err)
	}
}

func TestReadEnvParseErrorHidesSecrets(t *testing.T) {
	cases := []struct {
		name, content, want string
	}{
		{"bad name", "A=1\nLLM__Q__1__API_KEY=sk-SECRET\nBAD-NAME=sk-SECRET-2\nC=3\n", "invalid character in a variable name on line 3"},
		{"unterminated quote", "A=1\nB=2\nLLM__Q__1__API_KEY=\"sk-SECRET\nC=3\n", "unterminated quoted value on line 3"},
		{"crlf", "A=1\r\nB=2\r\nBAD-NAME=sk-SECRET\r\n", "on line 3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := writeFile(t, ".env", tc.content)
			_, err := ReadEnv(p, true)
			var ce *Error
			if !errors.As(err, &ce) || ce.Key != p {
				t.Fatalf("err = %v", err)
			}
			if !strings.Contains(ce.Problem, tc.want) {
				t.Errorf("Problem = %q, want %q", ce.Problem, tc.want)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error leaks the file: %v", err)
			}
		})
	}
}

// TestReadEnvByteOrderMark: a .env file saved with a UTF-8 byte order mark
// (as some Windows editors do) reads like the same file without it.
func TestReadEnvByteOrderMark(t *testing.T) {
	cases := []struct{ name, content string }{
		{"bom", "\ufeffPGW_TEST_FIRST=1\nPGW_TEST_SECOND=2\n"},
		{"bom and crlf", "\ufeffPGW_TEST_FIRST=1\r\nPGW_TEST_SECOND=2\r\n"},
		{"bom before export", "\ufeffexport PGW_TEST_FIRST=1\nPGW_TEST_SECOND=2\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env, err := ReadEnv(writeFile(t, ".env", tc.content), true)
			if err != nil {
				t.Fatal(err)
			}
			if env["PGW_TEST_FIRST"] != "1" || env["PGW_TEST_SECOND"] != "2" {
				t.Errorf("PGW_TEST_FIRST = %q, PGW_TEST_SECOND = %q, want 1 and 2", env["PGW_TEST_FIRST"], env["PGW_TEST_SECOND"])
			}
		})
	}
}
