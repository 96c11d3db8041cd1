package proxy_test

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// BenchmarkChat compares one non-streaming chat completion with a ~1 KB
// prompt sent straight to the fake upstream ("direct") with the same
// request through the gateway ("gateway"), in the same process and run.
// Compare the two ns/op: the difference is the gateway's cost (governance
// included; without a stream watchdog the upstream answers with one JSON
// body, as the client asked).
func BenchmarkChat(b *testing.B) {
	up := fake(b, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(16)), fakeupstream.WithBodyHistory(0))
	e := baseEnv().source("LLM", "fake", 1, up.URL(), secretKey1, "fake-model", "MAX_CONCURRENCY", "1024")
	f := serve(b, proxy.Config{
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(b, "LLM", e)}, DefaultScope: "LLM"},
		Logger:   slog.New(slog.DiscardHandler),
	})
	prompt := strings.Repeat("lorem ipsum ", 86)[:1024]
	body := `{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}]}`
	for _, tc := range []struct{ name, url string }{
		{"direct", up.URL() + "/chat/completions"},
		{"gateway", f.ts.URL + "/v1/chat/completions"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 256}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := hc.Post(tc.url, "application/json", strings.NewReader(body))
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		})
	}
}

// BenchmarkStreamTTFT measures the time to the first content chunk of a
// 64-chunk stream, one stream at a time, straight from the fake upstream
// ("direct") and through the gateway ("gateway"), in the same process and
// run: ttft-µs/op of each, and the whole stream's ns/op.
func BenchmarkStreamTTFT(b *testing.B) {
	up := fake(b, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(64)), fakeupstream.WithBodyHistory(0))
	e := baseEnv().source("LLM", "fake", 1, up.URL(), secretKey1, "fake-model", "MAX_CONCURRENCY", "1024")
	f := serve(b, proxy.Config{
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(b, "LLM", e)}, DefaultScope: "LLM"},
		Logger:   slog.New(slog.DiscardHandler),
	})
	body := `{"model":"m","stream":true,"messages":[{"role":"user","content":"hello"}]}`
	for _, tc := range []struct{ name, url string }{
		{"direct", up.URL() + "/chat/completions"},
		{"gateway", f.ts.URL + "/v1/chat/completions"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 4}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			var ttft time.Duration
			for b.Loop() {
				start := time.Now()
				resp, err := hc.Post(tc.url, "application/json", strings.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				br := bufio.NewReader(resp.Body)
				first := true
				for {
					line, err := br.ReadSlice('\n')
					if first && bytes.Contains(line, []byte(`"content":"tok0"`)) {
						ttft += time.Since(start)
						first = false
					}
					if err != nil {
						break
					}
				}
				resp.Body.Close()
				if first {
					b.Fatal("no first token")
				}
			}
			b.ReportMetric(float64(ttft.Microseconds())/float64(b.N), "ttft-µs/op")
		})
	}
}
