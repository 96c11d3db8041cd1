package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

// arm measures one side of a comparison.
type arm struct {
	elapsed time.Duration
	allocs  uint64
	bytes   uint64
	ops     int
}

// measure runs f n times (with par goroutines when par > 1) and records time
// and allocations.
func measure(n, par int, f func(i int) error) (arm, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	var firstErr error
	var mu sync.Mutex
	if par <= 1 {
		for i := 0; i < n; i++ {
			if err := f(i); err != nil {
				return arm{}, err
			}
		}
	} else {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range par {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= n {
						return
					}
					if err := f(i); err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return arm{elapsed: elapsed, allocs: after.Mallocs - before.Mallocs, bytes: after.TotalAlloc - before.TotalAlloc, ops: n}, firstErr
}

func (a arm) perOp() float64       { return float64(a.elapsed) / 1e3 / float64(a.ops) }
func (a arm) allocsPerOp() float64 { return float64(a.allocs) / float64(a.ops) }
func (a arm) bytesPerOp() float64  { return float64(a.bytes) / float64(a.ops) }

// report writes both arms and their ratios as benchmark metrics.
func report(b *testing.B, raw, gov arm) {
	b.ReportMetric(raw.perOp(), "raw-µs/op")
	b.ReportMetric(gov.perOp(), "gov-µs/op")
	b.ReportMetric(gov.perOp()/raw.perOp(), "gov/raw-time")
	b.ReportMetric(raw.perOp()/gov.perOp(), "gov/raw-throughput")
	b.ReportMetric(gov.allocsPerOp()-raw.allocsPerOp(), "extra-allocs/op")
	b.ReportMetric(gov.bytesPerOp()-raw.bytesPerOp(), "extra-B/op")
}

// rawClient is the raw arm's client, tuned like the library's own transport.
func rawClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: 90 * time.Second}}
}

type rawMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type rawRequest struct {
	Model         string       `json:"model"`
	Messages      []rawMessage `json:"messages"`
	Stream        bool         `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options,omitempty"`
}

