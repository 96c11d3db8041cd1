package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// keyShape is what a key named by an error looks like when the map does
// not hold it: a required key that is missing, or the pattern of one
// ("LLM__{PROVIDER}__1__BASE_URL" when the scope has no source).
var keyShape = regexp.MustCompile(`^[A-Z](?:[A-Z0-9_]|\{PROVIDER\})*$`)

// FuzzLoadEnvironments loads random environments: the base scope of the tests with
// the lines KEY=VALUE of env laid over it (a line without '=' deletes the
// key). Load never panics; every error is a *Error naming the scope
// argument, a key of the map, or a missing key; and no secret (a value of
// an API_KEY, URL, DSN or EXTRA_BODY key holding "SECRET") shows in it.
// Settings it returns pass Validate.
func FuzzLoadEnvironments(f *testing.F) {
	for _, s := range []string{
		"",
		"LLM__QWEN__1__TIMEOUT_S=abc",
		"LLM__QWEN__1__API_KEY",
		"LLM__QWEN__1__BASE_URL=ftp://u:SECRET@h/v1",
		"LLM__QWEN__1__EXTRA_BODY={\"k\":\"SECRET\",",
		"LLM__QWEN__01__MODEL=m",
		"LLM__QWEN__1__TIMOUT_S=5",
		"LLM__RETRY__BACKOFF_BASE_S=9\nLLM__RETRY__BACKOFF_MAX_S=1",
		"PGW_LIMITER_BACKEND=redis\nREDIS_URL=redis://:SECRET@[::1",
		"PGW_TELEMETRY_BACKEND=postgres\nPGW_TELEMETRY_PG_DSN=postgres://u:SECRET@h/db?sslmode=bogus",
		"LLM__BREAKER__FAIL_RATE=1.5\nLLM_MAX_RETRIES=-1",
		"LLM__DEEPSEEK__2__BASE_URL=https://api.deepseek.com/v1\nLLM__DEEPSEEK__2__API_KEY=sk-SECRET-2\nLLM__DEEPSEEK__2__MODEL=deepseek-chat\nLLM__DEEPSEEK__2__TIMEOUT_S=60\nLLM__DEEPSEEK__2__TTFT_TIMEOUT_S=90",
	} {
		f.Add("llm", s)
	}
	f.Add("ll__m", "")
	f.Add("OCR", "OCR__MONKEY__1__BASE_URL=http://127.0.0.1:7861\nOCR__MONKEY__1__API_KEY=none\nOCR__MONKEY__1__MODEL=m\nOCR__MONKEY__1__TIMEOUT_S=1e3")
	f.Fuzz(func(t *testing.T, scope, lines string) {
		env := base()
		for _, line := range strings.Split(lines, "\n") {
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				delete(env, k)
				continue
			}
			env[k] = v
		}
		s, err := Load(scope, env)
		if err == nil {
			// What Load gives, Validate accepts.
			if err := Validate(s); err != nil {
				t.Fatalf("Validate refuses what Load gives: %v", err)
			}
			return
		}
		var ce *Error
		if !errors.As(err, &ce) || ce != err { //nolint:errorlint // identity: the *Error itself, not one wrapped
			t.Fatalf("Load: %T %v, want a *Error", err, err)
		}
		if _, present := env[ce.Key]; !present && ce.Key != "scope" && !keyShape.MatchString(ce.Key) {
			t.Fatalf("error %q names key %q, which is neither in the map nor a key", err, ce.Key)
		}
		text := err.Error()
		for k, v := range env {
			if !secretField(k) || !strings.Contains(v, "SECRET") || quotedElsewhere(env, k, v) || strings.Contains(scope, strings.TrimSpace(v)) {
				continue
			}
			if strings.Contains(text, strings.TrimSpace(v)) {
				t.Fatalf("error %q shows the value of %s", text, k)
			}
		}
	})
}

// secretField reports whether the value of k is never to be shown.
func secretField(k string) bool {
	for _, s := range []string{"API_KEY", "URL", "DSN", "EXTRA_BODY"} {
		if strings.HasSuffix(k, s) {
			return true
		}
	}
	return false
}

// quotedElsewhere reports whether v may show for another reason: it is also
// the value of a key that is not secret, or part of a key name.
func quotedElsewhere(env map[string]string, key, v string) bool {
	v = strings.TrimSpace(v)
	for k, w := range env {
		if strings.Contains(k, v) || k != key && !secretField(k) && strings.Contains(w, v) {
			return true
		}
	}
	return false
}
