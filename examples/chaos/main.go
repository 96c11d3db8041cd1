// Command chaos is the mixed-fault benchmark: it reproduces the Python
// original's experiment (8,000 calls against a mix of broken upstreams next
// to healthy ones, 58.1 % success with plain round robin, 98.96 % governed)
// against local fake upstreams, and checks the governed run against the
// targets of issue 3.
//
//	go run ./examples/chaos [-calls 8000] [-concurrency 64] [-seed 1]
//
// # The mix
//
// One scope (LLM) with seven sources, each its own fake upstream:
//
//	healthy_1, healthy_2  answer after a latency drawn uniformly in 20–80 ms
//	badkey_3              answers 401 invalid_api_key
//	blackhole_4           accepts the request and never answers
//	slow_5                sends its first token after 2 s (TTFT_TIMEOUT_S is 1)
//	limited_6             healthy, but 429 with Retry-After: 1 beyond 20 in flight
//	flapping_7            503 for 2 s, healthy for 2 s, and so on (from its start)
//
// Every call streams (so the stream watchdog applies) and every source has
// the same limits: TIMEOUT_S=2, TTFT_TIMEOUT_S=1, INTER_TOKEN_TIMEOUT_S=0.5.
// The original used longer time constants (10 s flapping periods, 30 s
// breaker cooldowns); they are scaled down so that the whole program ends
// well within 3 minutes on 2 cores. The call count is not scaled.
//
// # The runs
//
// The program runs, in one process and with fresh fake servers each time:
//
//  1. a calibration run against only the two healthy sources, at a
//     concurrency (16) that stays below the gateway's initial adaptive
//     concurrency limits, to measure the healthy sources' own p99 latency
//     as a client sees it (HTTP, SSE and the gateway included);
//  2. the governed run: health_aware selection, retries on, a breaker tuned
//     for the scaled time (see governedEnv for each setting and why);
//  3. the baseline: round_robin, MAX_ATTEMPTS=1 and a breaker that never
//     opens on its own channels (see baselineEnv).
//
// For runs 2 and 3 it prints the success rate, p50/p99 latency of the
// successful calls, the share of attempts each source received (counted by
// the fake servers: every request that reached them, including 429s and
// requests that hung), the attempts found in successful calls' attempt
// chains, breaker opens per source (Sources()), and the wall time. A final
// block compares the governed run with the targets
//
//	success ≥ 99.5 %
//	≤ 3 % of all attempts reach the bad-key and black-hole sources together
//	p99 ≤ 2 × the healthy sources' p99 + TIMEOUT_S
//
// and the program exits with status 1 when one is missed, so that
// `make chaos` can serve as a check.
//
// The baseline is not a textbook round robin: mechanisms of the library that
// no setting turns off still act in it (see baselineEnv). In particular a
// call whose untried sources are all at their adaptive concurrency limit is
// sent to a source that has just failed (soft hold) instead of
// waiting for a slot, so at concurrency 64 the fast-failing flapping and
// bad-key sources absorb the overflow while the healthy sources' limits are
// still growing from 8: the baseline's success rate is low and varies from
// run to run with the timing.
//
// -seed fixes the fakes' latency draws; the gateway's own randomness (power
// of two choices, backoff jitter) and the scheduler are not seeded, so
// figures vary a little from run to run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// Scaled time constants of the experiment.
const (
	timeoutS        = 2.0 // TIMEOUT_S of every source: wall-clock cap of one attempt
	ttftTimeoutS    = 1.0 // TTFT_TIMEOUT_S: the slow source's 2 s first token misses it
	interTokenS     = 0.5 // INTER_TOKEN_TIMEOUT_S (must be below TTFT_TIMEOUT_S)
	healthyMin      = 20 * time.Millisecond
	healthyMax      = 80 * time.Millisecond
	slowFirstToken  = 2 * time.Second
	rateLimitFlight = 20 // the rate-limited source answers 429 beyond this many in flight
	flapDown        = 2 * time.Second
	flapUp          = 2 * time.Second

	// calibration run: healthy sources only, below the initial AIMD limits
	// (8 per source), so the figure is the sources' latency, not queueing.
	calibrationCalls       = 1000
	calibrationConcurrency = 16
)

// role is what a fake upstream does.
type role int

const (
	roleHealthy role = iota
	roleBadKey
	roleBlackHole
	roleSlow
	roleRateLimited
	roleFlapping
)

