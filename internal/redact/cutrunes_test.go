package redact

import (
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
		{"\xff\xfe\xfd", 2, "\xff\xfe"}, // invalid bytes count as rune starts
	} {
		if got := CutRunes(tc.in, tc.n); got != tc.want {
			t.Errorf("CutRunes(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

// FuzzCutRunes: the result is a prefix of at most n bytes, and valid UTF-8
// stays valid.
func FuzzCutRunes(f *testing.F) {
	for _, s := range []string{"", "abc", "abcé", "日本語", strings.Repeat("é", 200)} {
		f.Add(s, 4)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 0 || n > 1<<16 {
			return
		}
		got := CutRunes(s, n)
		if len(got) > n || !strings.HasPrefix(s, got) {
			t.Fatalf("CutRunes(%q, %d) = %q", s, n, got)
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("CutRunes(%q, %d) = %q: invalid UTF-8", s, n, got)
		}
	})
}
