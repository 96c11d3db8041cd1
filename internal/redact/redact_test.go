package redact_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/polygateway/polygateway/internal/redact"
)

const key = "sk-test-SECRET+0123/456789abcdefGHIJ=" // 37 bytes with + / =

// leak returns the first run of redact.FragmentLen consecutive bytes of
// secret in text ("" when there is none); a secret shorter than that leaks
// only whole. It is deliberately naive: an oracle, not the algorithm.
func leak(text, secret string) string {
	n := min(redact.FragmentLen, len(secret))
	for j := 0; j+n <= len(secret); j++ {
		if strings.Contains(text, secret[j:j+n]) {
			return secret[j : j+n]
		}
	}
	return ""
}

// leakDecoded is leak on text and on text with its URL and JSON escapes
// undone once and twice.
func leakDecoded(text, secret string) string {
	forms := []string{text}
	cur := text
	for range 2 {
		if u, err := url.PathUnescape(cur); err == nil {
			forms = append(forms, u)
		}
		j := strings.NewReplacer(`\/`, "/", `\u002b`, "+", `\u002B`, "+", `\u003d`, "=", `\u003D`, "=", `\u002f`, "/", `\u002F`, "/", `\\`, `\`).Replace(cur)
		forms = append(forms, j)
		cur = j
		if u, err := url.PathUnescape(cur); err == nil {
			cur = u
		}
	}
	for _, f := range forms {
		if l := leak(f, secret); l != "" {
			return l
		}
	}
	return ""
}

func TestStringRemovesWholeKeysAndFragments(t *testing.T) {
	t.Parallel()
	r := redact.New(key)
	for _, tc := range []struct{ name, in, want string }{
		{"whole", "bad key " + key + " given", "bad key [REDACTED] given"},
		{"twice", key + key, "[REDACTED]"},
		{"prefix at a cut", "echo: " + key[:20], "echo: [REDACTED]"},
		{"suffix after a window start", key[15:] + " trailing", "[REDACTED] trailing"},
		{"fragment between cuts", "x" + key[5:13] + "y", "x[REDACTED]y"},
		{"seven bytes stay", "x" + key[:7] + "y", "x" + key[:7] + "y"},
		{"json slash", `{"auth":"` + strings.ReplaceAll(key, "/", `\/`) + `"}`, `{"auth":"[REDACTED]"}`},
		{"json unicode", strings.NewReplacer("+", `\u002B`, "=", `\u003d`).Replace(key), "[REDACTED]"},
		{"url encoded", "https://h/x?k=" + url.QueryEscape(key) + "&a=1", "https://h/x?k=[REDACTED]&a=1"},
		{"url encoded lower hex", strings.NewReplacer("+", "%2b", "/", "%2f", "=", "%3d").Replace(key), "[REDACTED]"},
		{"double url encoded", url.QueryEscape(url.QueryEscape(key)), "[REDACTED]"},
		{"json inside json", `"{\"k\":\"` + strings.ReplaceAll(key, "/", `\\\/`) + `\"}"`, `"{\"k\":\"[REDACTED]\"}"`},
		{"no key", "nothing to see here", "nothing to see here"},
		{"trimmed key", "x " + strings.TrimSpace(key) + " y", "x [REDACTED] y"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q) = %q, want %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestShortAndPlaceholderSecrets(t *testing.T) {
	t.Parallel()
	if redact.New("", "abc", "none", "NONE", "  ") != nil {
		t.Fatal("secrets below MinSecretLen or none were kept")
	}
	if got := redact.String("abc none def", "none", "abc"); got != "abc none def" {
		t.Fatalf("placeholders redacted: %q", got)
	}
	r := redact.New("k3y!x")
	if got := r.String("a k3y!x b k3y! c"); got != "a [REDACTED] b k3y! c" {
		t.Fatalf("short secret: %q", got)
	}
	var nilR *redact.Redactor
	//nolint:errorlint // identity: the very error must come back
	if nilR.String("x") != "x" || nilR.Cut("abcdef", 3) != "abc…" || nilR.Error(io.EOF) != io.EOF {
		t.Fatal("a nil Redactor changed text")
	}
}

func TestSeveralSecrets(t *testing.T) {
	t.Parallel()
	r := redact.New("first-secret-AAAA", "second-secret-BBBB", "first-secret-AAAA")
	got := r.String("a=first-secret-AAAA b=second-secret-BBBB")
	if got != "a=[REDACTED] b=[REDACTED]" {
		t.Fatalf("String = %q", got)
	}
}

func TestCutRedactsFirst(t *testing.T) {
	t.Parallel()
	r := redact.New(key)
	for off := 0; off < 140; off++ {
		text := strings.Repeat("a", off) + key + strings.Repeat("b", 100)
		for _, n := range []int{0, 1, 7, 64, 80, 100, 120, 200} {
			got := r.Cut(text, n)
			if l := leak(got, key); l != "" {
				t.Fatalf("Cut(key at %d, %d) = %q leaks %q", off, n, got, l)
			}
			if len(got) > n+len("…") {
				t.Fatalf("Cut(_, %d) is %d bytes", n, len(got))
			}
			if strings.Contains(got, "[REDA") && !strings.Contains(got, redact.Mark) {
				t.Fatalf("Cut left a partial mark: %q", got)
			}
		}
	}
	if got := r.Cut("short", 10); got != "short" {
		t.Fatalf("Cut of a short text = %q", got)
	}
	if got := r.Cut("héllo wörld", 2); got != "h…" {
		t.Fatalf("Cut split a rune: %q", got)
	}
	if got := r.Cut("bad \xff byte", 100); !utf8.ValidString(got) {
		t.Fatalf("Cut kept invalid UTF-8: %q", got)
	}
	// A secret split by an invalid byte is not joined into a longer piece.
	split := key[:6] + "\xff" + key[6:12]
	if got := r.Cut(split, 100); leak(got, key) != "" {
		t.Fatalf("invalid byte dropped and halves joined: %q", got)
	}
}

func TestCutBytesReadsOnlyAWindow(t *testing.T) {
	r := redact.New(key)
	huge := make([]byte, 8<<20)
	copy(huge[100:], key)
	got := r.CutBytes(huge, 120)
	if leak(got, key) != "" || !strings.HasSuffix(got, "…") || len(got) > 124 {
		t.Fatalf("CutBytes = %q", got)
	}
	allocs := testing.AllocsPerRun(10, func() { _ = r.CutBytes(huge, 120) })
	if allocs > 10 {
		t.Fatalf("CutBytes allocates %v times", allocs)
	}
}

func TestErrorRedactsTheWholeChain(t *testing.T) {
	t.Parallel()
	r := redact.New(key)
	base := errors.New("dial failed for https://host/v1?key=" + key)
	err := r.Error(base)
	if leak(err.Error(), key) != "" || !errors.Is(err, base) {
		t.Fatalf("Error = %v", err)
	}
	if errors.Unwrap(err) != nil {
		t.Fatal("the redacted error unwraps to the original, whose text shows the key")
	}
	inner := fmt.Errorf("malformed answer %q: %w", key, io.ErrUnexpectedEOF)
	ue := &url.Error{Op: "Post", URL: "https://h/v1?k=" + url.QueryEscape(key), Err: inner}
	got := r.Error(ue)
	var back *url.Error
	if !errors.As(got, &back) || leak(back.URL, key) != "" || !errors.Is(got, io.ErrUnexpectedEOF) {
		t.Fatalf("url.Error = %v", got)
	}
	for e := got; e != nil; e = errors.Unwrap(e) {
		if leakDecoded(e.Error(), key) != "" {
			t.Fatalf("an error along the chain shows the key: %v", e)
		}
	}
	timeout := &url.Error{Op: "Get", URL: "https://h/?k=" + key, Err: fmt.Errorf("%s: %w", key, context.DeadlineExceeded)}
	var ne interface{ Timeout() bool }
	if got := r.Error(timeout); !errors.As(got, &ne) || !ne.Timeout() || !errors.Is(got, context.DeadlineExceeded) {
		t.Fatalf("a timeout is no longer one: %v", got)
	}
	if r.Error(io.EOF) != io.EOF { //nolint:errorlint // identity: an error without a key is returned as it is
		t.Fatal("an error without a key was replaced")
	}
	if again := r.Error(err); again != err { //nolint:errorlint // identity: a redacted error is returned as it is
		t.Fatal("a redacted error was wrapped twice")
	}
}

// escape writes s in one of the forms an upstream may echo it in.
func escape(rng *rand.Rand, s string) string {
	switch rng.IntN(6) {
	case 0:
		return url.QueryEscape(s)
	case 1:
		return strings.NewReplacer("/", `\/`, "+", `\u002b`, "=", `\u003D`).Replace(s)
	case 2:
		return url.QueryEscape(url.QueryEscape(s))
	case 3:
		return strings.NewReplacer("/", `\\\/`).Replace(s)
	}
	return s
}

// TestPropertyNoFragmentSurvives embeds the key (plain or escaped) at
// random offsets of random text, cuts windows out of it at random places
// (as read limits and snippets do) and checks that neither String of a
// window nor Cut of the whole leaves 8 consecutive bytes of the key.
func TestPropertyNoFragmentSurvives(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ0123456789 -_:/\\\"{}%+=é"
	r := redact.New(key)
	for iter := range 3000 {
		var b strings.Builder
		for range rng.IntN(4) + 1 {
			for range rng.IntN(200) {
				b.WriteByte(alphabet[rng.IntN(len(alphabet))])
			}
			b.WriteString(escape(rng, key))
		}
		for range rng.IntN(50) {
			b.WriteByte(alphabet[rng.IntN(len(alphabet))])
		}
		text := b.String()
		from := rng.IntN(len(text))
		to := from + rng.IntN(len(text)-from+1)
		window := text[from:to]
		if got := r.String(window); leakDecoded(got, key) != "" {
			t.Fatalf("iteration %d: String(%q) = %q leaks %q", iter, window, got, leakDecoded(got, key))
		}
		n := rng.IntN(len(text) + 1)
		if got := r.Cut(text, n); leakDecoded(strings.TrimSuffix(got, "…"), key) != "" {
			t.Fatalf("iteration %d: Cut(%q, %d) = %q leaks", iter, text, n, got)
		}
	}
}

func BenchmarkString64KiB(b *testing.B) {
	r := redact.New(key)
	text := strings.Repeat("Lorem ipsum dolor sit amet, consectetur adipiscing elit. ", 1150)[:64<<10]
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_ = r.String(text)
	}
}
