package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// FuzzClassifyResponse classifies random failures: any status, retry
// headers and body, for each known provider. It never panics; the error is
// one of the four classes and matches ErrGateway; the API key (also when
// the body echoes it) appears nowhere in the error; code and message stay
// within their bounds; the wait is within [0, DefaultMaxRetryAfter]. The
// body is read as an upstream's error body is, in reads of the sizes split
// gives, and the envelope is the same as of the whole body; it says "JSON"
// exactly when the body is a valid JSON object, and its message, type and
// code are encoding/json's reading of the error object.
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
		f.Add(tc.status, tc.retry, "", []byte(tc.body), uint8(0), "sk-fuzz-0123456789abcdef", []byte{0, 3, 250})
	}
	profiles := DefaultProfiles()
	names := []string{"openai", "deepseek", "qwen", "zhipu", "minimax", "azure", "vllm", "ollama", "kimi"}
	f.Fuzz(func(t *testing.T, status int, retryAfter, shouldRetry string, body []byte, prov uint8, key string, split []byte) {
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

		read, err := readBody(&testkit.SplitReader{Data: body, Sizes: split, Mod: 61}, nil, int64(len(body)), -1, nil)
		if err != nil || !bytes.Equal(read, body) {
			t.Fatalf("readBody in reads of %v: %q, %v", split, read, err)
		}
		env := parseEnvelope(read)
		if whole := parseEnvelope(body); env != whole {
			t.Fatalf("envelope of the body read in pieces %+v, of the whole body %+v", env, whole)
		}
		trimmed := bytes.TrimLeft(body, " \t\r\n")
		object := json.Valid(body) && len(trimmed) > 0 && trimmed[0] == '{'
		if env.json != object {
			t.Fatalf("parseEnvelope(%q).json = %v, encoding/json says object = %v", body, env.json, object)
		}
		if object {
			checkEnvelope(t, body, env)
		}
	})
}

// checkEnvelope compares the error object's fields of env with
// encoding/json's reading of the same body into a plain struct: a
// non-empty error.message and error.type, and error.code given last as a
// string (its text) or a number (as written).
func checkEnvelope(t *testing.T, body []byte, env envelope) {
	t.Helper()
	var ref struct {
		Error struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	var te *json.UnmarshalTypeError
	if err := json.Unmarshal(body, &ref); err != nil && !errors.As(err, &te) {
		t.Fatal(err)
	}
	if m := ref.Error.Message; m != "" && env.message != m {
		t.Fatalf("error.message of %q = %q, encoding/json %q", body, env.message, m)
	}
	if ty := ref.Error.Type; ty != "" && env.typ != ty {
		t.Fatalf("error.type of %q = %q, encoding/json %q", body, env.typ, ty)
	}
	if c := bytes.TrimSpace(ref.Error.Code); len(c) > 0 {
		want := ""
		switch {
		case c[0] == '"':
			_ = json.Unmarshal(c, &want)
		case c[0] == '-' || c[0] >= '0' && c[0] <= '9':
			want = string(c)
		default:
			return
		}
		if env.code != want {
			t.Fatalf("error.code of %q = %q, encoding/json %q", body, env.code, want)
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
