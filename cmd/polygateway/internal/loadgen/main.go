// Command loadgen measures the gateway server on loopback. It has three
// modes, each meant to run as its own process:
//
//	loadgen fake [-tokens N] [-latency D]
//	    serves a fake OpenAI upstream on 127.0.0.1 and prints its base URL
//	    (ending in /v1) on stdout; it stops on SIGINT/SIGTERM or after -max.
//
//	loadgen run -url BASE [-rate R] [-duration D] [-payload B] [-workers C] [-stream] [-pid P]
//	    sends chat completions with a user message of B bytes to
//	    BASE+"/chat/completions". With -rate > 0 requests are sent on a fixed
//	    schedule (open loop: a slow server does not slow the schedule down)
//	    and each latency is measured from the request's scheduled send time,
//	    so queueing anywhere counts; with -rate 0 C workers send back to back
//	    (closed loop, the maximum throughput). -stream asks for SSE and
//	    reports the time to the first content chunk and the chunks received.
//	    With -pid the CPU time that process used during the measured part is
//	    read from /proc/<pid>/stat (utime+stime).
//
//	loadgen relay -upstream BASE
//	    serves a bare reverse proxy (net/http/httputil) in front of BASE and
//	    prints its base URL: the floor of any Go HTTP proxy.
//
//	loadgen bench -gateway BIN [-duration D]
//	    the comparison behind `make bench-gateway`: starts a zero-delay fake
//	    (this binary in fake mode) and the gateway BIN in front of it, each
//	    as its own process, runs every load both direct to the fake and
//	    through the gateway (and, for the floor, through the bare relay),
//	    and prints the added latency, throughput and CPU per request and
//	    per relayed chunk as ratios to direct.
//
// Only loopback addresses are accepted; every run is bounded by -duration
// (at most 5 minutes).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/polygateway/polygateway/cmd/polygateway/internal/gwproc"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: loadgen fake|run|relay|bench [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "fake":
		err = fake(os.Args[2:])
	case "run":
		var r *report
		if r, err = runFlags(os.Args[2:]); err == nil {
			b, _ := json.Marshal(r)
			fmt.Println(string(b))
		}
	case "bench":
		err = bench(os.Args[2:])
	case "relay":
		err = relay(os.Args[2:])
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

// load is one measured run.
type load struct {
	base     string
	rate     float64 // 0: closed loop with workers
	workers  int
	duration time.Duration
	warmup   time.Duration
	payload  int
	model    string
	stream   bool
	pid      int
}

// report is what a run measured.
type report struct {
	Label      string  `json:"label,omitempty"`
	Target     string  `json:"target"`
	Rate       float64 `json:"rate"`
	Workers    int     `json:"workers,omitempty"`
	Stream     bool    `json:"stream,omitempty"`
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	Throughput float64 `json:"throughput_rps"`
	P50        float64 `json:"p50_ms"`
	P90        float64 `json:"p90_ms"`
	P99        float64 `json:"p99_ms"`
	Max        float64 `json:"max_ms"`
	TTFT50     float64 `json:"ttft_p50_ms,omitempty"`
	TTFT99     float64 `json:"ttft_p99_ms,omitempty"`
	Chunks     int64   `json:"chunks,omitempty"`
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	CPUPerReq  float64 `json:"cpu_us_per_request,omitempty"`
	CPUPerChk  float64 `json:"cpu_us_per_chunk,omitempty"`
	// ClientCPUPerReq is the load generator's own CPU per request: what the
	// HTTP client side of an exchange costs on this machine.
	ClientCPUPerReq float64 `json:"client_cpu_us_per_request,omitempty"`
}

func runFlags(args []string) (*report, error) {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var l load
	fs.StringVar(&l.base, "url", "", "base URL ending in /v1 (loopback only)")
	fs.Float64Var(&l.rate, "rate", 500, "requests per second (0 = closed loop with -workers)")
	fs.DurationVar(&l.duration, "duration", 10*time.Second, "measurement time (max 5m)")
	fs.DurationVar(&l.warmup, "warmup", 2*time.Second, "unmeasured warm-up")
	fs.IntVar(&l.payload, "payload", 1024, "bytes of the user message")
	fs.IntVar(&l.workers, "workers", 32, "concurrent workers in closed-loop mode")
	fs.StringVar(&l.model, "model", "gpt-4o", "model name to send")
	fs.BoolVar(&l.stream, "stream", false, "ask for a streamed answer")
	fs.IntVar(&l.pid, "pid", 0, "process whose CPU time to report")
	label := fs.String("label", "", "label printed with the result")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	r, err := l.run()
	if r != nil {
		r.Label = *label
	}
	return r, err
}

type result struct {
	lat, ttft time.Duration
	chunks    int64
	err       bool
}

