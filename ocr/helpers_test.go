package ocr_test

import (
	"fmt"
	"maps"
	"strconv"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/ocr"
	"github.com/polygateway/polygateway/ocr/ocrfake"
)

// Test documents: the fake decides by the upload's name, the client by the
// leading bytes.
var (
	pngBytes  = []byte("\x89PNG\r\n\x1a\nfake png pixels")
	jpegBytes = []byte("\xff\xd8\xff\xe0fake jpeg pixels\xff\xd9")
	pdfBytes  = []byte("%PDF-1.7\nfake pdf body\n%%EOF\n")
	gifBytes  = []byte("GIF89a fake gif")
)

// envFor configures scope OCR with one source per URL, in priority order
// (monkey_1 is always tried first), short backoffs and memory backends.
func envFor(urls []string, extra map[string]string) map[string]string {
	env := map[string]string{
		"PGW_LIMITER_BACKEND":        "memory",
		"PGW_BREAKER_BACKEND":        "memory",
		"PGW_CACHE_BACKEND":          "none",
		"PGW_TELEMETRY_BACKEND":      "none",
		"OCR__RETRY__BACKOFF_BASE_S": "0.01",
		"OCR__RETRY__BACKOFF_MAX_S":  "0.05",
	}
	for i, u := range urls {
		p := fmt.Sprintf("OCR__MONKEY__%d__", i+1)
		env[p+"BASE_URL"] = u
		env[p+"API_KEY"] = "none"
		env[p+"MODEL"] = "monkey-ocr"
		env[p+"TIMEOUT_S"] = "10"
		env[p+"PRIORITY"] = strconv.Itoa(i)
	}
	maps.Copy(env, extra)
	return env
}

// newClient assembles an OCR client for the given fakes and closes it at
// the end of the test.
func newClient(t *testing.T, cfg ocr.Config, extra map[string]string, urls []string, opts ...polygateway.Option) *ocr.Client {
	t.Helper()
	c, err := ocr.FromEnvWithConfig("OCR", cfg, append([]polygateway.Option{polygateway.WithEnv(envFor(urls, extra))}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newFake starts a fake server closed at the end of the test.
func newFake(t *testing.T) *ocrfake.Server {
	t.Helper()
	s := ocrfake.New()
	t.Cleanup(s.Close)
	return s
}

// refusedURL returns the URL of a server that no longer listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	s := ocrfake.New()
	s.Close()
	return s.URL
}

// breakerOf returns the breaker snapshot of the named source.
func breakerOf(t *testing.T, c *ocr.Client, name string) polygateway.BreakerSnapshot {
	t.Helper()
	for _, s := range c.Sources(t.Context()) {
		if s.Name == name {
			return s.Breaker
		}
	}
	t.Fatalf("no source %s", name)
	return polygateway.BreakerSnapshot{}
}

// urls returns the URLs of fakes.
func urls(fakes ...*ocrfake.Server) []string {
	out := make([]string, len(fakes))
	for i, f := range fakes {
		out[i] = f.URL
	}
	return out
}
