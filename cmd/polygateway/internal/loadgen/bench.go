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
	cfg, err := parseBenchFlags(args)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	procs := &benchProcs{self: self}
	defer procs.stop()
	fakeURL, fakePID, err := procs.start("fake", "-tokens", "16", "-max", "10m")
	if err != nil {
		return err
	}
	streamURL, streamPID, err := procs.start("fake", "-tokens", strconv.Itoa(cfg.streamTokens), "-max", "10m")
	if err != nil {
		return err
	}
	relayURL, relayPID, err := procs.start("relay", "-upstream", fakeURL, "-max", "10m")
	if err != nil {
		return err
	}
	relayStreamURL, relayStreamPID, err := procs.start("relay", "-upstream", streamURL, "-max", "10m")
	if err != nil {
		return err
	}
	zero := gwproc.Check(cfg.gwBin, benchGatewayEnv(fakeURL, streamURL, true)) == nil
	gw, err := gwproc.Start(cfg.gwBin, benchGatewayEnv(fakeURL, streamURL, zero))
	if err != nil {
		return err
	}
	defer func() {
		_ = gw.Stop()
		os.Remove(gw.LogPath())
	}()
	gwBase := gw.URL() + "/v1"

	t := &benchTable{cfg: cfg, rawOut: io.Discard}
	if cfg.raw != "" {
		f, err := os.Create(cfg.raw)
		if err != nil {
			return err
		}
		defer f.Close()
		t.rawOut = f
	}
	fmt.Fprintf(os.Stderr, "bench-gateway: %s per run after %s of warm-up\n", cfg.duration, cfg.warmup)
	t.tw = tabwriter.NewWriter(os.Stdout, 2, 4, 2, ' ', tabwriter.AlignRight)
	t.row("measure", "direct", "bare relay", "gateway", "gateway added", "gateway/direct", "relay/direct")
	arms := []arm{{"direct", fakeURL, fakePID}, {"relay", relayURL, relayPID}, {"gateway", gwBase, gw.Pid()}}
	if err := t.openRuns(arms); err != nil {
		return err
	}
	if err := t.closedRuns(arms); err != nil {
		return err
	}
	streamArms := []arm{{"direct", streamURL, streamPID}, {"relay", relayStreamURL, relayStreamPID}, {"gateway", gwBase, gw.Pid()}}
	if err := t.streamRuns(streamArms); err != nil {
		return err
	}
	return t.tw.Flush()
}

// benchFlags are the settings of a bench run.
type benchFlags struct {
	gwBin            string
	duration, warmup time.Duration
	rates            string
	workers          int
	streamRate       float64
	streamTokens     int
	raw              string
}

func parseBenchFlags(args []string) (*benchFlags, error) {
	cfg := &benchFlags{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.gwBin, "gateway", "", "the polygateway binary to measure")
	fs.DurationVar(&cfg.duration, "duration", 3*time.Second, "measured time of each run")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up of each run")
	fs.StringVar(&cfg.rates, "rates", "500,2000,5000", "open-loop rates (requests per second)")
	fs.IntVar(&cfg.workers, "workers", 16, "connections of the closed-loop run")
	fs.Float64Var(&cfg.streamRate, "stream-rate", 100, "streams per second of the streaming run")
	fs.IntVar(&cfg.streamTokens, "stream-tokens", 256, "content chunks per streamed answer")
	fs.StringVar(&cfg.raw, "raw", "", "also write every run's JSON line to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if cfg.gwBin == "" {
		return nil, errors.New("-gateway is required")
	}
	return cfg, nil
}

// benchProcs are the helper processes (fakes, relays) of a bench run.
type benchProcs struct {
	self  string
	procs []*exec.Cmd
}

// start runs this program in mode with args and returns the URL it prints
// first and its process id.
func (p *benchProcs) start(mode string, args ...string) (string, int, error) {
	cmd := exec.Command(p.self, append([]string{mode}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", 0, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, err
	}
	p.procs = append(p.procs, cmd)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", 0, fmt.Errorf("%s did not start: %w", mode, err)
	}
	return strings.TrimSpace(line), cmd.Process.Pid, nil
}

// stop ends every helper process and waits for it.
func (p *benchProcs) stop() {
	for _, c := range p.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
		_, _ = c.Process.Wait()
	}
}

