package polygatewaytest

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func benchPost(b *testing.B, s *Server, c *http.Client, body string) {
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		b.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkNonStream measures one raw non-streaming round trip.
func BenchmarkNonStream(b *testing.B) {
	s := NewServer(b)
	c := s.Client()
	b.ReportAllocs()
	for b.Loop() {
		benchPost(b, s, c, plainReq)
	}
}

// BenchmarkStream1000 measures one raw stream of 1,000 chunks.
func BenchmarkStream1000(b *testing.B) {
	s := NewServer(b, WithBehavior(OK().WithTokens(1000)))
	c := s.Client()
	b.ReportAllocs()
	for b.Loop() {
		benchPost(b, s, c, usageReq)
	}
}

// BenchmarkHandlerStream1000 measures the server side alone, without a
// network round trip.
func BenchmarkHandlerStream1000(b *testing.B) {
	s := NewServer(b, WithBehavior(OK().WithTokens(1000)), WithBodyHistory(0))
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(usageReq))
		req.ContentLength = int64(len(usageReq))
		w := discardWriter{h: http.Header{}}
		s.serveHTTP(&w, req)
	}
}

type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Flush()                      {}
