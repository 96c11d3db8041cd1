package bench

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"testing"

	"github.com/polygateway/polygateway"
)

// inMemory is an http.RoundTripper that answers every request with the
// same chat completion, without a network: what is left of a call is the
// work of the client (the library, or the raw arm's net/http and JSON).
type inMemory struct{ body []byte }

func (m inMemory) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	h := http.Header{"Content-Type": {"application/json"}}
	return &http.Response{StatusCode: http.StatusOK, Header: h, Body: io.NopCloser(bytes.NewReader(m.body)),
		ContentLength: int64(len(m.body)), Request: r}, nil
}

const inMemoryAnswer = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"bench-model",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"hello there"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`

// BenchmarkInMemory: the library's own CPU per call, with everything on as
// in governed and an in-memory RoundTripper under both arms (no cache, a
// cache miss, a cache hit). gov-µs/op is the library's cost of a call;
// the raw arm is net/http's client and encoding/json over the same
// RoundTripper.
func BenchmarkInMemory(b *testing.B) {
	hc := &http.Client{Transport: inMemory{[]byte(inMemoryAnswer)}}
	const url = "http://upstream.invalid/v1"
	raw := func(int) error { _, err := rawChat(context.Background(), hc, url, false, "hello"); return err }
	for _, tc := range []struct {
		name         string
		cache, salty bool
	}{{"NoCache", false, false}, {"CacheMiss", true, true}, {"CacheHit", true, false}} {
		b.Run(tc.name, func(b *testing.B) {
			c := governed(b, url, false, tc.cache, polygateway.WithHTTPClient(hc))
			salt := 0
			compare(b, 1, raw, func(int) error {
				if !tc.salty {
					return govChat(c, false, "hello")
				}
				salt++
				return govChat(c, false, "hello", polygateway.WithCacheSalt(strconv.Itoa(salt)))
			})
		})
	}
}