type rawResponse struct {
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// rawChat is a plain net/http chat completion with the same JSON work: it
// encodes the request, decodes the answer (every SSE event when streaming)
// and assembles the content.
func rawChat(ctx context.Context, hc *http.Client, url string, stream bool, prompt string) (string, error) {
	req := rawRequest{Model: "bench-model", Messages: []rawMessage{{Role: "user", Content: prompt}}, Stream: stream}
	if stream {
		req.StreamOptions = &struct {
			IncludeUsage bool `json:"include_usage"`
		}{true}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Authorization", "Bearer sk-bench")
	resp, err := hc.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return "", fmt.Errorf("status %d", resp.StatusCode)
	}
	if !stream {
		var out rawResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return "", err
		}
		if len(out.Choices) == 0 {
			return "", fmt.Errorf("no choices")
		}
		return out.Choices[0].Message.Content, nil
	}
	var content bytes.Buffer
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 8<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		data := bytes.TrimSpace(line[5:])
		if bytes.Equal(data, []byte("[DONE]")) {
			return content.String(), nil
		}
		var ev rawResponse
		if err := json.Unmarshal(data, &ev); err != nil {
			return "", err
		}
		if len(ev.Choices) > 0 {
			content.WriteString(ev.Choices[0].Delta.Content)
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("stream ended without [DONE]")
}

// fake starts the upstream both arms call, without its attempt log: the
// log keeps a copy of every request's header for tests to read, work a
// benchmark does not need and that would be charged to both arms.
func fake(opts ...fu.Option) *fu.Server {
	return fu.New(append([]fu.Option{fu.WithAttemptLog(0)}, opts...)...)
}

// governed builds a client with everything on: memory limiter (all six gates
// configured generously), memory breaker, memory cache, and a telemetry sink
// that receives every record; opts are added to those options.
func governed(b *testing.B, url string, stream bool, cacheOn bool, opts ...polygateway.Option) *polygateway.GatewayClient {
	b.Helper()
	env := map[string]string{
		"LLM__OPENAI__1__BASE_URL": url, "LLM__OPENAI__1__API_KEY": "sk-bench", "LLM__OPENAI__1__MODEL": "bench-model",
		"LLM__OPENAI__1__TIMEOUT_S": "30", "LLM__OPENAI__1__MAX_CONCURRENCY": "1000", "LLM__OPENAI__1__RPM": "100000000",
		"LLM__OPENAI__1__TPM": "1000000000", "LLM__OPENAI__1__EST_TOKENS": "100",
		"LLM__GLOBAL__MAX_CONCURRENCY": "1000", "LLM__GLOBAL__RPM": "100000000", "LLM__GLOBAL__TPM": "1000000000",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	if stream {
		env["LLM__OPENAI__1__TTFT_TIMEOUT_S"] = "10"
		env["LLM__OPENAI__1__INTER_TOKEN_TIMEOUT_S"] = "5"
	}
	if cacheOn {
		env["PGW_CACHE_BACKEND"] = "memory"
		env["PGW_CACHE_NAMESPACE"] = "bench"
		env["PGW_CACHE_TTL_S"] = "3600"
	}
	c, err := polygateway.FromEnv("LLM", append([]polygateway.Option{polygateway.WithEnv(env),
		polygateway.WithLimiter(memory.NewLimiter()), polygateway.WithTelemetry(telemetry.Discard{})}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func govChat(c *polygateway.GatewayClient, stream bool, prompt string, opts ...polygateway.CallOption) error {
	resp, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User(prompt)}, append(opts, polygateway.WithStream(stream))...)
	if err != nil {
		return err
	}
	if resp.Content == "" {
		return fmt.Errorf("empty answer")
	}
	return nil
}

// warm runs a few calls on each arm so connections and pools exist.
func warm(b *testing.B, n int, raw func(int) error, gov func(int) error) {
	for i := 0; i < n; i++ {
		if err := raw(i); err != nil {
			b.Fatal(err)
		}
		if err := gov(i); err != nil {
			b.Fatal(err)
		}
	}
}

func compare(b *testing.B, par int, raw, gov func(int) error) {
	warm(b, 50, raw, gov)
	if par > 1 {
		// Let the adaptive concurrency limit grow to the offered load.
		if _, err := measure(400, par, gov); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	// Interleave the arms in rounds so drift affects both alike.
	var r, g arm
	const rounds = 4
	per := max(b.N/rounds, 1)
	for range rounds {
		ra, err := measure(per, par, raw)
		if err != nil {
			b.Fatal(err)
		}
		ga, err := measure(per, par, gov)
		if err != nil {
			b.Fatal(err)
		}
		r.elapsed += ra.elapsed
		r.allocs += ra.allocs
		r.bytes += ra.bytes
		r.ops += ra.ops
		g.elapsed += ga.elapsed
		g.allocs += ga.allocs
		g.bytes += ga.bytes
		g.ops += ga.ops
	}
	report(b, r, g)
}

// BenchmarkSequential: one call at a time, non-streaming, cache on but missing.
func BenchmarkSequential(b *testing.B) {
	srv := fake()
	defer srv.Close()
	hc := rawClient()
	c := governed(b, srv.URL(), false, true)
	salt := 0
	compare(b, 1,
		func(int) error { _, err := rawChat(context.Background(), hc, srv.URL(), false, "hello"); return err },
		func(int) error {
			salt++
			return govChat(c, false, "hello", polygateway.WithCacheSalt(strconv.Itoa(salt)))
		})
}

// BenchmarkParallel16: 16 calls in flight; the ratio is of time per call, so
// governed/raw throughput is its inverse.
func BenchmarkParallel16(b *testing.B) {
	srv := fake()
	defer srv.Close()
	hc := rawClient()
	c := governed(b, srv.URL(), false, false)
	compare(b, 16,
		func(int) error { _, err := rawChat(context.Background(), hc, srv.URL(), false, "hello"); return err },
		func(int) error { return govChat(c, false, "hello") })
}

// BenchmarkCacheHit: a memory cache hit against a raw call.
func BenchmarkCacheHit(b *testing.B) {
	srv := fake()
	defer srv.Close()
	hc := rawClient()
	c := governed(b, srv.URL(), false, true)
	compare(b, 1,
		func(int) error { _, err := rawChat(context.Background(), hc, srv.URL(), false, "hello"); return err },
		func(int) error { return govChat(c, false, "hello") })
}

// BenchmarkStream1000: a 1,000-chunk SSE stream; chunks/s of each arm.
func BenchmarkStream1000(b *testing.B) {
	srv := fake(fu.WithBehavior(fu.OK().WithTokens(1000)))
	defer srv.Close()
	hc := rawClient()
	c := governed(b, srv.URL(), true, false)
	compare(b, 1,
		func(int) error { _, err := rawChat(context.Background(), hc, srv.URL(), true, "hello"); return err },
		func(int) error { return govChat(c, true, "hello") })
}
