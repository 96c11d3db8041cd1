package redact

import (
	"math"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCutRunes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"", 4, ""},
		{"abcd", 4, "abcd"},
		{"abcde", 4, "abcd"},
		{"abcé", 4, "abc"}, // é is two bytes: cut before it
		{"abcé", 5, "abcé"},
		{"日本語", 4, "日"}, // three bytes a rune
		{"日本語", 2, ""},
		{"\xff\xfe\xfd", 2, "\xff\xfe"},                 // invalid bytes count as rune starts
		{"0000\x90\x90\x90\x90", 7, "0000\x90\x90\x90"}, // so do stray continuation bytes
		{"ab" + strings.Repeat("\x90", 100), 50, "ab" + strings.Repeat("\x90", 48)},
		{"a\xe6\x97", 2, "a\xe6"}, // a truncated rune is invalid: cut like one
		{"a日", 3, "a"},
	} {
		if got := CutRunes(tc.in, tc.n); got != tc.want {
			t.Errorf("CutRunes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzCutRunes: the result is a prefix of at most n bytes that stops
// short of n only inside a rune, and valid UTF-8 stays valid.
func FuzzCutRunes(f *testing.F) {
	for _, s := range []string{"", "abc", "abcé", "日本語", strings.Repeat("é", 200)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := CutRunes(s, n)
		if len(got) > n || !strings.HasPrefix(s, got) || len(got) < min(n, len(s))-(utf8.UTFMax-1) {
			t.Fatalf("CutRunes(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("CutRunes(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
	})
}

// cutWhole is the reference for Cut: the whole text redacted, then cut.
func cutWhole(r *Redactor, s string, n int) string {
	out := r.String(strings.ToValidUTF8(s, "\uFFFD"))
	if len(out) <= max(n, 0) {
		return out
	}
	return cutMark(CutRunes(out, max(n, 0))) + "…"
}

// TestCutSeesPastShrunkWindow: when redaction shrinks the examined window
// (many keys, escaped keys), text beyond it reaches the first n bytes of
// the result; a key there must be redacted as a whole, not left as the
// 7 bytes that the window's edge kept.
func TestCutSeesPastShrunkWindow(t *testing.T) {
	t.Parallel()
	const key = "sk-test-SECRET+0123/456789abcdefGHIJ="
	r := New(key)
	for _, tc := range []struct{ name, in, want string }{
		{"key at the window's edge", strings.Repeat(key, 10) + " " + strings.Repeat("x", 18) + key + " tail",
			"[REDACTED] xxxxxxxxxxxxxxxxxx[REDACTED] tail"},
		{"text after many keys", strings.Repeat(key, 20) + " tail", "[REDACTED] tail"},
		{"invalid bytes shrink", strings.Repeat("\xff", 600) + key + " tail", "\uFFFD[REDACTED] tail"},
	} {
		for _, got := range []string{r.Cut(tc.in, 100), r.CutBytes([]byte(tc.in), 100)} {
			if got != tc.want {
				t.Errorf("%s: Cut = %q, want %q", tc.name, got, tc.want)
			}
		}
	}
	if got := r.Cut(key+" tail", math.MaxInt); got != "[REDACTED] tail" {
		t.Errorf("Cut(_, MaxInt) = %q", got)
	}
}

// TestCutIsRedactThenCut: Cut and CutBytes equal redacting the whole text
// and cutting that, on texts of many plain and escaped keys.
func TestCutIsRedactThenCut(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	keys := []string{"sk-test-SECRET+0123/456789abcdefGHIJ=", "k3y!x", "ab[cd]efghij"}
	forms := func(k string) []string {
		return []string{k, url.QueryEscape(k), url.QueryEscape(url.QueryEscape(k)), k[:min(7, len(k))], "\xff",
			strings.NewReplacer("/", `\/`, "+", `\u002b`, "=", `\u003D`).Replace(k), " ", "tail", "[REDACTED]"}
	}
	for iter := range 2000 {
		key := keys[iter%len(keys)]
		r, pieces := New(key), forms(key)
		var b strings.Builder
		for range rng.IntN(60) {
			b.WriteString(pieces[rng.IntN(len(pieces))])
		}
		s, n := b.String(), rng.IntN(200)
		want := cutWhole(r, s, n)
		if got := r.Cut(s, n); got != want {
			t.Fatalf("Cut(%q, %d) = %q, want %q", s, n, got, want)
		}
		if got := r.CutBytes([]byte(s), n); got != want {
			t.Fatalf("CutBytes(%q, %d) = %q, want %q", s, n, got, want)
		}
	}
}
