// Package redact is the one redaction rule of the library: every error,
// log record, telemetry row, Raw field and HTTP error body built from text
// that may carry a secret (an upstream's echo of its API key, a URL with a
// token) passes through a Redactor before it is kept, cut or printed.
//
// The rule, for each secret of at least MinSecretLen bytes (after
// trimming spaces; "none" is never a secret):
//
//   - every run of FragmentLen or more consecutive bytes of the secret is
//     replaced by Mark, wherever it sits: a whole key, the prefix of a key
//     at the end of a window that was cut mid-key, the suffix of a key at
//     the start of a window that begins mid-key, a piece between two cuts;
//   - a secret shorter than FragmentLen is replaced only where it occurs
//     whole;
//   - the same holds for the secret written with escapes: percent-encoding
//     (%2B, %2f), JSON and common string escapes (\/, \u002b, \x2b), up to
//     two levels deep (a JSON string inside a JSON string, a URL-encoded
//     value inside JSON);
//   - redaction comes first, truncation second (Cut): a cut can then never
//     leave a longer piece of a secret than one the rule already allows.
//
// The package uses the standard library only, so that every layer can
// import it.
package redact

import (
	"errors"
	"math"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"
)

// Mark replaces every piece of a secret that is removed.
const Mark = "[REDACTED]"

// MinSecretLen is the shortest secret searched for: shorter ones (and
// "none") would mangle ordinary text and protect nothing.
const MinSecretLen = 4

// FragmentLen is the shortest run of consecutive bytes of a secret that
// is removed when it is not the whole secret.
const FragmentLen = 8

// maxDecodeDepth bounds how many levels of escaping are undone.
const maxDecodeDepth = 2

// escapeGrowth bounds how many bytes one byte of a secret can take in
// escaped text (a double-escaped "\\u002b" is 7 bytes, rounded up).
const escapeGrowth = 8

// Redactor removes a fixed set of secrets from text. A nil *Redactor
// removes nothing. It is immutable after New and safe for concurrent use.
type Redactor struct {
	// short are the secrets below FragmentLen bytes: removed whole.
	short []string
	// grams holds every FragmentLen-byte window of the longer secrets.
	grams gramSet
	// in marks the bytes of the long secrets: a text byte outside it rules
	// out every window that holds it.
	in [256]bool
	// maxLen is the length of the longest secret.
	maxLen int
	// bracket is set when a secret holds '[' or ']': Mark itself could then
	// complete a piece of it with its neighbours, so String repeats.
	bracket bool
}

// New returns a Redactor for secrets, or nil when none of them is worth
// searching for (empty, shorter than MinSecretLen, or "none"). Secrets are
// trimmed of surrounding spaces first, as the transports trim the keys
// they send.
func New(secrets ...string) *Redactor {
	var keep []string
	for _, s := range secrets {
		s = strings.TrimSpace(s)
		if len(s) < MinSecretLen || strings.EqualFold(s, "none") || slices.Contains(keep, s) {
			continue
		}
		keep = append(keep, s)
	}
	if len(keep) == 0 {
		return nil
	}
	r := &Redactor{}
	n := 0
	for _, s := range keep {
		r.maxLen = max(r.maxLen, len(s))
		r.bracket = r.bracket || strings.ContainsAny(s, "[]")
		if len(s) >= FragmentLen {
			n += len(s) - FragmentLen + 1
		}
	}
	r.grams.init(n)
	for _, s := range keep {
		if len(s) < FragmentLen {
			r.short = append(r.short, s)
			continue
		}
		for i := 0; i+FragmentLen <= len(s); i++ {
			r.grams.add(load(s, i))
		}
		for i := range len(s) {
			r.in[s[i]] = true
		}
	}
	return r
}

// String returns s with every piece of a secret the rule covers replaced
// by Mark. Text without any is returned as is, without copying.
func (r *Redactor) String(s string) string {
	if r == nil || len(s) < MinSecretLen {
		return s
	}
	out := r.once(s)
	for i := 0; r.bracket && i < 4 && out != s; i++ {
		s, out = out, r.once(out)
	}
	return out
}

