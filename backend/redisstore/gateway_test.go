package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	_ "github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// These tests stand two GatewayClients in for two processes: they share
// nothing but Redis, the single node or the local Redis Cluster (through
// REDIS_URL either way). Each test has a scope of its own, so they never
// see each other's keys, and deletes the scope's keys when it ends.

// gwEnv is a client configuration under construction.
type gwEnv struct {
	scope string
	m     map[string]string
}

// newGWEnv configures scope with redis limiter and breaker on url, no cache,
// no telemetry, fast retries, and one source "fake_1" on srv.
func newGWEnv(scope, url string, srv *fakeupstream.Server) *gwEnv {
	e := &gwEnv{scope: scope, m: map[string]string{
		"PGW_LIMITER_BACKEND": "redis", "PGW_BREAKER_BACKEND": "redis",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"REDIS_URL": url,
	}}
	return e.set(
		"RETRY__BACKOFF_BASE_S", "0.05", "RETRY__BACKOFF_MAX_S", "0.2",
		"BACKPRESSURE__POLL_INTERVAL_S", "0.02",
		"FAKE__1__BASE_URL", srv.URL(), "FAKE__1__API_KEY", "sk-test-secret",
		"FAKE__1__MODEL", "fake-model", "FAKE__1__TIMEOUT_S", "5",
	)
}

// set sets scope keys (the scope prefix is added).
func (e *gwEnv) set(kv ...string) *gwEnv {
	for i := 0; i+1 < len(kv); i += 2 {
		e.m[e.scope+"__"+kv[i]] = kv[i+1]
	}
	return e
}

// setRaw sets keys as given.
func (e *gwEnv) setRaw(kv ...string) *gwEnv {
	for i := 0; i+1 < len(kv); i += 2 {
		e.m[kv[i]] = kv[i+1]
	}
	return e
}

// client assembles a client and closes it when the test ends.
func (e *gwEnv) client(t testing.TB) *polygateway.GatewayClient {
	t.Helper()
	c, err := polygateway.FromEnv(e.scope, polygateway.WithEnv(e.m))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testScope returns a scope name of the test's own and deletes its keys
// (under the default prefix) from tg when the test ends.
func testScope(t *testing.T, tg target) string {
	t.Helper()
	scope := "T" + upper(randomID(5))
	t.Cleanup(func() { deleteKeys(t, tg.client, "pgw:*:{"+scope+"}*") })
	return scope
}

// chat makes one call with prompt.
func chat(c *polygateway.GatewayClient, prompt string) (*polygateway.LLMResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return c.Chat(ctx, []polygateway.Message{polygateway.User(prompt)})
}

// sourceState returns the breaker snapshot c reports for fake_1.
func sourceState(t *testing.T, c *polygateway.GatewayClient) polygateway.SourceStatus {
	t.Helper()
	for _, s := range c.Sources(t.Context()) {
		if s.Name == "fake_1" {
			if s.Err != nil {
				t.Fatalf("Sources: %v", s.Err)
			}
			return s
		}
	}
	t.Fatal("Sources does not report fake_1")
	return polygateway.SourceStatus{}
}

// TestSharedRPM: two clients hammer one source with RPM=30. The real Lua
// window is 60 s; within the few seconds of hammering at most 30 requests
// may reach the upstream, and with fail_fast the excess callers are refused
// with GatewayUnavailableError.
func TestSharedRPM(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		srv := fakeupstream.NewServer(t)
		env := newGWEnv(scope, tg.url, srv).set("FAKE__1__RPM", "30", "QUOTA_FULL", "fail_fast")
		clients := []*polygateway.GatewayClient{env.client(t), env.client(t)}

		var ok, refused [2]atomic.Int64
		var other atomic.Value
		stop := time.Now().Add(3 * time.Second)
		var wg sync.WaitGroup
		for i, c := range clients {
			for range 6 {
				wg.Go(func() {
					for n := 0; time.Now().Before(stop); n++ {
						_, err := chat(c, fmt.Sprintf("hello %d", n))
						var ue *polygateway.GatewayUnavailableError
						switch {
						case err == nil:
							ok[i].Add(1)
						case errors.As(err, &ue) && ue.Reason == core.ReasonRateLimited:
							refused[i].Add(1)
							time.Sleep(5 * time.Millisecond)
						default:
							other.Store(err)
							return
						}
					}
				})
			}
		}
		wg.Wait()
		if err := other.Load(); err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		got := srv.Requests()
		t.Logf("upstream saw %d requests; client A %d ok / %d refused, client B %d ok / %d refused",
			got, ok[0].Load(), refused[0].Load(), ok[1].Load(), refused[1].Load())
		if got > 30 {
			t.Fatalf("the upstream saw %d requests in one RPM window, want at most 30", got)
		}
		if total := ok[0].Load() + ok[1].Load(); total != int64(got) || got != 30 {
			t.Fatalf("%d calls succeeded and the upstream saw %d requests; want the full quota of 30", total, got)
		}
		if refused[0].Load() == 0 || refused[1].Load() == 0 {
			t.Fatalf("refusals A %d, B %d: want both clients refused once the shared quota was spent",
				refused[0].Load(), refused[1].Load())
		}
		if u := sourceState(t, clients[1]).Usage; u.Requests != 30 || u.InFlight != 0 {
			t.Fatalf("usage %+v, want 30 requests in the window and nothing in flight", u)
		}
	})
}

