package transport

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/internal/testkit"
)

// FuzzRetryAfter reads fuzzed retry headers as a client reads them — an
// HTTP response parsed by net/http from the wire, in reads of the sizes
// split gives — and holds RetryAfter to the standard library's reading of
// each header: the wait is within [0, max]; retry-after-ms and retry-after
// in seconds are strconv.ParseFloat's numbers, an HTTP date is
// http.ParseTime's; the same headers set directly give the same wait.
func FuzzRetryAfter(f *testing.F) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, s := range [][4]string{
		{"", "7", "", ""}, {"250", "9", "", ""}, {"x", "2", "", ""}, {"", now.Add(90 * time.Second).Format(http.TimeFormat), "", ""},
		{"", "-3", "", ""}, {"", "86400", "", ""}, {"12.5", "", "", ""}, {"", "", "6m0s", "2s"}, {"", "", "51.189s", ""},
		{"1e400", "NaN", "-1s", "+Inf"}, {"", "0x10", "1h", "0"},
	} {
		f.Add(s[0], s[1], s[2], s[3], false, []byte{5, 1, 200})
	}
	f.Fuzz(func(t *testing.T, ms, ra, resetReq, resetTok string, exhausted bool, split []byte) {
		values := map[string]string{"Retry-After-Ms": ms, "Retry-After": ra, "X-Ratelimit-Reset-Requests": resetReq, "X-Ratelimit-Reset-Tokens": resetTok}
		if exhausted {
			values["X-Ratelimit-Remaining-Requests"] = "0"
		}
		var raw strings.Builder
		raw.WriteString("HTTP/1.1 429 Too Many Requests\r\n")
		direct := http.Header{}
		for k, v := range values {
			if v == "" {
				continue
			}
			if strings.ContainsAny(v, "\r\n\x00") || strings.TrimSpace(v) != v {
				return // not a header value a server can send as it is
			}
			raw.WriteString(k + ": " + v + "\r\n")
			direct.Set(k, v)
		}
		raw.WriteString("Content-Length: 0\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(&testkit.SplitReader{Data: []byte(raw.String()), Sizes: split, Mod: 61}), nil)
		if err != nil {
			return // net/http refuses the header line
		}
		resp.Body.Close()
		const maxWait = time.Hour
		got := RetryAfter(resp.Header, now, maxWait)
		if got < 0 || got > maxWait {
			t.Fatalf("wait %v outside [0, %v]", got, maxWait)
		}
		if d := RetryAfter(direct, now, maxWait); d != got {
			t.Fatalf("read from the wire %v, set directly %v (%q)", got, d, values)
		}
		// The first usable hint decides, as the standard library reads it.
		if v := resp.Header.Get("Retry-After-Ms"); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 && f < 1e12 {
				if want := min(time.Duration(f*float64(time.Millisecond)), maxWait); got != want {
					t.Fatalf("retry-after-ms %q: %v, want %v", v, got, want)
				}
				return
			}
		}
		if v := resp.Header.Get("Retry-After"); v != "" {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				if f > 0 && f < 1e9 {
					if want := min(time.Duration(f*float64(time.Second)), maxWait); got != want {
						t.Fatalf("retry-after %q: %v, want %v", v, got, want)
					}
					return
				}
			} else if at, err := http.ParseTime(v); err == nil && at.After(now) {
				if want := min(at.Sub(now), maxWait); got != want {
					t.Fatalf("retry-after %q: %v, want %v", v, got, want)
				}
				return
			}
		}
	})
}

// thinkRecord is a thinkOut that keeps the text.
type thinkRecord struct{ content, thinking strings.Builder }

func (r *thinkRecord) answer(s string) { r.content.WriteString(s) }
func (r *thinkRecord) think(s string)  { r.thinking.WriteString(s) }
func (r *thinkRecord) moveAnswer() {
	r.thinking.WriteString(r.content.String())
	r.content.Reset()
}

// FuzzThinkFilter feeds the think-tag filter a content text in deltas of
// the sizes split gives, in either mode: the answer and the thinking are
// those of the text fed whole; a text without any tag is all answer; no
// byte is lost or made up — answer and thinking hold the text without the
// tags the filter consumed.
func FuzzThinkFilter(f *testing.F) {
	for _, s := range []string{
		"<think>\nsteps\n</think>\n\nanswer", "  <think>x</think>y <think>kept</think>", "reasoning here</think>the answer",
		"<thi", "plain text", "a<think>b</think>c<think>d", "</think></think><think>", "<think><think></think>",
	} {
		f.Add(s, []byte{1, 3, 0}, true)
		f.Add(s, []byte{}, false)
	}
	f.Fuzz(func(t *testing.T, text string, split []byte, anywhere bool) {
		mode := thinkLeading
		if anywhere {
			mode = thinkAnywhere
		}
		feed := func(split []byte) (string, string, bool) {
			var fl thinkFilter
			fl.reset(mode)
			var r thinkRecord
			rest, i := text, 0
			for len(rest) > 0 {
				n := len(rest)
				if len(split) > 0 {
					n = min(n, int(split[i%len(split)])%13+1)
					i++
				}
				fl.feed(rest[:n], &r)
				rest = rest[n:]
			}
			fl.flush(&r)
			return r.content.String(), r.thinking.String(), fl.stripped
		}
		wc, wt, _ := feed(nil)
		gc, gt, stripped := feed(split)
		if gc != wc || gt != wt {
			t.Fatalf("%q in pieces %v: (%q, %q), whole (%q, %q)", text, split, gc, gt, wc, wt)
		}
		if !strings.Contains(text, "<think>") && !strings.Contains(text, "</think>") && (gc != text || gt != "") {
			t.Fatalf("%q without a tag: (%q, %q)", text, gc, gt)
		}
		// What is not kept is tags: none unless a tag was consumed, at most
		// all of them.
		tags := strings.Count(text, "<think>")*len(openTag) + strings.Count(text, "</think>")*len(closeTag)
		kept := len(gc) + len(gt)
		if kept > len(text) || kept < len(text)-tags || stripped != (kept < len(text)) {
			t.Fatalf("%q: (%q, %q) keeps %d of %d bytes (a tag consumed: %v)", text, gc, gt, kept, len(text), stripped)
		}
	})
}
