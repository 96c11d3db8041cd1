package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polygateway/polygateway/internal/core"
)

// FuzzClassifyResponse classifies random failures: any status, retry
// headers and body, for each known provider. It never panics; the error is
// one of the four classes and matches ErrGateway; the API key (also when
// the body echoes it) appears nowhere in the error; code and message stay
// within their bounds; the wait is within [0, DefaultMaxRetryAfter]. The
// envelope says "JSON" exactly when the body is a valid JSON object.
func FuzzClassifyResponse(f *testing.F) {
	for _, tc := range []struct {
		status      int
		retry, body string
	}{
		{429, "2", `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`},
		{401, "", `{"error":{"message":"Incorrect API key provided: sk-fuzz-0123456789abcdef","code":"invalid_api_key"}}`},
		{400, "", `{"error":{"code":"1301","message":"contains sensitive content"}}`},
		{200, "", `{"base_resp":{"status_code":1002,"status_msg":"rate limit"}}`},
		{200, "", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{503, "Wed, 21 Oct 2015 07:28:00 GMT", "<html><title>502 Bad Gateway</title></html>"},
		{500, "-1", `{"object":"error","message":"max_model_len exceeded","type":"BadRequestError","code":400}`},
		{404, "1e9", `{"error":{"status":403,"innererror":{"code":"ResponsibleAIPolicyViolation"}},"detail":"x"}`},
		{413, "", "{\"error\":\"sk-fuzz-0123456789abcdef\xff\"}"},
	} {
		f.Add(tc.status, tc.retry, "", []byte(tc.body), uint8(0), "sk-fuzz-0123456789abcdef")
	}
	profiles := DefaultProfiles()
	names := []string{"openai", "deepseek", "qwen", "zhipu", "minimax", "azure", "vllm", "ollama", "kimi"}
	f.Fuzz(func(t *testing.T, status int, retryAfter, shouldRetry string, body []byte, prov uint8, key string) {
		key = apiKeyLike(key)
		src := &core.SourceConfig{Name: "src_1", Provider: names[int(prov)%len(names)], APIKey: key}
		prof := ProfileFor(profiles, src.Provider)
		h := http.Header{}
		if retryAfter != "" {
			h.Set("Retry-After", retryAfter)
			h.Set("Retry-After-Ms", retryAfter)
		}
		if shouldRetry != "" {
			h.Set("X-Should-Retry", shouldRetry)
		}
		err := ClassifyResponse(src, prof, status%1000, h, body)
		var (
			te *core.TransientError
			de *core.SourceDeadError
			re *core.RequestRejectedError
			ie *core.ResultInvalidError
		)
		var code, msg string
		switch {
		case errors.As(err, &te):
			code, msg = te.Code, te.Message
			if te.RetryAfter < 0 || te.RetryAfter > DefaultMaxRetryAfter {
				t.Fatalf("retry after %v", te.RetryAfter)
			}
		case errors.As(err, &de):
			code, msg = de.Code, de.Message
		case errors.As(err, &re):
			code, msg = re.Code, re.Message
		case errors.As(err, &ie):
			msg = ie.Message
		default:
			t.Fatalf("%T %v is none of the four classes", err, err)
		}
		if !errors.Is(err, core.ErrGateway) {
			t.Fatalf("%v does not match ErrGateway", err)
		}
		for what, s := range map[string]string{"error text": err.Error(), "code": code, "message": msg} {
			if strings.Contains(s, key) {
				t.Fatalf("%s %q holds the API key %q", what, s, key)
			}
		}
		if len(code) > 128 || len(msg) > maxMessageBytes+len("…") {
			t.Fatalf("code %d bytes, message %d bytes", len(code), len(msg))
		}

		env := parseEnvelope(body)
		if bytes.Count(body, []byte("["))+bytes.Count(body, []byte("{")) > 200 {
			return // the lexer's nesting bound is lower than encoding/json's
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		object := json.Valid(body) && len(trimmed) > 0 && trimmed[0] == '{'
		if env.json != object {
			t.Fatalf("parseEnvelope(%q).json = %v, encoding/json says object = %v", body, env.json, object)
		}
		if object && !repeatsKey(body) {
			checkEnvelope(t, body, env)
		}
	})
}

// checkEnvelope compares the OpenAI-shaped fields of env with encoding/json's
// reading of the same body: error.message, error.type and a string
// error.code.
func checkEnvelope(t *testing.T, body []byte, env envelope) {
	t.Helper()
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		t.Fatal(err)
	}
	var eo map[string]json.RawMessage
	if raw := top["error"]; len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &eo) != nil {
		return
	}
	for name, got := range map[string]string{"message": env.message, "type": env.typ, "code": env.code} {
		raw := eo[name]
		if len(raw) == 0 || raw[0] != '"' {
			continue
		}
		var want string
		_ = json.Unmarshal(raw, &want)
		if want == "" {
			continue // an empty one gives way to a flat or base_resp one
		}
		if got != want {
			t.Fatalf("error.%s of %q = %q, encoding/json %q", name, body, got, want)
		}
	}
}

// apiKeyLike makes a key of the kind providers issue from fuzz input:
// "sk-" and letters, digits, '-' and '_' (a key holding other bytes, or one
// inside the "[REDACTED]" mark, is no realistic key).
func apiKeyLike(s string) string {
	var b strings.Builder
	b.WriteString("sk-")
	for _, r := range s {
		if r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			b.WriteRune(r)
		}
	}
	if b.Len() < 12 {
		return "sk-fuzz-0123456789abcdef"
	}
	return b.String()
}