// once applies the rule once.
func (r *Redactor) once(s string) string {
	spans := r.find(s, nil, nil)
	if strings.ContainsAny(s, `%\`) {
		spans = r.findDecoded(s, spans)
	}
	if len(spans) == 0 {
		return s
	}
	return replace(s, spans)
}

// Cut redacts s and then bounds it to n bytes at a rune boundary, with
// "…" appended when anything was cut. Invalid UTF-8 becomes U+FFFD first
// (never dropped, which could join the two halves of a secret). Only a
// prefix of s that can reach the first n bytes of the result is examined:
// a window beyond n, longer only while redaction shrank it so much that
// text further on could still reach them (all of s for a secret with '['
// or ']'), so a huge s costs no more than a short one unless it is mostly
// secrets.
func (r *Redactor) Cut(s string, n int) string {
	return r.cut(n, func(lim int) (string, bool) {
		if len(s) > lim {
			return CutRunes(s, lim), true
		}
		return s, false
	})
}

// CutBytes is Cut for a byte slice; only the examined prefix is copied.
func (r *Redactor) CutBytes(b []byte, n int) string {
	return r.cut(n, func(lim int) (string, bool) {
		if len(b) > lim {
			// One byte more than lim lets CutRunes see where a rune starts.
			return CutRunes(string(b[:lim+1]), lim), true
		}
		return string(b), false
	})
}

// cut is Cut of the text whose prefix of at most lim bytes prefix returns
// (and whether that is less than the whole).
func (r *Redactor) cut(n int, prefix func(lim int) (string, bool)) string {
	n = min(max(n, 0), math.MaxInt/4) // no text is longer; lim cannot overflow
	for lim := n + r.window() + utf8.UTFMax; ; lim *= 2 {
		s, cut := prefix(lim)
		if !utf8.ValidString(s) {
			s = strings.ToValidUTF8(s, "\uFFFD")
		}
		out := r.String(s)
		if cut && !r.settled(out, n) {
			continue
		}
		if len(out) > n {
			out, cut = cutMark(CutRunes(out, n)), true
		}
		if cut {
			out += "…"
		}
		return out
	}
}

// settled reports whether the first n bytes of out, the redaction of a
// prefix of a text, are those of the redaction of the whole text. Only
// the last window of the prefix can be redacted otherwise (a secret cut at
// its end); its part of out is at most a window of bytes kept and a Mark
// for each piece removed. The repeated passes of a secret with '[' or ']'
// move that part back by as much again each, so such a text is redacted
// whole.
func (r *Redactor) settled(out string, n int) bool {
	if r != nil && r.bracket {
		return false
	}
	return len(out)-r.window()-len(Mark)*strings.Count(out, Mark) >= n
}

// window is how far beyond a cut at n an escaped secret that starts
// before n can reach.
func (r *Redactor) window() int {
	if r == nil {
		return 0
	}
	return escapeGrowth * r.maxLen
}

// Error returns err with the secrets removed from the text it shows, and
// from the text of every error it wraps: a *url.Error is rebuilt with a
// redacted URL and a redacted cause (so errors.As still finds a
// *url.Error, a clean one); any other error whose text holds a secret is
// replaced by an error that shows the redacted text and matches the
// original with errors.Is (context.DeadlineExceeded, io.EOF, a sentinel)
// but does not unwrap to it, so that no error along the chain shows the
// secret. Errors without a secret are returned as they are.
func (r *Redactor) Error(err error) error {
	if r == nil || err == nil {
		return err
	}
	// The outermost value itself is looked at, not the chain: a wrapper
	// around a redacted error or a *url.Error may show text of its own.
	switch e := err.(type) { //nolint:errorlint // the outermost value is kept or rebuilt; matching a wrapped one would skip its wrapper's text
	case *redacted:
		return err
	case *url.Error:
		u, inner := r.String(e.URL), r.Error(e.Err)
		if u == e.URL && inner == e.Err { //nolint:errorlint // identity: did the cause come back unchanged
			return err
		}
		return &url.Error{Op: e.Op, URL: u, Err: inner}
	}
	msg := err.Error()
	if red := r.String(msg); red != msg {
		return &redacted{msg: red, err: err}
	}
	return err
}

// redacted shows a redacted message for an error whose text held a
// secret. It matches the original with errors.Is only: unwrapping would
// hand out the original's text.
type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }

// Is reports whether the original error matches target.
func (e *redacted) Is(target error) bool { return errors.Is(e.err, target) }

// Timeout reports whether the original error is a timeout (net.Error).
func (e *redacted) Timeout() bool {
	var t interface{ Timeout() bool }
	return errors.As(e.err, &t) && t.Timeout()
}

// String is New(secrets...).String(s).
func String(s string, secrets ...string) string { return New(secrets...).String(s) }

// span is a half-open byte range of the text to replace.
type span struct{ from, to int }

// find appends the spans of s (offsets mapped through at, when set) that
// the rule covers.
func (r *Redactor) find(s string, spans []span, at *view) []span {
	add := func(from, to int) {
		if at != nil {
			from, to = int(at.start[from]), int(at.end[to-1])
		}
		spans = append(spans, span{from, to})
	}
	if r.grams.n > 0 {
		run := span{-1, -1}
		for i := 0; i+FragmentLen <= len(s); {
			if !r.in[s[i+FragmentLen-1]] {
				// No window holding this byte can match.
				i += FragmentLen
				continue
			}
			if r.grams.has(load(s, i)) {
				if i <= run.to {
					run.to = i + FragmentLen
				} else {
					if run.from >= 0 {
						add(run.from, run.to)
					}
					run = span{i, i + FragmentLen}
				}
			}
			i++
		}
		if run.from >= 0 {
			add(run.from, run.to)
		}
	}
	for _, k := range r.short {
		for off := 0; ; {
			j := strings.Index(s[off:], k)
			if j < 0 {
				break
			}
			add(off+j, off+j+len(k))
			off += j + 1
		}
	}
	return spans
}

// findDecoded appends the spans of the secrets found in s once its
// escapes are undone (up to maxDecodeDepth levels), in s's offsets.
func (r *Redactor) findDecoded(s string, spans []span) []span {
	var v *view
	text := s
	for range maxDecodeDepth {
		if !hasEscape(text) {
			break
		}
		v = v.decode(text)
		text = string(v.b)
		spans = r.find(text, spans, v)
	}
	return spans
}

// replace returns s with every span replaced by Mark, overlapping and
// touching spans by a single one.
func replace(s string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return a.from - b.from })
	var b strings.Builder
	b.Grow(len(s))
	pos := 0
	for i := 0; i < len(spans); {
		from, to := spans[i].from, spans[i].to
		for i++; i < len(spans) && spans[i].from <= to; i++ {
			to = max(to, spans[i].to)
		}
		b.WriteString(s[pos:from])
		b.WriteString(Mark)
		pos = to
	}
	b.WriteString(s[pos:])
	return b.String()
}

// CutRunes returns at most n bytes of s, not splitting a rune (a byte that
// is not valid UTF-8 counts as a rune of its own).
func CutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Only a valid rune that starts in the last UTFMax-1 bytes and runs
	// past n is dropped; stray continuation bytes are kept like any
	// other invalid byte.
	for i := n - 1; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if _, size := utf8.DecodeRuneInString(s[i:]); i+size > n {
				return s[:i]
			}
			break
		}
	}
	return s[:n]
}

// cutMark drops a partial Mark left at the end of s by a cut.
func cutMark(s string) string {
	for i := max(0, len(s)-len(Mark)+1); i < len(s); i++ {
		if strings.HasPrefix(Mark, s[i:]) {
			return s[:i]
		}
	}
	return s
}

// load reads 8 bytes of s at i as a little-endian word.
func load(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// gramSet is an open-addressing set of 8-byte words.
type gramSet struct {
	slots []uint64
	shift uint
	zero  bool // the all-zero word is in the set (0 marks a free slot)
	n     int
}

func (g *gramSet) init(n int) {
	if n == 0 {
		return
	}
	size, shift := 8, uint(61)
	for size < 4*n {
		size, shift = size*2, shift-1
	}
	g.slots, g.shift = make([]uint64, size), shift
}

func (g *gramSet) slot(w uint64) uint64 { return (w * 0x9E3779B97F4A7C15) >> g.shift }

func (g *gramSet) add(w uint64) {
	g.n++
	if w == 0 {
		g.zero = true
		return
	}
	mask := uint64(len(g.slots) - 1)
	for i := g.slot(w); ; i = (i + 1) & mask {
		switch g.slots[i] {
		case w:
			return
		case 0:
			g.slots[i] = w
			return
		}
	}
}

func (g *gramSet) has(w uint64) bool {
	if w == 0 {
		return g.zero
	}
	mask := uint64(len(g.slots) - 1)
	for i := g.slot(w); ; i = (i + 1) & mask {
		switch g.slots[i] {
		case w:
			return true
		case 0:
			return false
		}
	}
}
