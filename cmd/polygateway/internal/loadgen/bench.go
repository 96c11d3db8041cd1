package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// bench runs the whole comparison: fakes and gateway as separate
// processes, every load direct and through the gateway, one summary.
func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	gwBin := fs.String("gateway", "", "the polygateway binary to measure")
	duration := fs.Duration("duration", 4*time.Second, "measured time of each run")
	warmup := fs.Duration("warmup", time.Second, "unmeasured warm-up of each run")
	rates := fs.String("rates", "500,2000,5000", "open-loop rates (requests per second)")
	workers := fs.Int("workers", 16, "connections of the closed-loop run")
	streamRate := fs.Float64("stream-rate", 100, "streams per second of the streaming run")
	streamTokens := fs.Int("stream-tokens", 256, "content chunks per streamed answer")
	raw := fs.String("raw", "", "also write every run's JSON line to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *gwBin == "" {
		return errors.New("-gateway is required")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
			_, _ = p.Process.Wait()
		}
	}()
	startFake := func(tokens int) (string, int, error) {
		cmd := exec.Command(self, "fake", "-tokens", strconv.Itoa(tokens), "-max", "10m")
		out, err := cmd.StdoutPipe()
		if err != nil {
			return "", 0, err
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			return "", 0, err
		}
		procs = append(procs, cmd)
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			return "", 0, fmt.Errorf("fake did not start: %w", err)
		}
		return strings.TrimSpace(line), cmd.Process.Pid, nil
	}
	fakeURL, fakePID, err := startFake(16)
	if err != nil {
		return err
	}
	streamURL, streamPID, err := startFake(*streamTokens)
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	gwLog, err := os.CreateTemp("", "polygateway-bench-*.log")
	if err != nil {
		return err
	}
	defer os.Remove(gwLog.Name())
	defer gwLog.Close()
	gw := exec.Command(*gwBin, "-env-file", os.DevNull)
	gw.Env = []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"PGW_LISTEN_ADDR=" + addr, "PGW_ROUTES=gpt-4o=LLM,stream=STREAM", "PGW_LOG_LEVEL=warn",
		"PGW_LIMITER_BACKEND=memory", "PGW_BREAKER_BACKEND=memory", "PGW_CACHE_BACKEND=none", "PGW_TELEMETRY_BACKEND=none",
		"LLM__FAKE__1__BASE_URL=" + fakeURL, "LLM__FAKE__1__API_KEY=none", "LLM__FAKE__1__MODEL=fake-model",
		"LLM__FAKE__1__TIMEOUT_S=30", "LLM__FAKE__1__MAX_CONCURRENCY=8192",
		"STREAM__FAKE__1__BASE_URL=" + streamURL, "STREAM__FAKE__1__API_KEY=none", "STREAM__FAKE__1__MODEL=fake-model",
		"STREAM__FAKE__1__TIMEOUT_S=30", "STREAM__FAKE__1__MAX_CONCURRENCY=8192",
	}
	gw.Stdout, gw.Stderr = gwLog, gwLog
	if err := gw.Start(); err != nil {
		return err
	}
	procs = append(procs, gw)
	gwBase := "http://" + addr + "/v1"
	if err := waitHealthy("http://" + addr + "/healthz"); err != nil {
		b, _ := os.ReadFile(gwLog.Name())
		return fmt.Errorf("gateway did not come up: %w\n%s", err, b)
	}

	var rawOut io.Writer = io.Discard
	if *raw != "" {
		f, err := os.Create(*raw)
		if err != nil {
			return err
		}
		defer f.Close()
		rawOut = f
	}
	measure := func(label string, l load) (*report, error) {
		l.duration, l.warmup, l.payload = *duration, *warmup, 1024
		r, err := l.run()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", label, err)
		}
		r.Label = label
		fmt.Fprintf(os.Stderr, "  %-22s %8.0f req/s  p50 %7.3f ms  p99 %7.3f ms  errors %d\n", label, r.Throughput, r.P50, r.P99, r.Errors)
		fmt.Fprintln(rawOut, mustJSON(r))
		return r, nil
	}
	pair := func(name string, l load, direct, via string, directPID int) (d, g *report, err error) {
		ld, lg := l, l
		ld.base, ld.pid = direct, directPID
		lg.base, lg.pid = via, gw.Process.Pid
		if d, err = measure("direct "+name, ld); err != nil {
			return nil, nil, err
		}
		g, err = measure("gateway "+name, lg)
		return d, g, err
	}

	fmt.Fprintf(os.Stderr, "bench-gateway: %s per run after %s of warm-up\n", *duration, *warmup)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t") }
	row("measure", "direct", "gateway", "added", "gateway/direct")
	for _, rs := range strings.Split(*rates, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
		if err != nil || rate <= 0 {
			return fmt.Errorf("bad rate %q", rs)
		}
		name := fmt.Sprintf("open %g/s", rate)
		d, g, err := pair(name, load{rate: rate, model: "gpt-4o"}, fakeURL, gwBase, fakePID)
		if err != nil {
			return err
		}
		row(name+" p50 ms", f3(d.P50), f3(g.P50), plus(g.P50-d.P50), ratio(g.P50, d.P50))
		row(name+" p99 ms", f3(d.P99), f3(g.P99), plus(g.P99-d.P99), ratio(g.P99, d.P99))
		row(name+" errors", strconv.Itoa(d.Errors), strconv.Itoa(g.Errors), "", "")
		row(name+" CPU µs/req", f1(d.CPUPerReq), f1(g.CPUPerReq), "", ratio(g.CPUPerReq, d.CPUPerReq))
	}
	name := fmt.Sprintf("closed %d conns", *workers)
	d, g, err := pair(name, load{workers: *workers, model: "gpt-4o"}, fakeURL, gwBase, fakePID)
	if err != nil {
		return err
	}
	row(name+" req/s", f0(d.Throughput), f0(g.Throughput), "", ratio(g.Throughput, d.Throughput))
	row(name+" CPU µs/req", f1(d.CPUPerReq), f1(g.CPUPerReq), "", ratio(g.CPUPerReq, d.CPUPerReq))
	name = fmt.Sprintf("stream %g/s×%d", *streamRate, *streamTokens)
	d, g, err = pair(name, load{rate: *streamRate, model: "stream", stream: true}, streamURL, gwBase, streamPID)
	if err != nil {
		return err
	}
	row(name+" TTFT p50 ms", f3(d.TTFT50), f3(g.TTFT50), plus(g.TTFT50-d.TTFT50), ratio(g.TTFT50, d.TTFT50))
	row(name+" TTFT p99 ms", f3(d.TTFT99), f3(g.TTFT99), plus(g.TTFT99-d.TTFT99), ratio(g.TTFT99, d.TTFT99))
	row(name+" chunks", strconv.FormatInt(d.Chunks, 10), strconv.FormatInt(g.Chunks, 10), "", "")
	row(name+" CPU µs/chunk", f3(d.CPUPerChk), f3(g.CPUPerChk), "", ratio(g.CPUPerChk, d.CPUPerChk))
	row(name+" errors", strconv.Itoa(d.Errors), strconv.Itoa(g.Errors), "", "")
	return tw.Flush()
}

func f0(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
func f1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
func f3(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func plus(v float64) string {
	if v >= 0 {
		return "+" + f3(v)
	}
	return f3(v)
}

func ratio(a, b float64) string {
	if b <= 0 {
		return "—"
	}
	return strconv.FormatFloat(a/b, 'f', 2, 64) + "×"
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// freeAddr returns a free loopback address.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// waitHealthy polls url until it answers 200, for at most 10 seconds.
func waitHealthy(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
