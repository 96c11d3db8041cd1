// Command loadgen measures the gateway server on loopback. It has two
// modes, each meant to run as its own process:
//
//	loadgen fake [-tokens N] [-latency D]
//	    serves a fake OpenAI upstream on 127.0.0.1 and prints its base URL
//	    (ending in /v1) on stdout; it stops on SIGINT/SIGTERM or after -max.
//
//	loadgen run -url BASE [-rate R] [-duration D] [-payload B] [-workers C] [-pid P]
//	    sends non-streaming chat completions with a user message of B bytes
//	    to BASE+"/chat/completions". With -rate > 0 requests start on a fixed
//	    schedule (open loop: a slow server does not slow the schedule down)
//	    and latency percentiles are reported; with -rate 0 C workers send
//	    back to back (saturation) and the throughput is reported. With -pid
//	    the CPU time that process used during the run is read from /proc,
//	    giving requests per CPU-second.
//
// Only loopback addresses are accepted; every run is bounded by -duration
// (at most 5 minutes). bench.sh next to this file runs the comparison
// direct-to-fake versus through the gateway.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen fake|run [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fake":
		err = fake(os.Args[2:])
	case "run":
		err = run(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

func fake(args []string) error {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	tokens := fs.Int("tokens", 16, "content tokens per answer")
	latency := fs.Duration("latency", 0, "wait before answering")
	maxRun := fs.Duration("max", 30*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	srv := fakeupstream.New(fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(*tokens).WithLatency(*latency)),
		fakeupstream.WithBodyHistory(0))
	defer srv.Close()
	fmt.Println(srv.URL())
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(*maxRun):
	}
	return nil
}

type result struct {
	lat time.Duration
	err bool
}

func run(args []string) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	base := fs.String("url", "", "base URL ending in /v1 (loopback only)")
	rate := fs.Float64("rate", 500, "requests per second (0 = saturation with -workers)")
	duration := fs.Duration("duration", 10*time.Second, "measurement time (max 5m)")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured warm-up")
	payload := fs.Int("payload", 1024, "bytes of the user message")
	workers := fs.Int("workers", 32, "concurrent workers in saturation mode")
	model := fs.String("model", "gpt-4o", "model name to send")
	pid := fs.Int("pid", 0, "process whose CPU time to report")
	label := fs.String("label", "", "label printed with the result")
	if err := fs.Parse(args); err != nil {
		return err
	}
	u, err := url.Parse(*base)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("bad -url %q", *base)
	}
	if ip := net.ParseIP(u.Hostname()); !(u.Hostname() == "localhost" || ip != nil && ip.IsLoopback()) {
		return fmt.Errorf("-url must be a loopback address, got %s", u.Hostname())
	}
	if *duration <= 0 || *duration > 5*time.Minute {
		return errors.New("-duration must be in (0, 5m]")
	}
	target := strings.TrimRight(*base, "/") + "/chat/completions"
	msg := strings.Repeat("lorem ipsum ", *payload/12+1)[:*payload]
	body, _ := json.Marshal(map[string]any{"model": *model, "messages": []map[string]string{{"role": "user", "content": msg}}})

	tr := &http.Transport{MaxIdleConns: 4096, MaxIdleConnsPerHost: 4096, IdleConnTimeout: 30 * time.Second}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	one := func() result {
		start := time.Now()
		resp, err := client.Post(target, "application/json", strings.NewReader(string(body)))
		if err != nil {
			return result{time.Since(start), true}
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return result{time.Since(start), resp.StatusCode != http.StatusOK}
	}

	var measuring atomic.Bool
	var mu sync.Mutex
	var results []result
	record := func(r result) {
		if measuring.Load() {
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), *warmup+*duration)
	defer cancel()
	time.AfterFunc(*warmup, func() { measuring.Store(true) })
	var cpu0 float64
	var t0 time.Time
	time.AfterFunc(*warmup, func() { cpu0, t0 = cpuSeconds(*pid), time.Now() })

	var wg sync.WaitGroup
	if *rate > 0 {
		interval := time.Duration(float64(time.Second) / *rate)
		next := time.Now()
		sem := make(chan struct{}, 8192) // bound on outstanding requests
	loop:
		for {
			next = next.Add(interval)
			if d := time.Until(next); d > 0 {
				select {
				case <-ctx.Done():
					break loop
				case <-time.After(d):
				}
			} else if ctx.Err() != nil {
				break loop
			}
			select {
			case sem <- struct{}{}:
			default:
				record(result{err: true}) // overload: counted as an error
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				record(one())
				<-sem
			}()
		}
	} else {
		for range *workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					record(one())
				}
			}()
		}
		<-ctx.Done()
	}
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1 := cpuSeconds(*pid)
	wg.Wait()

	var lats []time.Duration
	errs := 0
	for _, r := range results {
		if r.err {
			errs++
			continue
		}
		lats = append(lats, r.lat)
	}
	slices.Sort(lats)
	pct := func(p float64) time.Duration {
		if len(lats) == 0 {
			return 0
		}
		return lats[min(len(lats)-1, int(p*float64(len(lats))))]
	}
	out := map[string]any{
		"label": *label, "target": target, "rate": *rate, "workers": *workers, "payload_bytes": *payload,
		"requests": len(results), "errors": errs, "throughput_rps": round(float64(len(results)) / elapsed.Seconds()),
		"p50_ms": ms(pct(0.50)), "p90_ms": ms(pct(0.90)), "p99_ms": ms(pct(0.99)), "max_ms": ms(pct(1)),
	}
	if *pid > 0 && cpu1 > cpu0 {
		out["cpu_seconds"] = round(cpu1 - cpu0)
		out["cores_used"] = round((cpu1 - cpu0) / elapsed.Seconds())
		out["requests_per_cpu_second"] = round(float64(len(results)-errs) / (cpu1 - cpu0))
	}
	b, _ := json.Marshal(out)
	fmt.Println(string(b))
	return nil
}

func ms(d time.Duration) float64 { return round(float64(d.Microseconds()) / 1000) }

func round(f float64) float64 { return float64(int64(f*1000+0.5)) / 1000 }

// cpuSeconds returns the user+system CPU time of process pid (0 when pid
// is 0 or unreadable), from /proc/<pid>/stat.
func cpuSeconds(pid int) float64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	// Fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	const clkTck = 100 // USER_HZ on Linux
	return (utime + stime) / clkTck
}
