package queue

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// The load: callers contending for the slots of one concurrency gate
// (MAX_CONCURRENCY), each holding its slot for a service time drawn
// uniformly between half and one and a half of service (so that the
// releases do not come in step), in the three classes in turn and four
// tenants.
const (
	slots       = 8
	callers     = 48
	service     = 20 * time.Millisecond
	idleWaiters = 100  // waiting while nothing frees: commands per waiter-second
	memWaiters  = 2000 // waiting at once: memory per waiting call
)

var tenants = []string{"team-a", "team-b", "team-c", "team-d"}

// backend is one Admitter under test, and what the benchmark reads of its
// store besides.
type backend struct {
	admitter core.Admitter
	// depth returns the calls waiting in line (nil: not known).
	depth func(ctx context.Context) (int, error)
	// commands returns the commands the store's server has run, scripts
	// and the commands inside them apart (nil: no server).
	commands func() (scripts, inside int)
}

// BenchmarkQueue runs the load through each backend's Admitter: b.N
// admissions of callers contending for slots slots held for service each.
// It reports the utilization of the gate (the share of its slot-time spent
// serving calls), the wait p50 and p99 of each class, the scripts and the
// commands inside them per admission and per waiter-second of waiting
// (Redis), and the heap a waiting call costs its process.
func BenchmarkQueue(b *testing.B) {
	b.Run("memory", func(b *testing.B) {
		l, br := memory.NewLimiter(memory.WithQueue(memory.QueueConfig{})), memory.NewBreaker()
		run(b, backend{admitter: core.ComposeAdmitter(l, br)})
	})
	b.Run("redis", func(b *testing.B) {
		rs := startRedis(b)
		c := redis.NewClient(&redis.Options{Addr: rs, ContextTimeoutEnabled: true, PoolSize: 4 * callers})
		defer c.Close()
		stats := redis.NewClient(&redis.Options{Addr: rs})
		defer stats.Close()
		opts := []redisstore.Option{redisstore.WithPrefix("qbench")}
		a := redisstore.NewAdmitter(redisstore.NewLimiter(c, opts...), redisstore.NewBreaker(c, opts...),
			redisstore.WithQueue(redisstore.QueueConfig{}))
		defer a.Close()
		run(b, backend{admitter: a,
			depth: func(ctx context.Context) (int, error) {
				d, err := a.Depth(ctx, scope, "")
				return d[0] + d[1] + d[2], err
			},
			commands: func() (int, int) { return commandStats(b, stats) }})
	})
}

// BenchmarkQueueUtilization: the utilization of the gate under the load of
// BenchmarkQueue as the mean service time grows, through the memory
// limiter's queue and the Redis Admitter's (a handoff costs about the
// same whatever the length of the call, so its share shrinks as calls
// grow). Each arm runs about four seconds of load once, whatever b.N.
func BenchmarkQueueUtilization(b *testing.B) {
	rs := startRedis(b)
	c := redis.NewClient(&redis.Options{Addr: rs, ContextTimeoutEnabled: true, PoolSize: 4 * callers})
	defer c.Close()
	opts := []redisstore.Option{redisstore.WithPrefix("qutil")}
	ra := redisstore.NewAdmitter(redisstore.NewLimiter(c, opts...), redisstore.NewBreaker(c, opts...),
		redisstore.WithQueue(redisstore.QueueConfig{}))
	defer ra.Close()
	ml := memory.NewLimiter(memory.WithQueue(memory.QueueConfig{}))
	arms := []struct {
		name string
		be   backend
	}{{"memory", backend{admitter: core.ComposeAdmitter(ml, memory.NewBreaker())}}, {"redis", backend{admitter: ra}}}
	for _, svc := range []time.Duration{20 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond} {
		for _, arm := range arms {
			b.Run(fmt.Sprintf("%s/service=%v", arm.name, svc), func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := load(ctx, arm.be, 2*slots, nil, svc); err != nil {
					b.Fatal(err)
				}
				n := int(4*time.Second/svc) * slots
				r := &result{start: time.Now(), target: n}
				if err := load(ctx, arm.be, n, r, svc); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(r.utilization()*100, "util-%")
			})
		}
	}
}

const scope = "QBENCH"

