package transport

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzParseChunk checks the hand-written JSON reader against encoding/json:
// a chunk parses exactly when it is a valid JSON object, and it never panics.
func FuzzParseChunk(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"index":0,"delta":{"content":"hi","tool_calls":[{"index":0,"function":{"arguments":{"a":[1,2.5e3,-0]}}}]},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
		`{"error":{"code":400,"message":"\u00e9\ud83d\ude00"}}`,
		`{"a":01}`, `{"a":1.}`, `{"a":"\x01"}`, `{"a":[1,]}`, `{,}`, `[]`, `{"a":"\q"}`, `{"a":tru}`, ` {} `,
		`{"choices":[{"delta":{"content":[{"type":"text","text":"x"}]}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var (
			l lexer
			c chunk
		)
		got := parseChunk(&l, &c, in)
		if bytes.Count(in, []byte("["))+bytes.Count(in, []byte("{")) > 200 {
			return // our nesting bound is lower than encoding/json's
		}
		trimmed := bytes.TrimLeft(in, " \t\r\n")
		want := json.Valid(in) && len(trimmed) > 0 && trimmed[0] == '{'
		if got != want {
			t.Fatalf("parseChunk(%q) = %v, json.Valid says %v", in, got, want)
		}
		if got {
			var a assembler
			p := openAIProfile()
			a.reset(&p, false, "m")
			a.apply(&l, &c)
			a.end()
			if c.model.set {
				// Decoding must agree with encoding/json.
				var m struct{ Model *string }
				if err := json.Unmarshal(in, &m); err == nil && m.Model != nil && *m.Model != l.string(c.model) {
					t.Fatalf("model %q, encoding/json %q", l.string(c.model), *m.Model)
				}
			}
		}
	})
}

func TestLexerStrings(t *testing.T) {
	t.Parallel()
	for _, s := range []string{`"plain"`, `"esc\"aped\\ \/ \b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"lone \ud83d surrogate"`, `"bad \udc00 low"`, "\"raw é 中\"", "\"inv\xffalid\"", `"12345678901234567890 long enough for the word loop"`} {
		var l lexer
		l.reset([]byte(s))
		sp := l.str()
		if l.err {
			t.Fatalf("%s: error", s)
		}
		var want string
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		if got := l.string(sp); got != want {
			t.Fatalf("%s: got %q, want %q", s, got, want)
		}
	}
	for _, s := range []string{`"unterminated`, "\"ctl\x01\"", "\"ctl in a long run of text\x1f...\"", `"\x"`, `"\u12"`, `"\u12g4"`} {
		var l lexer
		l.reset([]byte(s))
		l.str()
		if !l.err {
			t.Fatalf("%q accepted", s)
		}
	}
}
