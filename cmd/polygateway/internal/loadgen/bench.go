package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/polygateway/polygateway/cmd/polygateway/internal/gwproc"
)

// bench runs the whole comparison: fakes and gateway as separate
// processes, every load direct and through the gateway, one summary.
func bench(args []string) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	gwBin := fs.String("gateway", "", "the polygateway binary to measure")
	duration := fs.Duration("duration", 3*time.Second, "measured time of each run")
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
	startRelay := func(upstream string) (string, int, error) {
		cmd := exec.Command(self, "relay", "-upstream", upstream, "-max", "10m")
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
			return "", 0, fmt.Errorf("relay did not start: %w", err)
		}
		return strings.TrimSpace(line), cmd.Process.Pid, nil
	}
	relayURL, relayPID, err := startRelay(fakeURL)
	if err != nil {
		return err
	}
	relayStreamURL, relayStreamPID, err := startRelay(streamURL)
	if err != nil {
		return err
	}
	// gwEnv is the gateway's environment. LLM and STREAM have no stream
	// watchdog (TTFT_TIMEOUT_S=0 switches off the default one; a gateway
	// that refuses 0 has none by default and gets the keys omitted),
	// WATCHED has one.
	gwEnv := func(zero bool) map[string]string {
		env := map[string]string{
			"PGW_ROUTES": "gpt-4o=LLM,stream=STREAM,watched=WATCHED", "PGW_LOG_LEVEL": "warn",
			"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		}
		for _, src := range []struct{ scope, url string }{{"LLM", fakeURL}, {"STREAM", streamURL}, {"WATCHED", fakeURL}} {
			p := src.scope + "__FAKE__1__"
			env[p+"BASE_URL"], env[p+"API_KEY"], env[p+"MODEL"] = src.url, "none", "fake-model"
			env[p+"TIMEOUT_S"], env[p+"MAX_CONCURRENCY"] = "60", "8192"
			switch {
			case src.scope == "WATCHED":
				env[p+"TTFT_TIMEOUT_S"], env[p+"INTER_TOKEN_TIMEOUT_S"] = "20", "10"
			case zero:
				env[p+"TTFT_TIMEOUT_S"], env[p+"INTER_TOKEN_TIMEOUT_S"] = "0", "0"
			}
		}
		return env
	}
	gw, err := gwproc.Start(*gwBin, gwEnv(gwproc.Check(*gwBin, gwEnv(true)) == nil))
	if err != nil {
		return err
	}
	defer func() {
		_ = gw.Stop()
		os.Remove(gw.LogPath())
	}()
	gwBase := gw.URL() + "/v1"

	rawOut := io.Discard
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
		fmt.Fprintf(os.Stderr, "  %-34s %8.0f req/s  p50 %8.3f ms  p99 %8.3f ms  errors %d\n", label, r.Throughput, r.P50, r.P99, r.Errors)
		fmt.Fprintln(rawOut, mustJSON(r))
		return r, nil
	}
	type arm struct {
		name, base string
		pid        int
	}
	// trio runs l direct, through the bare relay and through the gateway.
	trio := func(name string, l load, arms ...arm) ([]*report, error) {
		var out []*report
		for _, a := range arms {
			la := l
			la.base, la.pid = a.base, a.pid
			r, err := measure(a.name+" "+name, la)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
		return out, nil
	}
	direct, relayArm, gateway := arm{"direct", fakeURL, fakePID}, arm{"relay", relayURL, relayPID}, arm{"gateway", gwBase, gw.Pid()}

	fmt.Fprintf(os.Stderr, "bench-gateway: %s per run after %s of warm-up\n", *duration, *warmup)
	tw := tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(cols ...string) { fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t") }
	row("measure", "direct", "bare relay", "gateway", "gateway added", "gateway/direct", "relay/direct")
	three := func(label string, get func(*report) float64, format func(float64) string, added bool, rs []*report) {
		d, r, g := get(rs[0]), get(rs[1]), get(rs[2])
		add := ""
		if added {
			add = plus(g - d)
		}
		row(label, format(d), format(r), format(g), add, ratio(g, d), ratio(r, d))
	}
	p50 := func(r *report) float64 { return r.P50 }
	p99 := func(r *report) float64 { return r.P99 }
	cpuReq := func(r *report) float64 { return r.CPUPerReq }
	errs := func(r *report) float64 { return float64(r.Errors) }
	for _, rs := range strings.Split(*rates, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
		if err != nil || rate <= 0 {
			return fmt.Errorf("bad rate %q", rs)
		}
		name := fmt.Sprintf("open %g/s", rate)
		res, err := trio(name, load{rate: rate, model: "gpt-4o"}, direct, relayArm, gateway)
		if err != nil {
			return err
		}
		three(name+" p50 ms", p50, f3, true, res)
		three(name+" p99 ms", p99, f3, true, res)
		three(name+" CPU µs/req", cpuReq, f1, false, res)
		three(name+" errors", errs, f0, false, res)
	}
	name := fmt.Sprintf("closed %d conns", *workers)
	res, err := trio(name, load{workers: *workers, model: "gpt-4o"}, direct, relayArm, gateway)
	if err != nil {
		return err
	}
	three(name+" req/s", func(r *report) float64 { return r.Throughput }, f0, false, res)
	three(name+" CPU µs/req", cpuReq, f1, false, res)
	// The floor of any proxy: it is an HTTP server (what the fake costs per
	// request) and an HTTP client (what the load generator costs).
	three(name+" client CPU µs/req", func(r *report) float64 { return r.ClientCPUPerReq }, f1, false, res)
	floor := res[0].CPUPerReq + res[0].ClientCPUPerReq
	row(name+" floor: server+client µs/req", f1(floor), f1(res[1].CPUPerReq), f1(res[2].CPUPerReq), "", ratio(res[2].CPUPerReq, floor), ratio(res[1].CPUPerReq, floor))
	// A source with a stream watchdog: a non-streaming client's call still
	// streams upstream (so that a silent first token fails over).
	watched, err := measure("gateway "+name+" watched source", load{workers: *workers, model: "watched", base: gwBase, pid: gw.Pid()})
	if err != nil {
		return err
	}
	w := []*report{res[0], res[1], watched}
	three(name+" watchdog req/s", func(r *report) float64 { return r.Throughput }, f0, false, w)
	three(name+" watchdog CPU µs/req", cpuReq, f1, false, w)

	name = fmt.Sprintf("stream %g/s×%d", *streamRate, *streamTokens)
	res, err = trio(name, load{rate: *streamRate, model: "stream", stream: true},
		arm{"direct", streamURL, streamPID}, arm{"relay", relayStreamURL, relayStreamPID}, arm{"gateway", gwBase, gw.Pid()})
	if err != nil {
		return err
	}
	three(name+" TTFT p50 ms", func(r *report) float64 { return r.TTFT50 }, f3, true, res)
	three(name+" TTFT p99 ms", func(r *report) float64 { return r.TTFT99 }, f3, true, res)
	three(name+" chunks", func(r *report) float64 { return float64(r.Chunks) }, f0, false, res)
	three(name+" CPU µs/chunk", func(r *report) float64 { return r.CPUPerChk }, f3, false, res)
	three(name+" errors", errs, f0, false, res)
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