// request is the call of a caller of place.
func request(place core.Place) core.AdmitRequest {
	return core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: core.PermitRequest{
		Scope: scope, Source: "s", SourceLimits: core.Limits{MaxConcurrency: slots}, LeaseTTL: time.Minute, Place: place}}
}

func run(b *testing.B, be backend) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// Warm up: scripts loaded, keys made, the subscriber listening.
	if err := load(ctx, be, 2*slots, nil, service); err != nil {
		b.Fatal(err)
	}
	var s0, c0 int
	if be.commands != nil {
		s0, c0 = be.commands()
	}
	b.ResetTimer()
	r := &result{start: time.Now(), target: b.N}
	if err := load(ctx, be, b.N, r, service); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(r.utilization()*100, "util-%")
	for p := range core.NumPriorities {
		prio := core.PriorityOfRank(p)
		p50, p99 := r.percentiles(prio)
		b.ReportMetric(ms(p50), "p50-"+prio.String()+"-ms")
		b.ReportMetric(ms(p99), "p99-"+prio.String()+"-ms")
	}
	if be.commands != nil {
		s1, c1 := be.commands()
		n := float64(r.admitted.Load())
		b.ReportMetric(float64(s1-s0)/n, "scripts/admission")
		b.ReportMetric(float64(c1-c0)/n, "cmds/admission")
		b.ReportMetric(idle(ctx, b, be), "cmds/waiter-s")
	}
	if per, ok := waiterMemory(ctx, b, be); ok {
		b.ReportMetric(per, "B/waiter")
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// result gathers what the callers of one load saw.
type result struct {
	start  time.Time
	target int

	mu       sync.Mutex
	end      time.Time // when the target-th admission came (zero: not yet)
	holds    [][2]time.Time
	waits    [core.NumPriorities][]time.Duration
	admitted atomic.Int64
}

// record notes one admitted call: its wait, and when it held its slot.
func (r *result) record(p core.Priority, wait time.Duration, from, to time.Time) {
	r.admitted.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.holds = append(r.holds, [2]time.Time{from, to})
	if !r.end.IsZero() {
		return // admitted while the load drained: its slot-time counts up to the end
	}
	r.waits[p] = append(r.waits[p], wait)
	if len(r.holds) >= r.target {
		r.end = to
	}
}

// done reports whether the load has reached its target.
func (r *result) done() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.end.IsZero()
}

// utilization is the slot-time spent serving calls over the slot-time the
// gate offered, from the start to the target-th admission's end.
func (r *result) utilization() float64 {
	var busy time.Duration
	for _, h := range r.holds {
		if d := earlier(h[1], r.end).Sub(later(h[0], r.start)); d > 0 {
			busy += d
		}
	}
	return float64(busy) / float64(slots*r.end.Sub(r.start))
}

