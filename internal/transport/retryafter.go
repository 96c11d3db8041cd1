package transport

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// DefaultMaxRetryAfter caps every server-suggested wait (10 minutes).
const DefaultMaxRetryAfter = 10 * time.Minute

// RetryAfter reads the upstream's retry hint from response headers and
// returns how long to wait from now, or 0 when there is no usable hint.
// The result is capped at maxWait (≤ 0 means DefaultMaxRetryAfter).
//
// Precedence:
//  1. retry-after-ms: milliseconds, decimals allowed (OpenAI, Azure);
//  2. retry-after: seconds (decimals allowed) or an HTTP date;
//  3. x-ratelimit-reset-requests / x-ratelimit-reset-tokens: Go-style
//     duration strings ("51.189s", "6m0s", "20ms"; bare numbers are
//     seconds). When the matching x-ratelimit-remaining-* header is "0"
//     that reset is the binding one (the larger of the two if both are
//     exhausted); otherwise the smaller reset is used.
//
// Negative, unparsable or past values count as absent; a value too large
// for a time.Duration is capped like any other.
func RetryAfter(h http.Header, now time.Time, maxWait time.Duration) time.Duration {
	if maxWait <= 0 {
		maxWait = DefaultMaxRetryAfter
	}
	capped := func(d time.Duration) time.Duration { return min(d, maxWait) }
	if v := h.Get("Retry-After-Ms"); v != "" {
		if d, ok := positive(v, time.Millisecond); ok {
			return capped(d)
		}
	}
	if v := strings.TrimSpace(h.Get("Retry-After")); v != "" {
		if _, err := strconv.ParseFloat(v, 64); err == nil {
			if d, ok := positive(v, time.Second); ok {
				return capped(d)
			}
		} else if t, err := http.ParseTime(v); err == nil {
			if d := t.Sub(now); d > 0 {
				return capped(d)
			}
		}
	}
	req, reqOK := resetDuration(h.Get("X-Ratelimit-Reset-Requests"))
	tok, tokOK := resetDuration(h.Get("X-Ratelimit-Reset-Tokens"))
	reqOut := reqOK && strings.TrimSpace(h.Get("X-Ratelimit-Remaining-Requests")) == "0"
	tokOut := tokOK && strings.TrimSpace(h.Get("X-Ratelimit-Remaining-Tokens")) == "0"
	switch {
	case reqOut && tokOut:
		return capped(max(req, tok))
	case reqOut:
		return capped(req)
	case tokOut:
		return capped(tok)
	case reqOK && tokOK:
		return capped(min(req, tok))
	case reqOK:
		return capped(req)
	case tokOK:
		return capped(tok)
	}
	return 0
}

// resetDuration parses an x-ratelimit-reset-* value: a Go-style duration
// ("1m30.5s") or a bare number of seconds.
func resetDuration(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return positive(v, time.Second)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}

// positive parses v, a number of units, as a positive duration; one too
// large for a time.Duration saturates (the caller caps it).
func positive(v string, unit time.Duration) (time.Duration, bool) {
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || !(f > 0) {
		return 0, false
	}
	if f >= math.MaxInt64/float64(unit) {
		return math.MaxInt64, true
	}
	return time.Duration(f * float64(unit)), true
}