func (r role) String() string {
	switch r {
	case roleHealthy:
		return fmt.Sprintf("healthy %d–%d ms", healthyMin.Milliseconds(), healthyMax.Milliseconds())
	case roleBadKey:
		return "bad key (401)"
	case roleBlackHole:
		return "black hole"
	case roleSlow:
		return fmt.Sprintf("slow (TTFT %s)", slowFirstToken)
	case roleRateLimited:
		return fmt.Sprintf("429 beyond %d in flight", rateLimitFlight)
	case roleFlapping:
		return fmt.Sprintf("flapping %s/%s", flapDown, flapUp)
	}
	return "?"
}

// sourceSpec is one source of the scope: its config key parts and its role.
type sourceSpec struct {
	provider string
	n        int
	role     role
}

// name is the source name the library derives from the keys.
func (s sourceSpec) name() string { return strings.ToLower(s.provider) + "_" + strconv.Itoa(s.n) }

// mix is the mixed-fault scope.
var mix = []sourceSpec{
	{"HEALTHY", 1, roleHealthy},
	{"HEALTHY", 2, roleHealthy},
	{"BADKEY", 3, roleBadKey},
	{"BLACKHOLE", 4, roleBlackHole},
	{"SLOW", 5, roleSlow},
	{"LIMITED", 6, roleRateLimited},
	{"FLAPPING", 7, roleFlapping},
}

func main() {
	calls := flag.Int("calls", 8000, "calls per run")
	concurrency := flag.Int("concurrency", 64, "calls in flight")
	seed := flag.Uint64("seed", 1, "seed of the fake upstreams' latency draws")
	flag.Parse()
	if *calls < 1 || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "chaos: -calls and -concurrency must be at least 1")
		os.Exit(2)
	}
	ok, err := run(os.Stdout, *calls, *concurrency, *seed)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

func run(w io.Writer, calls, concurrency int, seed uint64) (bool, error) {
	fmt.Fprintf(w, "mixed-fault benchmark: %d calls per run at concurrency %d, seed %d\n", calls, concurrency, seed)
	fmt.Fprintf(w, "every source: TIMEOUT_S=%g TTFT_TIMEOUT_S=%g INTER_TOKEN_TIMEOUT_S=%g, streaming calls\n\n",
		timeoutS, ttftTimeoutS, interTokenS)

	healthyOnly := []sourceSpec{mix[0], mix[1]}
	cal, err := runOnce("calibration", healthyOnly, governedEnv(), min(calibrationCalls, calls), min(calibrationConcurrency, concurrency), seed)
	if err != nil {
		return false, err
	}
	healthyP99 := cal.percentile(0.99)
	fmt.Fprintf(w, "== calibration: healthy sources only, governed config, %d calls at concurrency %d\n", cal.calls, cal.concurrency)
	fmt.Fprintf(w, "success %s   p50 %s   p99 %s   (configured latency distribution p99: %s)\n\n",
		pct(cal.successes(), cal.calls), ms(cal.percentile(0.50)), ms(healthyP99),
		ms(healthyMin+time.Duration(0.99*float64(healthyMax-healthyMin))))

	gov, err := runOnce("governed", mix, governedEnv(), calls, concurrency, seed)
	if err != nil {
		return false, err
	}
	gov.print(w, envSummary(governedEnv()))

	base, err := runOnce("baseline", mix, baselineEnv(), calls, concurrency, seed)
	if err != nil {
		return false, err
	}
	base.print(w, envSummary(baselineEnv()))

	return check(w, gov, base, healthyP99), nil
}

// governedEnv is the governed configuration. Each setting and why:
//
//   - SELECTOR=health_aware (the default): EWMA success score × in-flight,
//     power of two choices; weak sources only when nothing healthy is left.
//   - RETRY__MAX_ATTEMPTS=4: a call may meet up to three broken sources
//     (bad key, black hole/slow, flapping) before a healthy one.
//   - RETRY__BACKOFF_BASE_S=0.05, BACKOFF_MAX_S=0.5 (defaults 1 and 30):
//     scaled with the rest; failover to an untried source is immediate
//     anyway, backoff only applies when a call returns to a source.
//   - BREAKER__FAIL_THRESHOLD=5 (the default): five consecutive failures open.
//   - BREAKER__COOLDOWN_S=1 (default 30), MAX_COOLDOWN_S=10 (default 300):
//     scaled down so that the flapping source, once open, is probed again
//     within its 2 s up window and a dead source is still probed only a few
//     times per run (1, 2, 4, 8, 10 s between probes).
//   - BREAKER__WINDOW_S=10 (default 60), MIN_CALLS=20 and FAIL_RATE=0.5
//     (defaults): the failure-rate window scaled with the run length.
//   - BREAKER__PROBE_TTL_S=2: the largest TIMEOUT_S (also the default).
//   - BACKPRESSURE__STALL_WINDOW_S=10 (default 60): bounds a call that finds
//     no source and sees no progress anywhere; scaled, never reached here.
func governedEnv() map[string]string {
	return map[string]string{
		"LLM__SELECTOR":                     "health_aware",
		"LLM__RETRY__MAX_ATTEMPTS":          "4",
		"LLM__RETRY__BACKOFF_BASE_S":        "0.05",
		"LLM__RETRY__BACKOFF_MAX_S":         "0.5",
		"LLM__BREAKER__FAIL_THRESHOLD":      "5",
		"LLM__BREAKER__COOLDOWN_S":          "1",
		"LLM__BREAKER__MAX_COOLDOWN_S":      "10",
		"LLM__BREAKER__WINDOW_S":            "10",
		"LLM__BREAKER__MIN_CALLS":           "20",
		"LLM__BREAKER__FAIL_RATE":           "0.5",
		"LLM__BREAKER__PROBE_TTL_S":         "2",
		"LLM__BACKPRESSURE__STALL_WINDOW_S": "10",
	}
}

