package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/testkit"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// Keys that must never appear in any response or log line.
const (
	secretKey1  = "sk-secret-primary-0123456789"
	secretKey2  = "sk-secret-fallback-9876543210"
	secretEmbed = "sk-secret-embed-5555"
)

// env is a configuration under construction.
type env map[string]string

func baseEnv() env {
	return env{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
}

// source adds source {provider}_{n} of scope pointing at url.
func (e env) source(scope, provider string, n int, url, key, model string, kv ...string) env {
	p := fmt.Sprintf("%s__%s__%d__", scope, strings.ToUpper(provider), n)
	e[p+"BASE_URL"] = url
	e[p+"API_KEY"] = key
	e[p+"MODEL"] = model
	e[p+"TIMEOUT_S"] = "10"
	for i := 0; i+1 < len(kv); i += 2 {
		e[p+kv[i]] = kv[i+1]
	}
	e[scope+"__RETRY__BACKOFF_BASE_S"] = "0.01"
	e[scope+"__RETRY__BACKOFF_MAX_S"] = "0.05"
	return e
}

func (e env) set(kv ...string) env {
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i]] = kv[i+1]
	}
	return e
}

// chatClient builds a chat client of scope; the server will own it.
func chatClient(t testing.TB, scope string, e env, opts ...polygateway.Option) *polygateway.GatewayClient {
	t.Helper()
	c, err := polygateway.FromEnv(scope, append([]polygateway.Option{polygateway.WithEnv(e)}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv(%s): %v", scope, err)
	}
	return c
}

// fixture is a proxy served on loopback.
type fixture struct {
	t    testing.TB
	srv  *proxy.Server
	ts   *httptest.Server
	logs *testkit.Buffer
}

// serve starts cfg on a loopback httptest server configured like
// HTTPServer; everything is torn down when the test ends.
func serve(t testing.TB, cfg proxy.Config) *fixture {
	t.Helper()
	return serveOn(t, cfg, nil)
}

// serveOn is serve with the listener wrapped by wrap (when not nil).
func serveOn(t testing.TB, cfg proxy.Config, wrap func(net.Listener) net.Listener) *fixture {
	t.Helper()
	return startServer(t, cfg, wrap, nil)
}

// serveGoverned is serve with onCall seeing every chat call as the server
// hands it to its client.
func serveGoverned(t testing.TB, cfg proxy.Config, onCall func(*core.Call)) *fixture {
	t.Helper()
	return startServer(t, cfg, nil, func(s *proxy.Server) { proxy.OnGovern(s, onCall) })
}

// startServer builds the server of cfg, lets prep (when not nil) see it before
// it serves, and serves it with the listener wrapped by wrap (when not
// nil).
func startServer(t testing.TB, cfg proxy.Config, wrap func(net.Listener) net.Listener, prep func(*proxy.Server)) *fixture {
	t.Helper()
	logs := &testkit.Buffer{}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	s, err := proxy.New(cfg)
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if prep != nil {
		prep(s)
	}
	ts := httptest.NewUnstartedServer(s)
	if wrap != nil {
		ts.Listener = wrap(ts.Listener)
	}
	hs := s.HTTPServer("")
	ts.Config.ReadHeaderTimeout, ts.Config.ReadTimeout = hs.ReadHeaderTimeout, hs.ReadTimeout
	ts.Config.IdleTimeout, ts.Config.MaxHeaderBytes = hs.IdleTimeout, hs.MaxHeaderBytes
	ts.Config.ErrorLog = hs.ErrorLog
	ts.Start()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ts.Close()
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &fixture{t: t, srv: s, ts: ts, logs: logs}
}

// sdk returns an official OpenAI Go client pointed at the proxy.
func (f *fixture) sdk(opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{
		option.WithBaseURL(f.ts.URL + "/v1/"),
		option.WithAPIKey("client-key"),
		option.WithHTTPClient(f.ts.Client()),
		option.WithMaxRetries(0),
	}, opts...)...)
}

// do sends a raw request and returns the response with its body read.
func (f *fixture) do(method, path, body string, hdr ...string) (*http.Response, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
	if err != nil {
		f.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("reading %s %s: %v", method, path, err)
	}
	return resp, b
}

// chatBody is a small chat request for model.
func chatBody(model string, stream bool, extra string) string {
	return `{"model":"` + model + `","stream":` + fmt.Sprint(stream) + `,"messages":[{"role":"user","content":"hello"}]` + extra + `}`
}

// sseEvents splits an SSE body into its data payloads.
func sseEvents(body []byte) []string {
	var out []string
	for _, block := range strings.Split(string(body), "\n\n") {
		for _, line := range strings.Split(block, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				out = append(out, d)
			}
		}
	}
	return out
}

// streamText concatenates the content deltas of SSE events.
func streamText(t testing.TB, events []string) string {
	t.Helper()
	var b strings.Builder
	for _, ev := range events {
		if ev == "[DONE]" || strings.HasPrefix(ev, `{"error"`) {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", ev, err)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

// embeddingsHandler is a fake OpenAI embeddings endpoint: the vector of
// input i is [i+1, len(input i), 0.5].
func embeddingsHandler(t testing.TB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model string   `json:"model"`
			Input []string `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json","type":"invalid_request_error","code":null,"param":null}}`, http.StatusBadRequest)
			return
		}
		type item struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		}
		data := make([]item, len(req.Input))
		for i, s := range req.Input {
			data[i] = item{Object: "embedding", Index: i, Embedding: []float32{float32(i + 1), float32(len(s)), 0.5}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"object": "list", "data": data, "model": req.Model,
			"usage": map[string]int{"prompt_tokens": 3 * len(req.Input), "total_tokens": 3 * len(req.Input)},
		})
	})
}

// embedClient builds an embeddings client of scope EMBED against srv.
func embedClient(t testing.TB, url string) *embed.Client {
	t.Helper()
	e := baseEnv().source("EMBED", "emb", 1, url, secretEmbed, "embed-model").set("EMBED__BATCH_SIZE", "2")
	c, err := embed.FromEnv("EMBED", polygateway.WithEnv(e))
	if err != nil {
		t.Fatalf("embed.FromEnv: %v", err)
	}
	return c
}

// fake starts a fake upstream for the test.
func fake(t testing.TB, opts ...fakeupstream.Option) *fakeupstream.Server {
	return fakeupstream.NewServer(t, opts...)
}
