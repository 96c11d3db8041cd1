package proxy_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/proxy"
)

// TestLoadStreamingClients runs 1,000 concurrent streaming clients against
// the server on loopback for 30 s (PGW_LOAD_CLIENTS and PGW_LOAD_DURATION
// override both) and checks that every stream completes, that goroutines
// return to their baseline afterwards, and reports RSS. It runs only with
// PGW_LOAD=1.
func TestLoadStreamingClients(t *testing.T) {
	if os.Getenv("PGW_LOAD") != "1" {
		t.Skip("load test: set PGW_LOAD=1")
	}
	clients, dur := loadSize(t)
	const toks = 20
	up := fake(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(toks).WithInterTokenDelay(5*time.Millisecond)),
		fakeupstream.WithBodyHistory(0))
	e := baseEnv().source("LLM", "fake", 1, up.URL(), secretKey1, "fake-model", "MAX_CONCURRENCY", "2000", "TIMEOUT_S", "60").
		set("PGW_LEASE_TTL_S", "120")
	f := serve(t, proxy.Config{
		Backends: proxy.Backends{Clients: map[string]*polygateway.GatewayClient{"LLM": chatClient(t, "LLM", e)}, DefaultScope: "LLM"},
		Logger:   slog.New(slog.DiscardHandler),
	})
	runtime.GC()
	base := runtime.NumGoroutine()

	tr := &http.Transport{MaxIdleConnsPerHost: clients, MaxIdleConns: clients, IdleConnTimeout: 10 * time.Second}
	hc := &http.Client{Transport: tr}
	want := fakeupstream.Tokens(toks)
	body := chatBody("m", true, "")
	lc := &loadClients{hc: hc, url: f.ts.URL + "/v1/chat/completions", body: body, want: want}
	var mu sync.Mutex
	var lats []time.Duration
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			mine := lc.run(ctx)
			mu.Lock()
			lats = append(lats, mine...)
			mu.Unlock()
		})
	}
	peakG := 0
	var peakRSS int64
	tick := time.NewTicker(time.Second)
	for ctx.Err() == nil {
		select {
		case <-tick.C:
			peakG = max(peakG, runtime.NumGoroutine())
			peakRSS = max(peakRSS, rssKB("VmRSS"))
		case <-ctx.Done():
		}
	}
	tick.Stop()
	wg.Wait()
	elapsed := time.Since(start)
	tr.CloseIdleConnections()
	slices.Sort(lats)
	pct := func(p float64) time.Duration { return percentile(lats, p) }
	t.Logf("%d clients, %v: %d streams completed (%.0f/s), %d failed; latency p50 %v p99 %v max %v",
		clients, elapsed.Round(time.Millisecond), lc.ok.Load(), float64(lc.ok.Load())/elapsed.Seconds(), lc.failed.Load(),
		pct(0.5).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), pct(1).Round(time.Millisecond))
	t.Logf("goroutines: baseline %d, peak %d; RSS peak %d MiB, now %d MiB (VmHWM %d MiB; client, server and fake upstream in one process)",
		base, peakG, peakRSS/1024, rssKB("VmRSS")/1024, rssKB("VmHWM")/1024)
	if lc.failed.Load() > 0 {
		t.Errorf("%d streams failed; first: %.300v", lc.failed.Load(), lc.firstErr.Load())
	}
	if lc.ok.Load() == 0 {
		t.Fatal("no stream completed")
	}
	// While the server keeps running, what remains beyond the baseline is
	// the bounded pool of idle upstream connections (two goroutines on the
	// gateway's side, one on the fake's, per connection; at most
	// transport.DefaultMaxIdleConnsPerHost connections).
	const poolBound = 3 * 128
	settleGoroutines(t, base, base+poolBound+5, "after the run, server still up (idle upstream pool included)")
	sctx, scancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer scancel()
	if err := f.srv.Shutdown(sctx); err != nil {
		t.Fatal(err)
	}
	settleGoroutines(t, base, base+2, "after Shutdown")
	if up.InFlight() != 0 {
		t.Errorf("upstream requests in flight after the run: %d", up.InFlight())
	}
}

// loadSize is the number of clients (PGW_LOAD_CLIENTS, default 1,000)
// and the duration (PGW_LOAD_DURATION, default 30 s, at most 5 min) of the
// load test.
func loadSize(t *testing.T) (clients int, dur time.Duration) {
	t.Helper()
	clients = 1000
	if v := os.Getenv("PGW_LOAD_CLIENTS"); v != "" {
		if _, err := fmt.Sscan(v, &clients); err != nil {
			t.Fatal(err)
		}
	}
	dur = 30 * time.Second
	if v := os.Getenv("PGW_LOAD_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 5*time.Minute {
			t.Fatalf("PGW_LOAD_DURATION %q", v)
		}
		dur = d
	}
	return clients, dur
}

// loadClients are the streaming clients of the load test: each sends body
// to url again and again and counts a stream ok when it ends with [DONE]
// and its text is want.
type loadClients struct {
	hc              *http.Client
	url, body, want string
	ok, failed      atomic.Int64
	firstErr        atomic.Value
}

// run is one client until ctx ends; it returns the latency of each of its
// streams that completed.
func (lc *loadClients) run(ctx context.Context) []time.Duration {
	var mine []time.Duration
	for ctx.Err() == nil {
		t0 := time.Now()
		req, _ := http.NewRequest("POST", lc.url, strings.NewReader(lc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := lc.hc.Do(req)
		if err != nil {
			lc.failed.Add(1)
			lc.firstErr.CompareAndSwap(nil, err.Error())
			continue
		}
		b, err := io.ReadAll(bufio.NewReader(resp.Body))
		resp.Body.Close()
		events := sseEvents(b)
		if err != nil || resp.StatusCode != http.StatusOK || lastEvent(events) != "[DONE]" || streamTextQuiet(events) != lc.want {
			lc.failed.Add(1)
			lc.firstErr.CompareAndSwap(nil, string(b))
			continue
		}
		lc.ok.Add(1)
		mine = append(mine, time.Since(t0))
	}
	return mine
}

// percentile is the p-quantile of the sorted lats (0 when empty).
func percentile(lats []time.Duration, p float64) time.Duration {
	if len(lats) == 0 {
		return 0
	}
	return lats[min(len(lats)-1, int(p*float64(len(lats))))]
}

// settleGoroutines waits up to 15 s for the goroutines to number at most
// limit (base is the baseline, for the log), and fails with every stack
// when they do not.
func settleGoroutines(t *testing.T, base, limit int, what string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n <= limit {
			t.Logf("goroutines %s: %d (baseline %d)", what, n, base)
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("goroutines %s: %d > %d\n%s", what, n, limit, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// streamTextQuiet is streamText without a testing.TB (for client goroutines).
func streamTextQuiet(events []string) string {
	var b strings.Builder
	for _, ev := range events {
		if ev == "[DONE]" {
			continue
		}
		i := strings.Index(ev, `"content":"`)
		if i < 0 {
			continue
		}
		rest := ev[i+len(`"content":"`):]
		if j := strings.IndexByte(rest, '"'); j >= 0 {
			b.WriteString(rest[:j])
		}
	}
	return b.String()
}

// rssKB reads a memory field of /proc/self/status in KiB.
func rssKB(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			var n int64
			_, _ = fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), &n)
			return n
		}
	}
	return 0
}