func (l *load) run() (*report, error) {
	if err := gwproc.CheckLoopback(l.base); err != nil {
		return nil, err
	}
	if l.duration <= 0 || l.duration > 5*time.Minute {
		return nil, errors.New("-duration must be in (0, 5m]")
	}
	target := strings.TrimRight(l.base, "/") + "/chat/completions"
	msg := strings.Repeat("lorem ipsum ", l.payload/12+1)[:l.payload]
	body, _ := json.Marshal(map[string]any{"model": l.model, "stream": l.stream,
		"messages": []map[string]string{{"role": "user", "content": msg}}})

	tr := &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	// one sends a request scheduled at sched and measures from there.
	one := func(sched time.Time) result { return l.send(client, target, body, sched) }

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
	ctx, cancel := context.WithTimeout(context.Background(), l.warmup+l.duration)
	defer cancel()
	var cpu0, self0 float64
	var t0 time.Time
	time.AfterFunc(l.warmup, func() {
		cpu0, self0, t0 = cpuSeconds(l.pid), cpuSeconds(os.Getpid()), time.Now()
		measuring.Store(true)
	})

	var wg sync.WaitGroup
	l.drive(ctx, &wg, one, record)
	measuring.Store(false)
	elapsed := time.Since(t0)
	cpu1, self1 := cpuSeconds(l.pid), cpuSeconds(os.Getpid())
	wg.Wait()
	return l.summarize(target, results, elapsed, cpu1-cpu0, self1-self0), nil
}

// send makes one request of body to target, scheduled at sched, and
// measures it from there: a streamed answer to its [DONE], counting chunks
// and the first token.
func (l *load) send(client *http.Client, target string, body []byte, sched time.Time) result {
	req, _ := http.NewRequest(http.MethodPost, target, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return result{lat: time.Since(sched), err: true}
	}
	defer resp.Body.Close()
	if !l.stream {
		_, err = io.Copy(io.Discard, resp.Body)
		return result{lat: time.Since(sched), err: err != nil || resp.StatusCode != http.StatusOK}
	}
	r := result{}
	br := bufio.NewReaderSize(resp.Body, 16<<10)
	done := false
	for {
		line, err := br.ReadSlice('\n')
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			switch {
			case bytes.HasPrefix(d, []byte("[DONE]")):
				done = true
			case bytes.Contains(d, []byte(`"error"`)):
			default:
				r.chunks++
				if r.ttft == 0 && bytes.Contains(d, []byte(`"content":"`)) {
					r.ttft = time.Since(sched)
				}
			}
		}
		if err != nil {
			break
		}
	}
	r.lat = time.Since(sched)
	r.err = !done || resp.StatusCode != http.StatusOK
	return r
}

// drive sends requests with one until ctx ends, at l.rate per second or
// from l.workers closed-loop workers, and records their results; it
// returns when ctx ends, with the requests still out counted in wg.
func (l *load) drive(ctx context.Context, wg *sync.WaitGroup, one func(time.Time) result, record func(result)) {
	if l.rate > 0 {
		interval := float64(time.Second) / l.rate
		start := time.Now()
		sem := make(chan struct{}, 8192) // bound on outstanding requests
		for i := 0; ctx.Err() == nil; i++ {
			sched := start.Add(time.Duration(float64(i) * interval))
			if d := time.Until(sched); d > 0 {
				time.Sleep(d)
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
				record(one(sched))
				<-sem
			}()
		}
		return
	}
	for range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				record(one(time.Now()))
			}
		}()
	}
	<-ctx.Done()
}

// summarize makes the report of the measured results: elapsed is the
// measured time, cpu and self the CPU seconds the gateway and this
// process spent in it.
func (l *load) summarize(target string, results []result, elapsed time.Duration, cpu, self float64) *report {
	var lats, ttfts []time.Duration
	errs := 0
	var chunks int64
	for _, r := range results {
		if r.err {
			errs++
			continue
		}
		lats = append(lats, r.lat)
		if r.ttft > 0 {
			ttfts = append(ttfts, r.ttft)
		}
		chunks += r.chunks
	}
	rep := &report{
		Target: target, Rate: l.rate, Stream: l.stream, Requests: len(results), Errors: errs,
		Throughput: round(float64(len(results)-errs) / elapsed.Seconds()),
		P50:        ms(pct(lats, 0.50)), P90: ms(pct(lats, 0.90)), P99: ms(pct(lats, 0.99)), Max: ms(pct(lats, 1)),
		Chunks: chunks,
	}
	if l.rate == 0 {
		rep.Workers = l.workers
	}
	if ok := len(results) - errs; ok > 0 && self > 0 {
		rep.ClientCPUPerReq = round(self * 1e6 / float64(ok))
	}
	if l.stream {
		rep.TTFT50, rep.TTFT99 = ms(pct(ttfts, 0.5)), ms(pct(ttfts, 0.99))
	}
	if l.pid > 0 && cpu > 0 {
		rep.CPUSeconds = round(cpu)
		if ok := len(results) - errs; ok > 0 {
			rep.CPUPerReq = round(cpu * 1e6 / float64(ok))
		}
		if chunks > 0 {
			rep.CPUPerChk = round(cpu * 1e6 / float64(chunks))
		}
	}
	return rep
}

func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, int(p*float64(len(d))))]
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
