// Command faultbench drives fault patterns through the gateway and tells,
// for each, what its client got: the table of docs/explanation-faults.md
// (make faultbench).
//
//	go run ./cmd/polygateway/internal/faultbench [-gateway BIN] [-profile docs/production.env] [-doc docs/explanation-faults.md]
//
// It builds cmd/polygateway (unless -gateway names a binary), starts a
// primary and a fallback fake upstream for every pattern (polygatewaytest
// servers in this process, on loopback), and the gateway as a process of
// its own on loopback with one scope per pattern. Every pattern runs twice:
// first with the library's defaults (each source has only its MODEL,
// TIMEOUT_S and PRIORITY), then with the production profile (every key of
// the profile's scope and sources, and its PGW_STREAM_COMMIT). The patterns
// of a run go at once, each in its own scope; the calls of a pattern one
// after the other, streamed unless the pattern is about non-streaming
// clients, each within the client's budget (-budget).
//
// Each call is classified: rescued (the complete, correct answer), clean
// error (an honest status or SSE error event within the budget) or wrong
// (a truncated or wrong answer presented as a success, a hang past the
// budget, or attempts that the headers, the gateway object or the access
// log misreport against what the upstreams saw). A pattern's outcome is its
// worst call's. It prints a Markdown table and, with -doc, writes it into
// that file between the lines <!-- faultbench:begin --> and
// <!-- faultbench:end -->. It exits non-zero when an outcome is wrong.
//
// Run it from the repository root. Only loopback addresses are used; a run
// takes about a minute after the build, and at most a few minutes.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway/cmd/polygateway/internal/gwproc"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// scenarioCap bounds one pattern's run: no call is sent after it.
const scenarioCap = 60 * time.Second

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "faultbench:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("faultbench", flag.ContinueOnError)
	gwBin := fs.String("gateway", "", "the polygateway binary (default: built from ./cmd/polygateway)")
	goCmd := fs.String("go", "go", "the go command that builds the gateway")
	profilePath := fs.String("profile", "docs/production.env", "the production profile (an env file)")
	doc := fs.String("doc", "", "also write the table into this Markdown file, between its faultbench markers")
	budget := fs.Duration("budget", 45*time.Second, "the client's budget for each call")
	only := fs.String("run", "", "only the patterns whose name contains this")
	keepLogs := fs.Bool("keep-logs", false, "keep the gateway's log files (their paths are printed)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	prof, err := readProfile(*profilePath)
	if err != nil {
		return err
	}
	var picked []*scenario
	for _, sc := range scenarios {
		if strings.Contains(sc.pattern, *only) {
			picked = append(picked, sc)
		}
	}
	if len(picked) == 0 {
		return fmt.Errorf("no pattern matches %q", *only)
	}
	if *gwBin == "" {
		dir, err := os.MkdirTemp("", "faultbench-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*gwBin = filepath.Join(dir, "polygateway")
		fmt.Fprintln(os.Stderr, "faultbench: building cmd/polygateway")
		build := exec.Command(*goCmd, "build", "-o", *gwBin, "./cmd/polygateway")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building the gateway: %w", err)
		}
	}
	machine := machineNote()
	began := time.Now()
	var results [2][]*scenarioRun
	for i, tuned := range []bool{false, true} {
		label := [...]string{"defaults", "production profile"}[i]
		t0 := time.Now()
		fmt.Fprintf(os.Stderr, "faultbench: %d patterns with the %s\n", len(picked), label)
		if results[i], err = runAll(*gwBin, prof, tuned, picked, *budget, *keepLogs); err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		fmt.Fprintf(os.Stderr, "faultbench: %s done in %.1f s\n", label, time.Since(t0).Seconds())
	}
	table := report(picked, results)
	footer := fmt.Sprintf("Measured %s by `make faultbench` (%.0f s in all; every call's budget %.0f s) on %s. The profile run adds to the defaults: %s.\n",
		time.Now().UTC().Format("2006-01-02"), time.Since(began).Seconds(), budget.Seconds(), machine, prof.describe())
	fmt.Print(table + "\n" + footer)
	if *doc != "" {
		if err := writeDoc(*doc, table+"\n"+footer); err != nil {
			return err
		}
	}
	for _, rs := range results {
		for _, r := range rs {
			if r.outcome == wrong {
				return errors.New("a pattern ended wrong: see the table")
			}
		}
	}
	return nil
}

