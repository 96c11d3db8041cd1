package redisstore_test

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// privateClient returns a client of the private server with the hooks.
func privateClient(t *testing.T, rs *privateRedis, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	for _, h := range hooks {
		c.AddHook(h)
	}
	return c
}

// TestScriptFallback: on a server that has never seen the scripts the first
// call costs EVALSHA, NOSCRIPT, EVAL; every later one a single EVALSHA.
func TestScriptFallback(t *testing.T) {
	rs := startPrivateRedis(t)
	log := &cmdLog{}
	c := privateClient(t, rs, log)
	l := redisstore.NewLimiter(c)
	req := core.PermitRequest{Scope: "FB", Source: "a", SourceLimits: core.Limits{RPM: 10}, LeaseTTL: time.Minute}
	for i, want := range [][]string{{"evalsha", "eval"}, {"evalsha"}} {
		if g, err := l.TryAcquire(t.Context(), req); err != nil || !g.OK {
			t.Fatalf("TryAcquire = %+v, %v", g, err)
		}
		if got := log.take(); !equal(got, want...) {
			t.Fatalf("call %d sent %v, want %v", i+1, got, want)
		}
	}
}

// TestRoundTripsPerGovernedCall counts the Redis round trips of governed
// calls with the Redis limiter and breaker: with a go-redis hook, split at
// the moment the request reaches the upstream, and cross-checked with the
// server's INFO commandstats.
func TestRoundTripsPerGovernedCall(t *testing.T) {
	rs := startPrivateRedis(t)
	log := &cmdLog{}
	c := privateClient(t, rs, log)
	var before, tripsBefore atomic.Int64
	srv := fakeupstream.NewServer(t, fakeupstream.WithFunc(func(fakeupstream.RequestInfo) fakeupstream.Behavior {
		before.Store(int64(len(log.snapshot())))
		tripsBefore.Store(int64(log.roundTrips()))
		return fakeupstream.OK()
	}))
	env := newGWEnv("RT", rs.URL(), srv).set("FAKE__1__RPM", "1000", "FAKE__1__TPM", "1000000",
		"FAKE__1__EST_TOKENS", "100", "FAKE__1__MAX_CONCURRENCY", "10", "GLOBAL__RPM", "1000")
	lim, br := redisstore.NewLimiter(c), redisstore.NewBreaker(c)
	gw, err := polygateway.FromEnv("RT", polygateway.WithEnv(env.m), polygateway.WithLimiter(lim),
		polygateway.WithBreaker(br), polygateway.WithAdmitter(redisstore.NewAdmitter(lim, br)))
	if err != nil {
		t.Fatal(err)
	}
	defer gw.Close()
	if _, err := chat(gw, "warm up"); err != nil { // loads the scripts
		t.Fatal(err)
	}
	evalsBefore := commandCalls(t, c, "evalsha") + commandCalls(t, c, "eval")
	log.take()

	const calls = 20
	maxBefore, maxAfter, total := 0, 0, 0
	for range calls {
		start := log.roundTrips()
		if _, err := chat(gw, "count me"); err != nil {
			t.Fatal(err)
		}
		cmds := log.take()
		b := int(tripsBefore.Load()) - start
		maxBefore, maxAfter = max(maxBefore, b), max(maxAfter, log.roundTrips()-int(tripsBefore.Load()))
		total += len(cmds)
		for _, name := range cmds {
			if strings.TrimPrefix(name, "pipeline:") != "evalsha" {
				t.Fatalf("a governed call sent %v, want only evalsha", cmds)
			}
		}
	}
	server := commandCalls(t, c, "evalsha") + commandCalls(t, c, "eval") - evalsBefore
	t.Logf("per governed call: %d round trips before the upstream call, %d after; %d scripts in %d calls (server counted %d)",
		maxBefore, maxAfter, total, calls, server)
	if maxBefore > 1 {
		t.Errorf("%d round trips before the upstream call, want 1 (breaker and six gates in one script)", maxBefore)
	}
	if maxAfter > 1 {
		t.Errorf("%d round trips after the upstream call, want at most 1 (release and record pipelined)", maxAfter)
	}
	if server != total {
		t.Errorf("the server counted %d script calls, the hook %d", server, total)
	}
}

// snapshot returns the commands recorded so far without taking them.
func (l *cmdLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

var cmdstatRE = regexp.MustCompile(`(?m)^cmdstat_([a-z_|]+):calls=(\d+)`)

// commandCalls returns the server's call count of command from INFO commandstats.
func commandCalls(t *testing.T, c *redis.Client, command string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range cmdstatRE.FindAllStringSubmatch(info, -1) {
		if m[1] == command {
			n, _ := strconv.Atoi(m[2])
			return n
		}
	}
	return 0
}