// baselineEnv is plain round robin with no retries and a breaker that never
// opens by its own channels: FAIL_THRESHOLD and MIN_CALLS far beyond the
// run's call count. A 401 (SourceDead) still opens a breaker at once — the
// library has no setting against that — so COOLDOWN_S and MAX_COOLDOWN_S are
// 1 ms: the bad-key source is back in the rotation right away (the timeout
// hold also lasts one cooldown, so it is 1 ms as well). Two library
// constants still act and cannot be turned off: the per-source adaptive
// concurrency limit (AIMD, starting at 8 in flight), which caps how many
// calls can hang on the black hole and the slow source at once, and 429
// pushback, which moves a rate-limited call to another source without using
// the retry budget.
func baselineEnv() map[string]string {
	return map[string]string{
		"LLM__SELECTOR":                     "round_robin",
		"LLM__RETRY__MAX_ATTEMPTS":          "1",
		"LLM__RETRY__BACKOFF_BASE_S":        "0.05",
		"LLM__RETRY__BACKOFF_MAX_S":         "0.5",
		"LLM__BREAKER__FAIL_THRESHOLD":      "1000000000",
		"LLM__BREAKER__MIN_CALLS":           "1000000000",
		"LLM__BREAKER__COOLDOWN_S":          "0.001",
		"LLM__BREAKER__MAX_COOLDOWN_S":      "0.001",
		"LLM__BREAKER__PROBE_TTL_S":         "2",
		"LLM__BACKPRESSURE__STALL_WINDOW_S": "10",
	}
}

// envSummary renders the scope keys of a configuration on one line.
func envSummary(env map[string]string) string {
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range env {
			if !yield(k) {
				return
			}
		}
	})
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, strings.TrimPrefix(k, "LLM__")+"="+env[k])
	}
	return strings.Join(parts, " ")
}

// startFake starts the fake upstream of one source.
func startFake(s sourceSpec, seed uint64) *polygatewaytest.Server {
	healthy := latencyFunc(seed)
	switch s.role {
	case roleBadKey:
		return polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.BadKey()))
	case roleBlackHole:
		return polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.Hang()))
	case roleSlow:
		return polygatewaytest.New(polygatewaytest.WithBehavior(polygatewaytest.OK().WithFirstTokenDelay(slowFirstToken)))
	case roleRateLimited:
		return polygatewaytest.New(polygatewaytest.WithConcurrencyLimit(rateLimitFlight, polygatewaytest.RateLimited("1")),
			polygatewaytest.WithFunc(healthy))
	case roleFlapping:
		return polygatewaytest.New(polygatewaytest.WithFlap(flapDown, flapUp, polygatewaytest.ServerError(503)),
			polygatewaytest.WithFunc(healthy))
	}
	return polygatewaytest.New(polygatewaytest.WithFunc(healthy))
}

// latencyFunc answers OK after a latency drawn uniformly in
// [healthyMin, healthyMax] from a generator seeded with seed.
func latencyFunc(seed uint64) func(polygatewaytest.RequestInfo) polygatewaytest.Behavior {
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	span := int64(healthyMax - healthyMin)
	return func(polygatewaytest.RequestInfo) polygatewaytest.Behavior {
		mu.Lock()
		d := healthyMin + time.Duration(rng.Int64N(span+1))
		mu.Unlock()
		return polygatewaytest.OK().WithLatency(d)
	}
}

// sourceResult is what one source saw in a run.
type sourceResult struct {
	spec      sourceSpec
	requests  int // requests the fake server received: the ground truth
	inChains  int // appearances in successful calls' attempt chains
	opens     int
	state     string
	health    float64
	aimdLimit float64
}

