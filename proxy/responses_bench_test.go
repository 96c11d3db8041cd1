package proxy_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// BenchmarkResponses compares the same answer (16 tokens, or a stream of
// 64 chunks) fetched straight from the fake upstream ("direct"), through
// the gateway's chat completions endpoint ("chat") and through its
// Responses endpoint ("responses"), in the same process and run: the
// difference of the last two is the cost of the translation.
func BenchmarkResponses(b *testing.B) {
	up := fake(b, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(16)), fakeupstream.WithBodyHistory(0))
	stream := fake(b, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(64)), fakeupstream.WithBodyHistory(0))
	off := []string{"MAX_CONCURRENCY", "1024", "TTFT_TIMEOUT_S", "0", "INTER_TOKEN_TIMEOUT_S", "0"}
	e := baseEnv().source("LLM", "fake", 1, up.URL(), secretKey1, "fake-model", off...).
		source("STREAM", "fake", 1, stream.URL(), secretKey1, "fake-model", off...)
	f := serve(b, proxy.Config{
		Backends: proxy.Backends{
			Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(b, "LLM", e), "STREAM": chatClient(b, "STREAM", e)},
			Routes:  map[string]string{"m": "LLM", "s": "STREAM"},
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	prompt := strings.Repeat("lorem ipsum ", 86)[:1024]
	chat := func(model, stream string) string {
		return `{"model":"` + model + `","stream":` + stream + `,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	}
	responses := func(model, stream string) string {
		return `{"model":"` + model + `","stream":` + stream + `,"input":[{"role":"user","content":[{"type":"input_text","text":"` + prompt + `"}]}]}`
	}
	for _, tc := range []struct{ name, url, body string }{
		{"plain/direct", up.URL() + "/chat/completions", chat("m", "false")},
		{"plain/chat", f.ts.URL + "/v1/chat/completions", chat("m", "false")},
		{"plain/responses", f.ts.URL + "/v1/responses", responses("m", "false")},
		{"stream/direct", stream.URL() + "/chat/completions", chat("s", "true")},
		{"stream/chat", f.ts.URL + "/v1/chat/completions", chat("s", "true")},
		{"stream/responses", f.ts.URL + "/v1/responses", responses("s", "true")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tr := &http.Transport{MaxIdleConnsPerHost: 256}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := hc.Post(tc.url, "application/json", strings.NewReader(tc.body))
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