// TestSharedConcurrency: MAX_CONCURRENCY=3 across two clients and a slow
// upstream: the upstream never sees more than 3 requests at once, and both
// clients make progress (they wait for slots: QUOTA_FULL=wait).
func TestSharedConcurrency(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		srv := fakeupstream.NewServer(t)
		up := startGuardedUpstream(t, 60*time.Millisecond)
		env := newGWEnv(scope, tg.url, srv).set("FAKE__1__MAX_CONCURRENCY", "3", "FAKE__1__BASE_URL", up.base(0))
		clients := []*polygateway.GatewayClient{env.client(t), env.client(t)}

		var ok [2]atomic.Int64
		errs := make(chan error, 100)
		var wg sync.WaitGroup
		for i, c := range clients {
			for g := range 6 {
				wg.Go(func() {
					for n := range 3 {
						if _, err := chat(c, fmt.Sprintf("slow %d %d", g, n)); err != nil {
							errs <- err
							return
						}
						ok[i].Add(1)
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("call failed: %v", err)
		}
		m, _ := up.peaks()
		t.Logf("max in flight %d; client A %d calls, client B %d calls", m, ok[0].Load(), ok[1].Load())
		if m > 3 || m < 1 {
			t.Fatalf("the upstream saw %d requests at once, want at most 3", m)
		}
		if ok[0].Load() != 18 || ok[1].Load() != 18 {
			t.Fatalf("client A made %d calls, B %d; want 18 each", ok[0].Load(), ok[1].Load())
		}
		if u := sourceState(t, clients[0]).Usage; u.InFlight != 0 {
			t.Fatalf("usage %+v after the storm, want nothing in flight", u)
		}
	})
}

// TestSharedBreaker: a breaker opened by client A (a dead key) is open for
// client B at once; after the cooldown exactly one probe reaches the
// upstream however many callers of both clients race for it.
func TestSharedBreaker(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		var healthy atomic.Bool
		srv := fakeupstream.NewServer(t, fakeupstream.WithFunc(func(fakeupstream.RequestInfo) fakeupstream.Behavior {
			if healthy.Load() {
				return fakeupstream.OK().WithLatency(time.Second) // the probe is held while the others race
			}
			return fakeupstream.BadKey()
		}))
		env := newGWEnv(scope, tg.url, srv).set("BREAKER__COOLDOWN_S", "1", "BREAKER__MAX_COOLDOWN_S", "2")
		a, b := env.client(t), env.client(t)

		if _, err := chat(a, "hello"); err == nil {
			t.Fatal("A's call to a dead key succeeded")
		}
		if n := srv.Requests(); n != 1 {
			t.Fatalf("the upstream saw %d requests, want 1 (a dead source is not retried)", n)
		}
		st := sourceState(t, b)
		if st.Breaker.State != core.StateOpen {
			t.Fatalf("B sees the breaker %v, want open", st.Breaker.State)
		}
		_, err := chat(b, "hello")
		if !errors.Is(err, polygateway.ErrCircuitOpen) {
			t.Fatalf("B's call: %v, want the circuit open", err)
		}
		if n := srv.Requests(); n != 1 {
			t.Fatalf("B's call reached the upstream (%d requests)", n)
		}

		healthy.Store(true)
		deadline := time.Now().Add(5 * time.Second)
		for sourceState(t, b).Breaker.State != core.StateHalfOpen {
			if time.Now().After(deadline) {
				t.Fatal("the breaker did not become half-open after its cooldown")
			}
			time.Sleep(20 * time.Millisecond)
		}
		start := make(chan struct{})
		var succeeded, circuitOpen atomic.Int64
		var wg sync.WaitGroup
		for i := range 20 {
			c := []*polygateway.GatewayClient{a, b}[i%2]
			wg.Go(func() {
				<-start
				_, err := chat(c, "probe?")
				switch {
				case err == nil:
					succeeded.Add(1)
				case errors.Is(err, polygateway.ErrCircuitOpen):
					circuitOpen.Add(1)
				default:
					t.Errorf("racing call: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := srv.Requests(); n != 2 || succeeded.Load() != 1 || circuitOpen.Load() != 19 {
			t.Fatalf("after the race the upstream saw %d requests (want 2: the dead one and one probe); "+
				"%d calls succeeded (want 1), %d were refused (want 19)", n, succeeded.Load(), circuitOpen.Load())
		}
		for _, c := range []*polygateway.GatewayClient{a, b} {
			if s := sourceState(t, c).Breaker; s.State.String() != "closed" || s.Opens != 1 {
				t.Fatalf("after the probe's success the breaker is %+v, want closed after one open", s)
			}
		}
	})
}

// TestRedisDown: with Redis stopped mid-run, limiter and breaker calls fail
// with GovernanceBackendError and nothing reaches the upstream, while a
// client that uses Redis only as its cache keeps answering. Once Redis is
// back the same clients recover.
func TestRedisDown(t *testing.T) {
	rs := startPrivateRedis(t)
	scope := "T" + upper(randomID(5))
	guarded := fakeupstream.NewServer(t)
	cached := fakeupstream.NewServer(t)
	g := newGWEnv(scope, rs.URL(), guarded).client(t)
	c := newGWEnv(scope, rs.URL(), cached).setRaw(
		"PGW_LIMITER_BACKEND", "memory", "PGW_BREAKER_BACKEND", "memory",
		"PGW_CACHE_BACKEND", "redis", "PGW_CACHE_NAMESPACE", "test", "PGW_CACHE_TTL_S", "60",
	).client(t)

	if _, err := chat(g, "before"); err != nil {
		t.Fatalf("guarded call with Redis up: %v", err)
	}
	if _, err := chat(c, "before"); err != nil {
		t.Fatalf("cached call with Redis up: %v", err)
	}
	if r, err := chat(c, "before"); err != nil || !r.CacheHit {
		t.Fatalf("second cached call = %+v, %v; want a cache hit", r, err)
	}
	if n := cached.Requests(); n != 1 {
		t.Fatalf("cached upstream saw %d requests, want 1", n)
	}

	rs.stop()
	seen := guarded.Requests()
	for i := range 3 {
		_, err := chat(g, fmt.Sprintf("down %d", i))
		var be *polygateway.GovernanceBackendError
		if !errors.As(err, &be) {
			t.Fatalf("guarded call with Redis down: %v; want GovernanceBackendError", err)
		}
		if !errors.Is(err, polygateway.ErrGateway) {
			t.Fatalf("%v does not match ErrGateway", err)
		}
	}
	if n := guarded.Requests(); n != seen {
		t.Fatalf("the guarded upstream saw %d requests with Redis down, want none", n-seen)
	}
	st := sourceState2(g)
	if st.Err == nil {
		t.Fatal("Sources reports no backend error with Redis down")
	}
	for i := range 2 {
		r, err := chat(c, "before")
		if err != nil || r.CacheHit {
			t.Fatalf("cached call %d with Redis down = %+v, %v; want an answer from the upstream", i, r, err)
		}
	}
	if n := cached.Requests(); n != 3 {
		t.Fatalf("cached upstream saw %d requests, want 3", n)
	}

	rs.start()
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := chat(g, "after")
		if err == nil {
			break
		}
		var be *polygateway.GovernanceBackendError
		if !errors.As(err, &be) {
			t.Fatalf("guarded call after the restart: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the guarded client did not recover after Redis came back: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := guarded.Requests(); n != seen+1 {
		t.Fatalf("the guarded upstream saw %d requests after recovery, want 1", n-seen)
	}
	if _, err := chat(c, "after"); err != nil {
		t.Fatalf("cached call after the restart: %v", err)
	}
	if r, err := chat(c, "after"); err != nil || !r.CacheHit {
		t.Fatalf("cached call after the restart = %+v, %v; want the cache working again", r, err)
	}
}

// sourceState2 is sourceState without failing on a backend error.
func sourceState2(c *polygateway.GatewayClient) polygateway.SourceStatus {
	for _, s := range c.Sources(context.Background()) {
		if s.Name == "fake_1" {
			return s
		}
	}
	return polygateway.SourceStatus{}
}

// TestSharedPool: two scopes name one pool (GLOBAL__POOL) and each has
// GLOBAL__MAX_CONCURRENCY=2, in two clients: the upstream never sees more
// than 2 of their requests at once, and both scopes make progress.
func TestSharedPool(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		pool := "P" + upper(randomID(5))
		t.Cleanup(func() { deleteKeys(t, tg.client, "pgw:pool:{"+pool+"}*") })
		srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(40*time.Millisecond)))
		var clients []*polygateway.GatewayClient
		for _, scope := range []string{"T" + upper(randomID(5)), "T" + upper(randomID(5))} {
			env := newGWEnv(scope, tg.url, srv).set("GLOBAL__MAX_CONCURRENCY", "2", "GLOBAL__POOL", pool)
			clients = append(clients, env.client(t))
		}
		var wg sync.WaitGroup
		errs := make(chan error, 40)
		var ok [2]atomic.Int64
		for i, c := range clients {
			for g := range 4 {
				wg.Go(func() {
					for n := range 3 {
						if _, err := chat(c, fmt.Sprintf("pool %d %d", g, n)); err != nil {
							errs <- err
							return
						}
						ok[i].Add(1)
					}
				})
			}
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("call failed: %v", err)
		}
		t.Logf("max in flight %d; scope A %d calls, scope B %d calls", srv.MaxInFlight(), ok[0].Load(), ok[1].Load())
		if m := srv.MaxInFlight(); m > 2 {
			t.Fatalf("the upstream saw %d requests of the pool at once, want at most 2", m)
		}
		if ok[0].Load() != 12 || ok[1].Load() != 12 {
			t.Fatalf("scope A made %d calls, B %d; want 12 each", ok[0].Load(), ok[1].Load())
		}
		if n := countKeys(t, tg.client, "pgw:pool:{"+pool+"}*"); n == 0 {
			t.Fatal("no key under the pool's hash tag")
		}
	})
}
