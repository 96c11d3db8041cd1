package transport

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		headers map[string]string
		max     time.Duration
		want    time.Duration
	}{
		{"none", nil, 0, 0},
		{"seconds", map[string]string{"Retry-After": "7"}, 0, 7 * time.Second},
		{"decimal seconds", map[string]string{"Retry-After": "0.5"}, 0, 500 * time.Millisecond},
		{"http date", map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, 0, 90 * time.Second},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Minute).Format(http.TimeFormat)}, 0, 0},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, 0},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, 0},
		{"ms first", map[string]string{"Retry-After-Ms": "250", "Retry-After": "9"}, 0, 250 * time.Millisecond},
		{"ms decimal", map[string]string{"retry-after-ms": "12.5"}, 0, 12500 * time.Microsecond},
		{"bad ms falls back", map[string]string{"Retry-After-Ms": "x", "Retry-After": "2"}, 0, 2 * time.Second},
		{"capped default", map[string]string{"Retry-After": "86400"}, 0, DefaultMaxRetryAfter},
		{"capped custom", map[string]string{"Retry-After": "30"}, 5 * time.Second, 5 * time.Second},
		{"reset tokens duration", map[string]string{"X-Ratelimit-Reset-Tokens": "51.189s"}, 0, 51189 * time.Millisecond},
		{"reset requests minutes", map[string]string{"X-Ratelimit-Reset-Requests": "6m0s"}, 0, 6 * time.Minute},
		{"reset ms", map[string]string{"X-Ratelimit-Reset-Requests": "20ms"}, 0, 20 * time.Millisecond},
		{"reset bare seconds", map[string]string{"X-Ratelimit-Reset-Tokens": "3"}, 0, 3 * time.Second},
		{"reset smaller when none exhausted", map[string]string{"X-Ratelimit-Reset-Requests": "6m0s", "X-Ratelimit-Reset-Tokens": "2s"}, 0, 2 * time.Second},
		{"reset of exhausted limit", map[string]string{
			"X-Ratelimit-Reset-Requests": "6m0s", "X-Ratelimit-Remaining-Requests": "0",
			"X-Ratelimit-Reset-Tokens": "2s", "X-Ratelimit-Remaining-Tokens": "5000",
		}, 0, 6 * time.Minute},
		{"both exhausted takes larger", map[string]string{
			"X-Ratelimit-Reset-Requests": "1s", "X-Ratelimit-Remaining-Requests": "0",
			"X-Ratelimit-Reset-Tokens": "1m30s", "X-Ratelimit-Remaining-Tokens": "0",
		}, 0, 90 * time.Second},
		{"retry-after beats reset", map[string]string{"Retry-After": "1", "X-Ratelimit-Reset-Tokens": "40s"}, 0, time.Second},
		{"reset capped", map[string]string{"X-Ratelimit-Reset-Tokens": "2h"}, 0, DefaultMaxRetryAfter},
		{"reset garbage", map[string]string{"X-Ratelimit-Reset-Tokens": "soon"}, 0, 0},
		// A wait longer than any Duration is still a wait: capped, never
		// read as no hint at all.
		{"huge seconds capped", map[string]string{"Retry-After": "9999999999"}, 0, DefaultMaxRetryAfter},
		{"seconds beyond a duration capped", map[string]string{"Retry-After": "1e300"}, 0, DefaultMaxRetryAfter},
		{"huge ms capped", map[string]string{"Retry-After-Ms": "10000000000000"}, 0, DefaultMaxRetryAfter},
		{"huge ms beats retry-after", map[string]string{"Retry-After-Ms": "1e13", "Retry-After": "2"}, 0, DefaultMaxRetryAfter},
		{"huge bare reset capped", map[string]string{"X-Ratelimit-Reset-Tokens": "5000000000"}, 0, DefaultMaxRetryAfter},
		{"nan seconds is garbage", map[string]string{"Retry-After": "NaN"}, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := RetryAfter(h, now, tt.max); got != tt.want {
				t.Fatalf("RetryAfter = %v, want %v", got, tt.want)
			}
		})
	}
}