// runResult is one run's outcome.
type runResult struct {
	label       string
	calls       int
	concurrency int
	wall        time.Duration
	latencies   []time.Duration // of successful calls, sorted
	failures    map[string]int  // error kind → count
	sources     []sourceResult
}

func (r *runResult) successes() int { return len(r.latencies) }

func (r *runResult) totalRequests() int {
	n := 0
	for _, s := range r.sources {
		n += s.requests
	}
	return n
}

// requestsOf counts the requests received by the sources of the given roles.
func (r *runResult) requestsOf(roles ...role) int {
	n := 0
	for _, s := range r.sources {
		if slices.Contains(roles, s.spec.role) {
			n += s.requests
		}
	}
	return n
}

// percentile returns the q-quantile (nearest rank) of successful latencies.
func (r *runResult) percentile(q float64) time.Duration {
	n := len(r.latencies)
	if n == 0 {
		return 0
	}
	i := int(q*float64(n)+0.999999) - 1
	return r.latencies[min(max(i, 0), n-1)]
}

// runOnce starts fresh fakes for specs, assembles a client with env on top
// of the per-source keys, makes calls at the given concurrency and collects
// the figures.
func runOnce(label string, specs []sourceSpec, env map[string]string, calls, concurrency int, seed uint64) (*runResult, error) {
	fakes := make([]*polygatewaytest.Server, len(specs))
	for i, s := range specs {
		fakes[i] = startFake(s, seed+uint64(i)*1000003)
	}
	defer func() {
		for _, f := range fakes {
			f.Close()
		}
	}()

	full := map[string]string{
		"PGW_LIMITER_BACKEND":   "memory",
		"PGW_BREAKER_BACKEND":   "memory",
		"PGW_CACHE_BACKEND":     "none", // every call must reach the engine
		"PGW_TELEMETRY_BACKEND": "none",
	}
	for k, v := range env {
		full[k] = v
	}
	ftoa := func(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
	for i, s := range specs {
		p := fmt.Sprintf("LLM__%s__%d__", s.provider, s.n)
		full[p+"BASE_URL"] = fakes[i].URL()
		full[p+"API_KEY"] = "sk-chaos-" + strconv.Itoa(s.n)
		full[p+"MODEL"] = "chaos-model"
		full[p+"TIMEOUT_S"] = ftoa(timeoutS)
		full[p+"TTFT_TIMEOUT_S"] = ftoa(ttftTimeoutS)
		full[p+"INTER_TOKEN_TIMEOUT_S"] = ftoa(interTokenS)
		full[p+"TRUST_ENV"] = "false" // never send local traffic through a proxy
	}
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(full))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", label, err)
	}
	defer client.Close()

	type outcome struct {
		latency  time.Duration
		err      error
		attempts []string
	}
	out := make([]outcome, calls)
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= calls {
					return
				}
				msgs := []polygateway.Message{polygateway.User("chaos call " + strconv.Itoa(i))}
				t0 := time.Now()
				resp, err := client.Chat(ctx, msgs, polygateway.WithStream(true))
				o := outcome{latency: time.Since(t0), err: err}
				if err == nil {
					o.attempts = resp.Attempts
				}
				out[i] = o
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)

	res := &runResult{label: label, calls: calls, concurrency: concurrency, wall: wall, failures: map[string]int{}}
	chains := map[string]int{}
	for _, o := range out {
		if o.err != nil {
			res.failures[failureKind(o.err)]++
			continue
		}
		res.latencies = append(res.latencies, o.latency)
		for _, a := range o.attempts {
			chains[a]++
		}
	}
	slices.Sort(res.latencies)
	status := map[string]polygateway.SourceStatus{}
	for _, st := range client.Sources(ctx) {
		status[st.Name] = st
	}
	for i, s := range specs {
		st := status[s.name()]
		res.sources = append(res.sources, sourceResult{
			spec: s, requests: fakes[i].Requests(), inChains: chains[s.name()],
			opens: st.Breaker.Opens, state: st.Breaker.State.String(), health: st.Health, aimdLimit: st.AdaptiveLimit,
		})
	}
	return res, nil
}

// failureKind names a failed call's error for the failure breakdown.
func failureKind(err error) string {
	var (
		u *polygateway.GatewayUnavailableError
		t *polygateway.TransientError
		d *polygateway.SourceDeadError
	)
	switch {
	case errors.As(err, &u):
		return "unavailable/" + string(u.Reason)
	case errors.As(err, &t):
		return "transient/" + string(t.Reason)
	case errors.As(err, &d):
		return "source_dead"
	}
	return fmt.Sprintf("%T", err)
}

