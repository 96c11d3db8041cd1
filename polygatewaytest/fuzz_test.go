package polygatewaytest

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzEmbedRequest checks the embeddings request parser on any body: it
// never panics, and a body it accepts renders as a valid answer with one
// entry per input.
func FuzzEmbedRequest(f *testing.F) {
	for _, seed := range []string{
		`{"model":"m","input":"one"}`,
		`{"model":"m","input":["a b","c"],"encoding_format":"base64","dimensions":3}`,
		`{"model":"m","input":[[1,2],[3]]}`,
		`{"model":"m","input":[1,2,3],"encoding_format":"float"}`,
		`{"model":"m","input":[""]}`,
		`{"model":"m","input":[["x"]]}`,
		`{"model":"m","input":null,"dimensions":-1}`,
		`{"input":{"a":1}}`,
		`[]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var e embedRequest
		if bad := e.parse(body, 4); bad != "" {
			if !json.Valid([]byte(bad)) {
				t.Fatalf("error body is not JSON: %s", bad)
			}
			return
		}
		if len(e.texts) == 0 || len(e.texts) != len(e.tokens) || len(e.texts) > MaxEmbeddingInputs ||
			e.dim < 1 || e.dim > MaxEmbeddingDim || len(e.texts)*e.dim > maxEmbeddingValues {
			t.Fatalf("accepted out of bounds: %d texts, %d tokens, dim %d", len(e.texts), len(e.tokens), e.dim)
		}
		out := renderEmbeddings(&e, e.Model, &Behavior{})
		var ans struct {
			Data []json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(out, &ans); err != nil || len(ans.Data) != len(e.texts) {
			t.Fatalf("answer %.200s: %v", out, err)
		}
	})
}

// FuzzSplitContent checks that splitting content into tokens loses
// nothing and gives one token per word.
func FuzzSplitContent(f *testing.F) {
	for _, seed := range []string{"", "ok", "The capital is Paris.", " a  b\t\nc ", "\u00e9t\u00e9 \u2014 x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		toks := splitContent(s)
		if strings.Join(toks, "") != s {
			t.Fatalf("tokens %q do not join to %q", toks, s)
		}
		if w := len(strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' || r == '\r' })); w > 0 && len(toks) != w {
			t.Fatalf("%q: %d tokens for %d words", s, len(toks), w)
		}
	})
}
