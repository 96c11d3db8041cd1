package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// These tests stand two clients assembled by FromEnv on one REDIS_URL in
// for two processes: the Redis Admitter they assemble queues, so a call
// of either waits in the scope's one line. Each test has a scope of its
// own. They assert by the order in which calls reach the upstream.

// queueSetup is one test's scope, its two clients and its upstream.
type queueSetup struct {
	scope  string
	srv    *fakeupstream.Server
	c1, c2 *polygateway.GatewayClient
	adm    *redisstore.Admitter // reads the scope's queue depth
}

// newQueueSetup configures a scope whose one source allows maxConc
// requests at once and answers after latency; kv are more scope keys.
func newQueueSetup(t *testing.T, maxConc int, latency time.Duration, kv ...string) *queueSetup {
	t.Helper()
	tg := target{name: "single", url: redisURL(), client: newClient(t)}
	s := &queueSetup{scope: testScope(t, tg)}
	s.srv = fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(latency)))
	env := newGWEnv(s.scope, tg.url, s.srv).set("FAKE__1__MAX_CONCURRENCY", fmt.Sprint(maxConc)).set(kv...)
	s.c1, s.c2 = env.client(t), env.client(t)
	s.adm = redisstore.NewAdmitter(redisstore.NewLimiter(tg.client), redisstore.NewBreaker(tg.client))
	t.Cleanup(func() { _ = s.adm.Close() })
	return s
}

// waitDepth waits until the scope's line holds at least n calls of class
// p, failing the test when it does not within 20 s.
func (s *queueSetup) waitDepth(t *testing.T, p core.Priority, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := s.adm.Depth(t.Context(), s.scope, "")
		if err != nil {
			t.Fatal(err)
		}
		if d[p] >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line holds %v, want %d of class %v", d, n, p)
		}
		<-time.After(5 * time.Millisecond)
	}
}

// arrivedWhenInLine returns how many calls had reached the upstream when
// the line was first seen to hold a call of class p (or the call tagged
// tag had already arrived), failing the test when neither happens in 20 s.
func (s *queueSetup) arrivedWhenInLine(t *testing.T, p core.Priority, tag string) int {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		d, err := s.adm.Depth(t.Context(), s.scope, "")
		if err != nil {
			t.Fatal(err)
		}
		got := s.arrivals()
		if d[p] > 0 || slices.Contains(got, tag) {
			return len(got)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no call of class %v in line and %s not arrived", p, tag)
		}
		<-time.After(time.Millisecond)
	}
}

// arrivals returns the tags (the prompts' "tag:…" words) of the requests
// that reached the upstream, in arrival order.
func (s *queueSetup) arrivals() []string {
	var out []string
	for _, a := range s.srv.Attempts() {
		body := string(a.Body)
		i := strings.Index(body, "tag:")
		if i < 0 {
			continue
		}
		end := strings.IndexAny(body[i:], "\" ")
		if end < 0 {
			end = len(body) - i
		}
		out = append(out, body[i+4:i+end])
	}
	return out
}

// call runs one chat call tagged tag, reporting its error on errs.
func call(ctx context.Context, wg *sync.WaitGroup, c *polygateway.GatewayClient, tag string, errs chan<- error, opts ...polygateway.CallOption) {
	wg.Go(func() {
		if _, err := c.Chat(ctx, []polygateway.Message{polygateway.User("tag:" + tag)}, opts...); err != nil {
			errs <- fmt.Errorf("%s: %w", tag, err)
		}
	})
}

// TestRedisQueueInteractiveOvertakesBatchOfAnotherProcess: 20 batch
// calls of one client wait on MAX_CONCURRENCY=2, shared through Redis;
// an interactive call of the other client is among the next 2 to reach
// the upstream (only calls already handed a slot go before it).
func TestRedisQueueInteractiveOvertakesBatchOfAnotherProcess(t *testing.T) {
	t.Parallel()
	s := newQueueSetup(t, 2, 50*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 21)
	for i := range 20 {
		call(ctx, &wg, s.c1, fmt.Sprintf("batch%02d", i), errs,
			polygateway.WithPriority(polygateway.PriorityBatch), polygateway.WithTenant("bulk"))
	}
	s.waitDepth(t, core.PriorityBatch, 14)
	call(ctx, &wg, s.c2, "interactive", errs, polygateway.WithPriority(polygateway.PriorityInteractive))
	// Count from when the interactive call is in line, not from when it
	// was made: the batch calls reaching the upstream while it travels
	// through the client to the queue are no measure of the queue.
	before := s.arrivedWhenInLine(t, core.PriorityInteractive, "interactive")
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := s.arrivals()
	at := slices.Index(got, "interactive")
	if len(got) != 21 || at < 0 {
		t.Fatalf("the upstream saw %d calls (interactive at %d), want 21", len(got), at)
	}
	t.Logf("the interactive call arrived %d calls after it was in line (of 21: %v)", at-before, got)
	if ahead := at - before; ahead > 2 {
		t.Fatalf("%d batch calls reached the upstream after the interactive call was in line and before it, want at most 2", ahead)
	}
}

