package redact_test

import (
	"strings"
	"testing"

	"github.com/polygateway/polygateway/internal/redact"
)

// FuzzString checks the rule on any text and secret: no run of
// FragmentLen bytes of the secret (the whole secret when it is shorter)
// survives String or Cut, text without a secret is unchanged, Cut never
// exceeds its bound, and Cut (and CutBytes, the same) is a prefix of the
// whole text redacted: redaction first, then the cut.
func FuzzString(f *testing.F) {
	f.Add("bad key sk-abcdefgh12345678 given", "sk-abcdefgh12345678", 20)
	f.Add(`{"error":"sk-ab\/cd%2B0123456789"}`, "sk-ab/cd+0123456789", 12)
	f.Add("12345678abcde", "12345678ED]abcde", 5)
	f.Add("%25%32%42\\u002b\\\\u002b", "++++++++", 3)
	f.Add(strings.Repeat("0123456789", 9)+strings.Repeat("x", 43)+"0123456789 tail", "0123456789", 60)
	f.Fuzz(func(t *testing.T, text, secret string, n int) {
		secret = strings.TrimSpace(secret)
		r := redact.New(secret)
		out := r.String(text)
		cut := r.Cut(text, n%4096)
		if r == nil {
			if out != text {
				t.Fatalf("no secret, yet String changed %q to %q", text, out)
			}
			return
		}
		for _, got := range []string{out, strings.TrimSuffix(cut, "…")} {
			if l := leak(got, secret); l != "" {
				t.Fatalf("String/Cut(%q) with secret %q = %q: %q survived", text, secret, got, l)
			}
		}
		if leak(text, secret) == "" && !strings.ContainsAny(text, `%\`) && out != text {
			t.Fatalf("text without the secret changed: %q -> %q", text, out)
		}
		if m := max(n%4096, 0); len(cut) > m+len("…") {
			t.Fatalf("Cut(_, %d) is %d bytes", m, len(cut))
		}
		whole := r.String(strings.ToValidUTF8(text, "\uFFFD"))
		if !strings.HasPrefix(whole, strings.TrimSuffix(cut, "…")) {
			t.Fatalf("Cut(%q, %d) = %q is not a prefix of the redacted text %q", text, n%4096, cut, whole)
		}
		if b := r.CutBytes([]byte(text), n%4096); b != cut {
			t.Fatalf("CutBytes(%q, %d) = %q, Cut = %q", text, n%4096, b, cut)
		}
	})
}