func earlier(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// percentiles returns the p50 and p99 wait of class p.
func (r *result) percentiles(p core.Priority) (time.Duration, time.Duration) {
	w := slices.Clone(r.waits[p])
	if len(w) == 0 {
		return 0, 0
	}
	slices.Sort(w)
	return w[len(w)/2], w[len(w)*99/100]
}

// load runs callers, each holding its slot for a time drawn uniformly
// between half and one and a half of svc, until n calls were admitted (r
// records them; nil: a warm-up), then lets the callers drain.
func load(ctx context.Context, be backend, n int, r *result, svc time.Duration) error {
	if r == nil {
		r = &result{start: time.Now(), target: n}
	}
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := i; !r.done(); k++ {
				place := core.Place{Priority: core.Priority(k % core.NumPriorities), Tenant: tenants[i%len(tenants)]}
				start := time.Now()
				t, err := admit(ctx, be.admitter, request(place))
				if err != nil {
					errs <- err
					return
				}
				from := time.Now()
				time.Sleep(svc/2 + rand.N(svc))
				to := time.Now()
				if _, err := be.admitter.Finish(ctx, t, core.Settlement{Kind: core.SettleEstimate}, core.OutcomeSuccess); err != nil {
					errs <- err
					return
				}
				r.record(place.Priority, from.Sub(start), from, to)
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// admit admits req as the engine does: it waits when queued and admits
// again when woken. An Admitter that does not queue refuses instead: the
// caller then polls, after the refusal's RetryAfter or 500 µs.
func admit(ctx context.Context, a core.Admitter, req core.AdmitRequest) (core.Ticket, error) {
	for {
		t, err := a.Admit(ctx, req)
		switch {
		case err != nil:
			return t, err
		case t.Admitted():
			return t, nil
		case t.Queued == nil:
			time.Sleep(maxDuration(t.Grant.RetryAfter, 500*time.Microsecond))
			continue
		}
		req.Permit.Waiter = t.Queued
		ev, err := t.Queued.Wait(ctx)
		if err != nil {
			return core.Ticket{}, err
		}
		switch ev.Kind {
		case core.WaitClaimed:
			req.Permit.Source = ev.Source
		case core.WaitLapsed:
			req.Permit.Waiter = nil
		}
	}
}

func maxDuration(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// hold takes every slot of the gate; the release func frees them.
func hold(ctx context.Context, b *testing.B, be backend) func() {
	ts := make([]core.Ticket, 0, slots)
	for range slots {
		t, err := be.admitter.Admit(ctx, request(core.Place{}))
		if err != nil || !t.Admitted() {
			b.Fatalf("hold: %+v %v", t, err)
		}
		ts = append(ts, t)
	}
	return func() {
		for _, t := range ts {
			if _, err := be.admitter.Finish(ctx, t, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// idle counts the commands that run while idleWaiters calls wait and
// nothing frees, per waiter-second; then lets them through.
func idle(ctx context.Context, b *testing.B, be backend) float64 {
	release := hold(ctx, b, be)
	var wg sync.WaitGroup
	for i := range idleWaiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t, err := admit(ctx, be.admitter, request(core.Place{Tenant: tenants[i%len(tenants)]}))
			if err == nil {
				_, err = be.admitter.Finish(ctx, t, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess)
			}
			if err != nil {
				b.Error(err)
			}
		}()
	}
	for {
		n, err := be.depth(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if n == idleWaiters {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	s0, c0 := be.commands()
	const span = time.Second
	time.Sleep(span)
	s1, c1 := be.commands()
	release()
	wg.Wait()
	return float64(s1-s0+c1-c0) / (idleWaiters * span.Seconds())
}

// waiterMemory measures the heap that memWaiters waiting calls take in
// their process (ok=false: the Admitter does not queue).
func waiterMemory(ctx context.Context, b *testing.B, be backend) (float64, bool) {
	release := hold(ctx, b, be)
	defer release()
	ws := make([]core.Waiter, 0, memWaiters)
	defer func() {
		for _, w := range ws {
			w.Leave(ctx)
		}
	}()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range memWaiters {
		t, err := be.admitter.Admit(ctx, request(core.Place{Priority: core.Priority(i % 3), Tenant: tenants[i%len(tenants)]}))
		if err != nil {
			b.Fatal(err)
		}
		if t.Queued == nil {
			return 0, false
		}
		ws = append(ws, t.Queued)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	return float64(after.HeapAlloc-before.HeapAlloc) / memWaiters, true
}

var cmdstatRE = regexp.MustCompile(`(?m)^cmdstat_([a-z_|]+):calls=(\d+)`)

// commandStats returns the scripts the server ran and the commands run
// inside them (or by the clients besides), INFO aside.
func commandStats(b *testing.B, c *redis.Client) (scripts, inside int) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range cmdstatRE.FindAllStringSubmatch(info, -1) {
		n, _ := strconv.Atoi(m[2])
		switch {
		case strings.HasPrefix(m[1], "eval"):
			scripts += n
		case m[1] != "info" && m[1] != "ssubscribe" && m[1] != "ping":
			inside += n
		}
	}
	return scripts, inside
}

// startRedis starts a redis-server of the benchmark's own on a spare
// loopback port (so that INFO counts only its commands), stopped when the
// benchmark ends; without the binary the benchmark skips.
func startRedis(b *testing.B) string {
	if _, err := exec.LookPath("redis-server"); err != nil {
		b.Skip("redis-server is not on PATH: the Redis arm needs a server of its own")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", b.TempDir(), "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return addr
		} else if time.Now().After(deadline) {
			b.Fatalf("redis-server on %s does not answer: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