// print writes the run's table.
func (r *runResult) print(w io.Writer, config string) {
	fmt.Fprintf(w, "== %s run: %d calls at concurrency %d\n", r.label, r.calls, r.concurrency)
	fmt.Fprintf(w, "config: %s\n", config)
	fmt.Fprintf(w, "success rate  %s (%d/%d)", pct(r.successes(), r.calls), r.successes(), r.calls)
	if len(r.failures) > 0 {
		kinds := slices.Sorted(func(yield func(string) bool) {
			for k := range r.failures {
				if !yield(k) {
					return
				}
			}
		})
		parts := make([]string, 0, len(kinds))
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.failures[k]))
		}
		fmt.Fprintf(w, "   failures: %s", strings.Join(parts, ", "))
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "latency       p50 %s   p99 %s   max %s   (successful calls)\n",
		ms(r.percentile(0.50)), ms(r.percentile(0.99)), ms(r.percentile(1)))
	fmt.Fprintf(w, "wall time     %s\n", r.wall.Round(time.Millisecond))
	total := r.totalRequests()
	fmt.Fprintf(w, "%-12s %-22s %9s %8s %10s %6s %-10s %6s %5s\n",
		"source", "behaviour", "attempts", "share", "in-chains", "opens", "breaker", "health", "aimd")
	for _, s := range r.sources {
		fmt.Fprintf(w, "%-12s %-22s %9d %8s %10d %6d %-10s %6.2f %5.1f\n",
			s.spec.name(), s.spec.role, s.requests, pct(s.requests, total), s.inChains, s.opens, s.state, s.health, s.aimdLimit)
	}
	fmt.Fprintf(w, "%-12s %-22s %9d %8s %10d\n", "total", "", total, pct(total, total), r.successes()+r.chainFailures())
	fmt.Fprintln(w, "(attempts: requests received by each fake server; in-chains: entries in successful calls' Attempts)")
	fmt.Fprintln(w)
}

// chainFailures is the number of failed attempts inside successful chains.
func (r *runResult) chainFailures() int {
	n := 0
	for _, s := range r.sources {
		n += s.inChains
	}
	return n - r.successes()
}

// check compares the governed run with the targets (the baseline is shown
// for comparison only) and reports whether every target is met.
func check(w io.Writer, gov, base *runResult, healthyP99 time.Duration) bool {
	bound := 2*healthyP99 + time.Duration(timeoutS*float64(time.Second))
	type row struct {
		name   string
		target string
		gov    string
		base   string
		ok     bool
	}
	share := func(r *runResult) float64 {
		t := r.totalRequests()
		if t == 0 {
			return 0
		}
		return float64(r.requestsOf(roleBadKey, roleBlackHole)) / float64(t)
	}
	rate := func(r *runResult) float64 { return float64(r.successes()) / float64(r.calls) }
	rows := []row{
		{"success rate", "≥ 99.5 %", pct(gov.successes(), gov.calls), pct(base.successes(), base.calls), rate(gov) >= 0.995},
		{"bad key + black hole", "≤ 3 % of attempts",
			fmt.Sprintf("%.2f %% (%d/%d)", 100*share(gov), gov.requestsOf(roleBadKey, roleBlackHole), gov.totalRequests()),
			fmt.Sprintf("%.2f %% (%d/%d)", 100*share(base), base.requestsOf(roleBadKey, roleBlackHole), base.totalRequests()),
			share(gov) <= 0.03},
		{"p99 latency", fmt.Sprintf("≤ 2×%s + %gs = %s", ms(healthyP99), timeoutS, ms(bound)),
			ms(gov.percentile(0.99)), ms(base.percentile(0.99)), gov.successes() > 0 && gov.percentile(0.99) <= bound},
	}
	fmt.Fprintln(w, "== check: governed run against the targets (baseline for comparison)")
	fmt.Fprintf(w, "%-22s %-30s %-24s %-24s %s\n", "target", "bound", "governed", "baseline", "governed")
	allOK := true
	for _, r := range rows {
		verdict := "ok"
		if !r.ok {
			verdict, allOK = "MISSED", false
		}
		fmt.Fprintf(w, "%-22s %-30s %-24s %-24s %s\n", r.name, r.target, r.gov, r.base, verdict)
	}
	if allOK {
		fmt.Fprintln(w, "all targets met")
	} else {
		fmt.Fprintln(w, "targets missed: see MISSED above")
	}
	return allOK
}

// pct formats n/d as a percentage.
func pct(n, d int) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f %%", 100*float64(n)/float64(d))
}

// ms formats a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
