package transport

import (
	"bytes"
	"encoding/json"
	"strconv"
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
			checkChunkValues(t, in, &l, &c)
			var a assembler
			p := openAIProfile()
			a.reset(&p, false, "m")
			a.apply(&l, &c)
			a.end()
		}
	})
}

// checkChunkValues compares what parseChunk decoded from the valid object
// in with encoding/json's reading: the model, and for a single choice
// (index 0 or none) its content, refusal, reasoning_content and
// finish_reason strings and the usage counts. Bodies that repeat a key
// are left out (encoding/json keeps the last, the lexer reads each).
func checkChunkValues(t *testing.T, in []byte, l *lexer, c *chunk) {
	t.Helper()
	if repeatsKey(in) {
		return
	}
	// A map, not a struct: encoding/json matches struct fields ignoring
	// case, the providers' JSON (and the lexer) do not.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(in, &top); err != nil {
		t.Fatalf("encoding/json rejects %q: %v", in, err)
	}
	ref := struct{ Model, Choices, Usage json.RawMessage }{top["model"], top["choices"], top["usage"]}
	str := func(what string, raw json.RawMessage, s span) {
		t.Helper()
		if len(raw) == 0 || raw[0] != '"' {
			return
		}
		var want string
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatalf("%s %s: %v", what, raw, err)
		}
		if got := l.string(s); !s.set || got != want {
			t.Fatalf("%s of %q = %q (set %v), encoding/json %q", what, in, got, s.set, want)
		}
	}
	str("model", ref.Model, c.model)
	if len(ref.Usage) > 0 && ref.Usage[0] == '{' {
		var u map[string]json.RawMessage
		_ = json.Unmarshal(ref.Usage, &u)
		count := func(what string, raw json.RawMessage, got int64, has bool) {
			t.Helper()
			if len(raw) == 0 || !bytes.ContainsAny(raw[:1], "0123456789") || bytes.ContainsAny(raw, ".eE") {
				return
			}
			want, err := strconv.ParseInt(string(raw), 10, 64)
			if err != nil || want > 1<<53 {
				return
			}
			if !has || got != want {
				t.Fatalf("usage %s of %q = %d (%v), encoding/json %d", what, in, got, has, want)
			}
		}
		if _, dup := u["input_tokens"]; !dup {
			count("prompt_tokens", u["prompt_tokens"], c.usage.prompt, c.usage.hasPrompt)
		}
		if _, dup := u["output_tokens"]; !dup {
			count("completion_tokens", u["completion_tokens"], c.usage.completion, c.usage.hasCompletion)
		}
	}
	var choices []map[string]json.RawMessage
	if len(ref.Choices) == 0 || ref.Choices[0] != '[' || json.Unmarshal(ref.Choices, &choices) != nil || len(choices) != 1 {
		return
	}
	ch := choices[0]
	if idx, ok := ch["index"]; ok && string(idx) != "0" {
		return
	}
	if !c.picked {
		t.Fatalf("%q: the only choice was not picked", in)
	}
	str("finish_reason", ch["finish_reason"], c.finish)
	// The choice carries its answer when its delta or message is an
	// object, or its text a string.
	object := func(raw json.RawMessage) bool { return len(raw) > 0 && raw[0] == '{' }
	if want := object(ch["delta"]) || object(ch["message"]) || len(ch["text"]) > 0 && ch["text"][0] == '"'; c.message != want {
		t.Fatalf("%q: message = %v, encoding/json reads %v", in, c.message, want)
	}
	delta, ok := ch["delta"]
	if _, both := ch["message"]; both == ok {
		return
	} else if both {
		delta = ch["message"]
	}
	var d map[string]json.RawMessage
	if len(delta) == 0 || delta[0] != '{' || json.Unmarshal(delta, &d) != nil {
		return
	}
	if raw := d["content"]; len(raw) > 0 && raw[0] == '"' {
		if _, text := ch["text"]; !text {
			if len(c.content) != 1 {
				t.Fatalf("%q: %d content spans for a string content", in, len(c.content))
			}
			str("content", raw, c.content[0])
		}
	}
	str("refusal", d["refusal"], c.refusal)
	str("reasoning_content", d["reasoning_content"], c.reasoningC)
	str("reasoning", d["reasoning"], c.reasoning)
}

// repeatsKey reports whether some object of the valid JSON in repeats a key.
func repeatsKey(in []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(in))
	type frame struct {
		keys   map[string]bool
		object bool
		key    bool // the next token is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			top := &stack[n-1]
			if tok == json.Delim('}') {
				stack = stack[:n-1]
				continue
			}
			if top.key {
				k := tok.(string)
				if top.keys[k] {
					return true
				}
				top.keys[k], top.key = true, false
				continue
			}
			top.key = true
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, frame{keys: map[string]bool{}, object: true, key: true})
		case json.Delim('['):
			stack = append(stack, frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
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