// TestRedisQueueTenantsTakeTurns: three tenants of one class wait with
// 12, 6 and 2 calls, made through two clients in that order, on
// MAX_CONCURRENCY=1: they are served in turn, not in arrival order, so
// the small tenants are done long before the large one.
func TestRedisQueueTenantsTakeTurns(t *testing.T) {
	t.Parallel()
	s := newQueueSetup(t, 1, 60*time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	groups := []struct {
		tenant string
		n      int
		c      *polygateway.GatewayClient
	}{{"big", 12, s.c1}, {"mid", 6, s.c2}, {"small", 2, s.c1}}
	queued := 0
	for _, g := range groups {
		for i := range g.n {
			call(ctx, &wg, g.c, fmt.Sprintf("%s%02d", g.tenant, i), errs, polygateway.WithTenant(g.tenant))
		}
		// Wait until the group is in line, behind the ones before it.
		queued += g.n
		s.waitDepth(t, core.PriorityNormal, queued-len(s.arrivals())-2)
	}
	before := len(s.arrivals())
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := s.arrivals()
	if len(got) != 20 {
		t.Fatalf("the upstream saw %d calls, want 20", len(got))
	}
	last := func(tenant string) int {
		at := -1
		for i, tag := range got {
			if strings.HasPrefix(tag, tenant) {
				at = i
			}
		}
		return at - before
	}
	t.Logf("order after all were in line (from %d): %v", before, got)
	// In turn from there: small's 2 within the first 2 rounds of 3, mid's
	// 6 within 6 rounds, give or take the 2 calls handed a slot before.
	if at := last("small"); at > 8 {
		t.Errorf("small's last call arrived %d calls after all were in line, want within 8 (in turn)", at)
	}
	if at := last("mid"); at > 14 {
		t.Errorf("mid's last call arrived %d calls after all were in line, want within 14 (in turn)", at)
	}
}

// TestRedisQueueCancelledWaiterFreesItsPlace: a waiter of one client is
// cancelled; its place leaves the line at once (Depth), and the slot that
// frees next goes to the other client's waiter behind it, not to a claim
// reserved for the gone waiter: with a claim TTL of 60 s, a slot reserved
// for it would hold the next waiter past its 20 s deadline.
func TestRedisQueueCancelledWaiterFreesItsPlace(t *testing.T) {
	t.Parallel()
	s := newQueueSetup(t, 1, time.Second, "BACKPRESSURE__QUEUE_CLAIM_TTL_S", "60")
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	call(ctx, &wg, s.c1, "first", errs)
	for len(s.arrivals()) == 0 {
		<-time.After(5 * time.Millisecond)
	}
	gctx, gone := context.WithCancel(ctx)
	gerr := make(chan error, 1)
	var gwg sync.WaitGroup
	call(gctx, &gwg, s.c2, "gone", gerr)
	s.waitDepth(t, core.PriorityNormal, 1)
	call(ctx, &wg, s.c1, "next", errs)
	s.waitDepth(t, core.PriorityNormal, 2)
	gone()
	gwg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := s.adm.Depth(ctx, s.scope, "")
		if err != nil {
			t.Fatal(err)
		}
		if d[core.PriorityNormal] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the line holds %v after the waiter was cancelled, want 1 normal call", d)
		}
		<-time.After(5 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := s.arrivals(); !slices.Equal(got, []string{"first", "next"}) {
		t.Fatalf("the upstream saw %v, want first then next", got)
	}
}

// TestRedisQueueKeepsTheUpstreamBusy: 30 callers of two clients on
// MAX_CONCURRENCY=4, 100 ms a call: the upstream never sees more than 4
// at once, every call succeeds, and the slots are used — the
// utilization (service time over 4 slots times the span) is logged.
func TestRedisQueueKeepsTheUpstreamBusy(t *testing.T) {
	t.Parallel()
	const latency = 100 * time.Millisecond
	s := newQueueSetup(t, 4, latency)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 30)
	for i := range 30 {
		c := s.c1
		if i%2 == 1 {
			c = s.c2
		}
		call(ctx, &wg, c, fmt.Sprintf("load%02d", i), errs)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	at := s.srv.Arrivals()
	if len(at) != 30 {
		t.Fatalf("the upstream saw %d calls, want 30", len(at))
	}
	if m := s.srv.MaxInFlight(); m > 4 {
		t.Fatalf("the upstream saw %d calls at once, want at most 4", m)
	}
	first, end := at[0], at[0]
	for _, a := range at {
		if a.Before(first) {
			first = a
		}
		if e := a.Add(latency); e.After(end) {
			end = e
		}
	}
	span := end.Sub(first)
	util := float64(30*latency) / float64(4*span)
	t.Logf("30 calls of %v on 4 slots took %v from the first arrival: utilization %.1f%% (ideal span %v), max in flight %d",
		latency, span.Round(time.Millisecond), 100*util, 30*latency/4, s.srv.MaxInFlight())
}