// runAll runs every scenario once, at once, through one gateway process.
func runAll(bin string, prof *profile, tuned bool, scs []*scenario, budget time.Duration, keepLogs bool) ([]*scenarioRun, error) {
	env := map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory", "PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"PGW_LOG_LEVEL": "info", "PGW_LOG_FORMAT": "json", "PGW_METRICS": "false",
	}
	var routes []string
	runs := make([]*scenarioRun, len(scs))
	defer func() {
		for _, r := range runs {
			if r != nil {
				r.upstream[0].Close()
				r.upstream[1].Close()
			}
		}
	}()
	for i, sc := range scs {
		r := &scenarioRun{sc: sc, scope: fmt.Sprintf("F%02d", i+1), model: fmt.Sprintf("f%02d", i+1),
			names: [2]string{prof.primary.name(), prof.fallback.name()}}
		fb := sc.fallback
		if fb == nil {
			fb = func(*scenarioRun) []fakeupstream.Option { return continuer(false) }
		}
		r.upstream[0] = fakeupstream.New(append(sc.primary(r), fakeupstream.WithBodyHistory(0))...)
		r.upstream[1] = fakeupstream.New(append(fb(r), fakeupstream.WithBodyHistory(0))...)
		var overrides [2]map[string]string
		if sc.overrides != nil {
			overrides = sc.overrides(prof)
		}
		prof.gatewayEnv(env, r.scope, tuned, [2]string{r.upstream[0].URL(), r.upstream[1].URL()}, overrides)
		routes = append(routes, r.model+"="+r.scope)
		runs[i] = r
	}
	env["PGW_ROUTES"] = strings.Join(routes, ",")
	if err := gwproc.Check(bin, env); err != nil {
		return nil, err
	}
	gw, err := gwproc.Start(bin, env)
	if err != nil {
		return nil, err
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
	defer hc.CloseIdleConnections()
	tag := [...]string{"d", "p"}[btoi(tuned)]
	var wg sync.WaitGroup
	for _, r := range runs {
		start := time.Now()
		r.base, r.hc = gw.URL(), hc
		r.send = func(stream bool) {
			if time.Since(start) > scenarioCap {
				return
			}
			c := do(hc, gw.URL()+"/v1", r.model, fmt.Sprintf("fb-%s-%s-%d", tag, r.model, len(r.calls)+1), stream, budget)
			c.truth = r.truth(c.start, c.end)
			r.calls = append(r.calls, c)
		}
		wg.Go(func() {
			if r.sc.drive != nil {
				r.sc.drive(r)
				return
			}
			calls := r.sc.calls
			if calls == nil {
				calls = []bool{true}
			}
			for _, stream := range calls {
				r.send(stream)
			}
		})
	}
	wg.Wait()
	stopErr := gw.Stop()
	logs, err := accessLog(gw.LogPath())
	if keepLogs {
		fmt.Fprintln(os.Stderr, "faultbench: gateway log", gw.LogPath())
	} else {
		os.Remove(gw.LogPath())
	}
	if err != nil {
		return nil, err
	}
	if stopErr != nil {
		fmt.Fprintln(os.Stderr, "faultbench: the gateway did not stop cleanly:", stopErr)
	}
	for _, r := range runs {
		for _, c := range r.calls {
			c.logAttempts, c.logFound = logs[c.id]
		}
		r.judge()
	}
	return runs, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// accessLog reads the attempts of every request of the gateway's log, by
// request id.
func accessLog(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var line struct {
			Msg       string  `json:"msg"`
			RequestID string  `json:"request_id"`
			Attempts  *string `json:"attempts"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil || line.Msg != "request" || !strings.HasPrefix(line.RequestID, "fb-") {
			continue
		}
		var attempts []string
		if line.Attempts != nil && *line.Attempts != "" {
			attempts = strings.Split(*line.Attempts, ",")
		}
		out[line.RequestID] = attempts
	}
	return out, sc.Err()
}

// report renders the table.
func report(scs []*scenario, results [2][]*scenarioRun) string {
	var b strings.Builder
	b.WriteString("| pattern | defaults | production profile | note |\n|---|---|---|---|\n")
	for i, sc := range scs {
		d, p := results[0][i], results[1][i]
		note := sc.note
		if d.remark == p.remark {
			note += " Both: " + d.remark + "."
		} else {
			note += " Defaults: " + d.remark + ". Profile: " + p.remark + "."
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", sc.pattern, cell(d), cell(p), strings.ReplaceAll(note, "|", "\\|"))
	}
	return b.String()
}

// cell is an outcome with the slowest call's time when it is not small.
func cell(r *scenarioRun) string {
	s := r.outcome.String()
	if r.outcome == wrong {
		s = "**wrong**"
	}
	if d := r.slowest(); d >= 500*time.Millisecond {
		s += fmt.Sprintf(" (%.1f s)", d.Seconds())
	}
	return s
}

// Markers of the table in the documentation.
const (
	beginMarker = "<!-- faultbench:begin -->"
	endMarker   = "<!-- faultbench:end -->"
)

// writeDoc replaces what lies between the markers of the file at path.
func writeDoc(path, text string) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(raw, []byte(beginMarker)), bytes.Index(raw, []byte(endMarker))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %s … %s lines to write the table between", path, beginMarker, endMarker)
	}
	var out bytes.Buffer
	out.Write(raw[:i+len(beginMarker)])
	out.WriteString("\n\n" + text + "\n")
	out.Write(raw[j:])
	return os.WriteFile(path, out.Bytes(), 0o644)
}

// machineNote describes the machine: CPUs, their model, the load when the
// run began, Go.
func machineNote() string {
	note := fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				note += " (" + strings.TrimSpace(v) + ")"
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			note += ", load average " + f[0] + " at the start"
		}
	}
	return note + ", " + runtime.Version()
}