// benchGatewayEnv is the gateway's environment. LLM and STREAM have no
// stream watchdog (TTFT_TIMEOUT_S=0 switches off the default one; a
// gateway that refuses 0 has none by default and gets the keys omitted:
// zero false), WATCHED has one.
func benchGatewayEnv(fakeURL, streamURL string, zero bool) map[string]string {
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

// arm is one way to a fake: direct, through the bare relay or through the
// gateway.
type arm struct {
	name, base string
	pid        int
}

// benchTable runs the measures of a bench run and writes their table.
type benchTable struct {
	cfg    *benchFlags
	rawOut io.Writer
	tw     *tabwriter.Writer
}

// measure runs l for the configured time and reports it on stderr and in
// the raw file.
func (t *benchTable) measure(label string, l load) (*report, error) {
	l.duration, l.warmup, l.payload = t.cfg.duration, t.cfg.warmup, 1024
	r, err := l.run()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	r.Label = label
	fmt.Fprintf(os.Stderr, "  %-34s %8.0f req/s  p50 %8.3f ms  p99 %8.3f ms  errors %d\n", label, r.Throughput, r.P50, r.P99, r.Errors)
	fmt.Fprintln(t.rawOut, mustJSON(r))
	return r, nil
}

// trio runs l through each of arms (direct, the bare relay, the gateway).
func (t *benchTable) trio(name string, l load, arms []arm) ([]*report, error) {
	var out []*report
	for _, a := range arms {
		la := l
		la.base, la.pid = a.base, a.pid
		r, err := t.measure(a.name+" "+name, la)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func (t *benchTable) row(cols ...string) { fmt.Fprintln(t.tw, strings.Join(cols, "\t")+"\t") }

// three writes the row of one measure of the three arms' reports rs.
func (t *benchTable) three(label string, get func(*report) float64, format func(float64) string, added bool, rs []*report) {
	d, r, g := get(rs[0]), get(rs[1]), get(rs[2])
	add := ""
	if added {
		add = plus(g - d)
	}
	t.row(label, format(d), format(r), format(g), add, ratio(g, d), ratio(r, d))
}

func reportP50(r *report) float64       { return r.P50 }
func reportP99(r *report) float64       { return r.P99 }
func reportCPUPerReq(r *report) float64 { return r.CPUPerReq }
func reportErrors(r *report) float64    { return float64(r.Errors) }
func reportRPS(r *report) float64       { return r.Throughput }

// openRuns measures each open-loop rate.
func (t *benchTable) openRuns(arms []arm) error {
	for _, rs := range strings.Split(t.cfg.rates, ",") {
		rate, err := strconv.ParseFloat(strings.TrimSpace(rs), 64)
		if err != nil || rate <= 0 {
			return fmt.Errorf("bad rate %q", rs)
		}
		name := fmt.Sprintf("open %g/s", rate)
		res, err := t.trio(name, load{rate: rate, model: "gpt-4o"}, arms)
		if err != nil {
			return err
		}
		t.three(name+" p50 ms", reportP50, f3, true, res)
		t.three(name+" p99 ms", reportP99, f3, true, res)
		t.three(name+" CPU µs/req", reportCPUPerReq, f1, false, res)
		t.three(name+" errors", reportErrors, f0, false, res)
	}
	return nil
}

// closedRuns measures the closed loop, then the gateway again on a source
// with a stream watchdog.
func (t *benchTable) closedRuns(arms []arm) error {
	name := fmt.Sprintf("closed %d conns", t.cfg.workers)
	res, err := t.trio(name, load{workers: t.cfg.workers, model: "gpt-4o"}, arms)
	if err != nil {
		return err
	}
	t.three(name+" req/s", reportRPS, f0, false, res)
	t.three(name+" CPU µs/req", reportCPUPerReq, f1, false, res)
	// The floor of any proxy: it is an HTTP server (what the fake costs per
	// request) and an HTTP client (what the load generator costs).
	t.three(name+" client CPU µs/req", func(r *report) float64 { return r.ClientCPUPerReq }, f1, false, res)
	floor := res[0].CPUPerReq + res[0].ClientCPUPerReq
	t.row(name+" floor: server+client µs/req", f1(floor), f1(res[1].CPUPerReq), f1(res[2].CPUPerReq), "", ratio(res[2].CPUPerReq, floor), ratio(res[1].CPUPerReq, floor))
	// A source with a stream watchdog: a non-streaming client's call still
	// streams upstream (so that a silent first token fails over).
	gw := arms[2]
	watched, err := t.measure("gateway "+name+" watched source", load{workers: t.cfg.workers, model: "watched", base: gw.base, pid: gw.pid})
	if err != nil {
		return err
	}
	w := []*report{res[0], res[1], watched}
	t.three(name+" watchdog req/s", reportRPS, f0, false, w)
	t.three(name+" watchdog CPU µs/req", reportCPUPerReq, f1, false, w)
	return nil
}

// streamRuns measures the streaming run.
func (t *benchTable) streamRuns(arms []arm) error {
	name := fmt.Sprintf("stream %g/s×%d", t.cfg.streamRate, t.cfg.streamTokens)
	res, err := t.trio(name, load{rate: t.cfg.streamRate, model: "stream", stream: true}, arms)
	if err != nil {
		return err
	}
	t.three(name+" TTFT p50 ms", func(r *report) float64 { return r.TTFT50 }, f3, true, res)
	t.three(name+" TTFT p99 ms", func(r *report) float64 { return r.TTFT99 }, f3, true, res)
	t.three(name+" chunks", func(r *report) float64 { return float64(r.Chunks) }, f0, false, res)
	t.three(name+" CPU µs/chunk", func(r *report) float64 { return r.CPUPerChk }, f3, false, res)
	t.three(name+" errors", reportErrors, f0, false, res)
	return nil
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
