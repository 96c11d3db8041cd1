package redisstore

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

// TestReclaimBeforeALateAdmitLeavesNoSlot: a reclaim that reaches Redis
// before its Admit (a command delayed on a dying connection) leaves a
// tombstone, so that the late Admit takes no slot; the tombstone is in the
// past, so it blocks no one else and goes with the next purge.
func TestReclaimBeforeALateAdmitLeavesNoSlot(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b)
	defer a.Close()
	two := core.Limits{MaxConcurrency: 2}
	req := core.AdmitRequest{Permit: core.PermitRequest{Scope: "Z", Source: "a", SourceLimits: two, GlobalLimits: two, LeaseTTL: time.Hour}}
	// Someone holds a slot, so the slots keys exist.
	if t0, err := a.Admit(ctx, req); err != nil || !t0.Admitted() {
		t.Fatalf("Admit = %+v, %v", t0, err)
	}
	lease := newLease(&req.Permit)
	j := &reclaim{permit: core.Permit{Scope: "Z", Source: "a", Lease: lease}, settle: core.Settlement{Kind: core.SettleRefund}, probe: true}
	if err := a.reclaim(ctx, j); err != nil {
		t.Fatal(err)
	}
	// The late Admit of that lease: nobody hears it, and it holds nothing.
	if res := rawAdmit(t, a, req, lease); res[allowReply] != 0 {
		t.Fatalf("the late Admit was granted: %v", res)
	}
	for _, source := range []string{"a", ""} {
		if u, err := l.Usage(ctx, "Z", source); err != nil || u.InFlight != 1 {
			t.Fatalf("Usage(%q) = %+v, %v; want only the first slot held", source, u, err)
		}
	}
	if t2, err := a.Admit(ctx, req); err != nil || !t2.Admitted() {
		t.Fatalf("Admit after the tombstone = %+v, %v; want the second slot", t2, err)
	}
}

// TestTombstonesDoNotOutstayTheirUse: a tombstone stands 15 minutes; a
// reclaim after that drops it from the book, so a busy level's book does
// not keep the tombstones of every outage.
func TestTombstonesDoNotOutstayTheirUse(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	clk := &stepClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, b := NewLimiter(c, WithPrefix(prefix), WithClock(clk)), NewBreaker(c, WithPrefix(prefix), WithClock(clk))
	a := NewAdmitter(l, b)
	defer a.Close()
	two := core.Limits{MaxConcurrency: 2, RPM: 100}
	req := core.AdmitRequest{Permit: core.PermitRequest{Scope: "G", Source: "a", SourceLimits: two, LeaseTTL: time.Hour}}
	if t0, err := a.Admit(ctx, req); err != nil || !t0.Admitted() { // the book exists
		t.Fatalf("Admit = %+v, %v", t0, err)
	}
	book := prefix + ":lim:{G}:src:a:tok"
	tomb := func() uint64 {
		lease := newLease(&req.Permit)
		if err := a.reclaim(ctx, &reclaim{permit: core.Permit{Scope: "G", Source: "a", Lease: lease}, settle: core.Settlement{Kind: core.SettleRefund}}); err != nil {
			t.Fatal(err)
		}
		return lease
	}
	first := tomb()
	if v, _ := c.HGet(ctx, book, strconv.FormatUint(first, 10)).Result(); v != "0 -1" {
		t.Fatalf("tombstone = %q", v)
	}
	clk.now = clk.now.Add(16 * time.Minute)
	tomb()
	if n, _ := c.HExists(ctx, book, strconv.FormatUint(first, 10)).Result(); n {
		t.Fatal("a tombstone older than 15 minutes is still in the book")
	}
	if n, _ := c.ZCard(ctx, prefix+":lim:{G}:src:a:gone").Result(); n != 1 {
		t.Fatalf("the register holds %d tombstones, want the new one", n)
	}
}

// stepClock is a clock the test sets.
type stepClock struct{ now time.Time }

func (s *stepClock) Now() time.Time                      { return s.now }
func (s *stepClock) NewTimer(d time.Duration) core.Timer { return core.SystemClock{}.NewTimer(d) }
func (s *stepClock) AfterFunc(d time.Duration, f func()) core.Timer {
	return core.SystemClock{}.AfterFunc(d, f)
}

// TestRetriedScriptsCountOnce: go-redis sends a command again when its
// connection failed, though the first may have run. A retried Admit is
// granted as the first was (its slot and probe are its own), and a retried
// Finish does not count its outcome twice.
func TestRetriedScriptsCountOnce(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b)
	defer a.Close()
	one := core.Limits{MaxConcurrency: 1, RPM: 10}
	cfg := core.BreakerConfig{FailThreshold: 2, Cooldown: time.Hour, MaxCooldown: time.Hour, ProbeTTL: time.Hour, HalfOpenSuccesses: 1, TimeoutWeight: 1}
	req := core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: "R", Source: "a", SourceLimits: one, LeaseTTL: time.Hour}}
	lease := newLease(&req.Permit)
	for i := range 2 {
		if res := rawAdmit(t, a, req, lease); res[0] != 1 || res[allowReply] != 1 {
			t.Fatalf("Admit %d of one lease = %v, want granted", i+1, res)
		}
	}
	if u, _ := l.Usage(ctx, "R", "a"); u.InFlight != 1 {
		t.Fatalf("usage %+v, want one slot", u)
	}
	// Finish with a failure, sent twice: one failure counted.
	tk := core.Ticket{Admission: core.Admission{Allowed: true}, Grant: core.Grant{OK: true, Permit: core.Permit{Scope: "R", Source: "a", Lease: lease}}, Breaker: cfg}
	for range 2 {
		if _, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleRefund}, core.OutcomeFailure); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ := b.Snapshot(ctx, "R", "a", cfg); s.ConsecutiveFailures != 1 || s.State != core.StateClosed {
		t.Fatalf("snapshot %+v, want one failure counted (threshold 2: still closed)", s)
	}
}

// TestARetriedAcquireCountsItsTokensOnce: an Admit or a TryAcquire that
// go-redis sends twice, the gates having room for both, counts its request
// and its tokens in the RPM and TPM windows once, so that the window admits
// what the real reservations leave room for, and the release settles the
// level to what was used.
func TestARetriedAcquireCountsItsTokensOnce(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	clk := &stepClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, b := NewLimiter(c, WithPrefix(prefix), WithClock(clk)), NewBreaker(c, WithPrefix(prefix), WithClock(clk))
	a := NewAdmitter(l, b)
	defer a.Close()
	lim := core.Limits{RPM: 10, TPM: 1000}
	for _, scope := range []string{"ADMIT", "ACQUIRE"} {
		p := core.PermitRequest{Scope: scope, Source: "a", SourceLimits: lim, GlobalLimits: lim, Tokens: 300, LeaseTTL: time.Hour}
		lease := newLease(&p)
		for i := range 2 {
			if scope == "ADMIT" {
				if res := rawAdmit(t, a, core.AdmitRequest{Permit: p}, lease); res[allowReply] != 1 {
					t.Fatalf("%s: Admit %d of one lease = %v, want granted", scope, i+1, res)
				}
				continue
			}
			sk := l.scriptKeys(scope, "a", "")
			w := newRequest()
			w.open()
			l.writeAcquire(w, &p, sk, lease, circuitIndex-1)
			w.close()
			res, err := acquireScript.Run(ctx, c, sk.keys[:circuitIndex-1], w.String()).Int64Slice()
			if err != nil || res[0] != 1 {
				t.Fatalf("%s: acquire %d of one lease = %v, %v; want granted", scope, i+1, res, err)
			}
		}
		for _, source := range []string{"a", ""} {
			if u, err := l.Usage(ctx, scope, source); err != nil || u != (core.LimiterUsage{Requests: 1, Tokens: 300}) {
				t.Fatalf("%s: Usage(%q) = %+v, %v; want 1 request of 300 tokens", scope, source, u, err)
			}
		}
		clk.now = clk.now.Add(time.Second)
		g, err := l.TryAcquire(ctx, core.PermitRequest{Scope: scope, Source: "a", SourceLimits: lim, GlobalLimits: lim, Tokens: 700, LeaseTTL: time.Hour})
		if err != nil || !g.OK {
			t.Fatalf("%s: 700 tokens next to 300 under a TPM of 1000 = %+v, %v; want granted", scope, g, err)
		}
		if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 100}); err != nil {
			t.Fatal(err)
		}
		if u, err := l.Usage(ctx, scope, "a"); err != nil || u != (core.LimiterUsage{Requests: 2, Tokens: 400}) {
			t.Fatalf("%s: Usage after the release = %+v, %v; want 2 requests of 400 tokens", scope, u, err)
		}
	}
}

// rawAdmit runs the admit script for req with a lease of the test's choice.
func rawAdmit(t *testing.T, a *Admitter, req core.AdmitRequest, lease uint64) []int64 {
	t.Helper()
	k := a.l.queueKeysOf(req.Permit.Scope, req.Permit.Pool)
	now := a.l.opt.clockOrSystem().Now()
	keys, arg := a.admitArgs(&req, lease, &admitCall{k: k, now: now, dl: now})
	res, err := admitScript.Run(context.Background(), a.l.c, keys, arg).Int64Slice()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// internalClient returns a client of the test Redis and a key prefix of
// the test's own, deleted when it ends.
func internalClient(t *testing.T) (*redis.Client, string) {
	t.Helper()
	url := os.Getenv("PGW_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	if err := c.Ping(context.Background()).Err(); err != nil {
		_ = c.Close()
		if os.Getenv("PGW_REQUIRE_SERVICES") == "1" {
			t.Fatal(err)
		}
		t.Skipf("no Redis at %s: %v", url, err)
	}
	prefix := "pgwint" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() {
		keys, _ := c.Keys(context.Background(), prefix+":*").Result()
		if len(keys) > 0 {
			c.Del(context.Background(), keys...)
		}
		_ = c.Close()
	})
	return c, prefix
}

// TestBudgetReclaimAndRetries: a reclaim that reaches Redis before its
// Admit leaves a tombstone on the budgets, so that the late Admit of a
// request with no gate reserves nothing; an Admit sent twice (a go-redis
// retry) reserves once, even where the second would not fit.
func TestBudgetReclaimAndRetries(t *testing.T) {
	t.Parallel()
	c, prefix := internalClient(t)
	ctx := context.Background()
	clk := &stepClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	l, b := NewLimiter(c, WithPrefix(prefix), WithClock(clk)), NewBreaker(c, WithPrefix(prefix), WithClock(clk))
	a := NewAdmitter(l, b)
	defer a.Close()
	bud := core.Budget{Key: "client:t", Limit: 1000, Window: time.Hour}
	req := core.AdmitRequest{Permit: core.PermitRequest{Scope: "T", Source: "a", Budgets: []core.Budget{bud}, Cost: 600, LeaseTTL: time.Hour}}
	spent := func() int64 {
		t.Helper()
		us, err := l.Budgets(ctx, "T", "", []core.Budget{bud})
		if err != nil {
			t.Fatal(err)
		}
		return us[0].Spent
	}
	// A grant makes the window's hash.
	first := newLease(&req.Permit)
	if res := rawAdmit(t, a, req, first); res[allowReply] != 1 {
		t.Fatalf("Admit = %v", res)
	}
	// Sent again: granted as before, reserved once.
	if res := rawAdmit(t, a, req, first); res[allowReply] != 1 {
		t.Fatalf("a resent Admit = %v, want its grant", res)
	}
	if s := spent(); s != 600 {
		t.Fatalf("%d spent after an Admit sent twice, want 600", s)
	}
	late := newLease(&req.Permit)
	j := &reclaim{permit: core.Permit{Scope: "T", Source: "a", Lease: late, Budgets: req.Permit.Budgets}, settle: core.Settlement{Kind: core.SettleRefund}}
	if err := a.reclaim(ctx, j); err != nil {
		t.Fatal(err)
	}
	req.Permit.Cost = 100
	if res := rawAdmit(t, a, req, late); res[allowReply] != 0 || res[allowReply+1] != 0 {
		t.Fatalf("the late Admit = %v, want refused (by no gate: no one hears it)", res)
	}
	if s := spent(); s != 600 {
		t.Fatalf("%d spent after a late Admit, want 600", s)
	}
	// The tombstone goes with its window.
	clk.now = clk.now.Add(time.Hour)
	if res := rawAdmit(t, a, req, late); res[allowReply] != 1 {
		t.Fatalf("the lease's Admit in the next window = %v, want granted", res)
	}
	if s := spent(); s != 100 {
		t.Fatalf("%d spent in the next window, want 100", s)
	}
}

// TestAResentAdmitIsAnsweredAsItsFirstRun: the client may send one Admit
// twice (its connection failed after the script ran, and it resends the
// command): the second run answers as the first did, though waiters came
// in between. One granted keeps its grant instead of queueing (its slot
// would be held by no one until its lease ended); one queued finds its
// entry instead of queueing twice.
func TestAResentAdmitIsAnsweredAsItsFirstRun(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b, WithQueue(QueueConfig{}))
	defer a.Close()
	one := core.Limits{MaxConcurrency: 1}
	req := core.AdmitRequest{Permit: core.PermitRequest{Scope: "R", Source: "a", SourceLimits: one, LeaseTTL: time.Hour}}
	granted := newLease(&req.Permit)
	if res := rawAdmit(t, a, req, granted); res[allowReply] != 1 {
		t.Fatalf("the first Admit was not granted: %v", res)
	}
	queued := newLease(&req.Permit)
	first := rawAdmit(t, a, req, queued)
	if first[allowReply+5] != statusQueued {
		t.Fatalf("the second caller was not queued: %v", first)
	}
	if res := rawAdmit(t, a, req, granted); res[allowReply] != 1 || res[allowReply+5] != statusGranted {
		t.Fatalf("the resent granted Admit = %v; want its grant", res)
	}
	again := rawAdmit(t, a, req, queued)
	if again[allowReply+5] != statusQueued || again[allowReply+6] != first[allowReply+6] {
		t.Fatalf("the resent queued Admit = %v; want the entry %d", again, first[allowReply+6])
	}
	if d, err := a.Depth(ctx, "R", ""); err != nil || d[0]+d[1]+d[2] != 1 {
		t.Fatalf("Depth = %v, %v; want the one entry", d, err)
	}
}

// TestAResentAdmitOfAWokenWaiterKeepsItsGrant: a waiter woken with a
// claim admits on it, and the client resends that Admit (its reply lost)
// while another caller is still in line: the second run, which finds the
// entry gone, answers with the grant the first made instead of queueing
// the call again while its slot stays held by no one.
func TestAResentAdmitOfAWokenWaiterKeepsItsGrant(t *testing.T) {
	c, prefix := internalClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b, WithQueue(QueueConfig{}))
	defer a.Close()
	one := core.Limits{MaxConcurrency: 1}
	req := core.AdmitRequest{Permit: core.PermitRequest{Scope: "W", Source: "a", SourceLimits: one, LeaseTTL: time.Hour}}
	hold, err := a.Admit(ctx, req)
	if err != nil || !hold.Admitted() {
		t.Fatalf("Admit = %+v, %v", hold, err)
	}
	var waiters [2]*qwaiter
	for i := range waiters {
		tk, err := a.Admit(ctx, req)
		if err != nil || tk.Queued == nil {
			t.Fatalf("waiter %d: %+v, %v", i, tk, err)
		}
		waiters[i] = tk.Queued.(*qwaiter)
	}
	if _, err := a.Finish(ctx, hold, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		t.Fatal(err)
	}
	if ev, err := waiters[0].Wait(ctx); err != nil || ev.Kind != core.WaitClaimed {
		t.Fatalf("the head was not handed the slot: %+v, %v", ev, err)
	}
	lease := newLease(&req.Permit)
	take := func() []int64 {
		k := a.l.queueKeysOf("W", "")
		now := a.l.opt.clockOrSystem().Now()
		keys, arg := a.admitArgs(&req, lease, &admitCall{k: k, w: waiters[0], now: now, dl: now})
		res, err := admitScript.Run(ctx, a.l.c, keys, arg).Int64Slice()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := take(); res[allowReply] != 1 {
		t.Fatalf("the claim's Admit = %v; want granted", res)
	}
	if res := take(); res[allowReply] != 1 || res[allowReply+5] != statusGranted {
		t.Fatalf("the resent claim's Admit = %v; want its grant", res)
	}
	if d, err := a.Depth(ctx, "W", ""); err != nil || d[0]+d[1]+d[2] != 1 {
		t.Fatalf("Depth = %v, %v; want only the other waiter", d, err)
	}
	waiters[1].Leave(ctx)
}

// TestARetriedSuccessCountsOnceInTheFailureRateWindow: a Finish reporting a
// success on a closed circuit with the failure-rate channel on, which
// go-redis sends twice (its reply lost), adds one sample to the window, not
// two: two more failures then make 3 samples, below MinCalls 4, and the
// circuit stays closed (with the success counted twice, 2 failures of 4
// samples would reach FailRate 0.5 and open it).
func TestARetriedSuccessCountsOnceInTheFailureRateWindow(t *testing.T) {
	c, prefix := internalClient(t)
	ctx := context.Background()
	l, b := NewLimiter(c, WithPrefix(prefix)), NewBreaker(c, WithPrefix(prefix))
	a := NewAdmitter(l, b)
	defer a.Close()
	cfg := core.BreakerConfig{FailRate: 0.5, MinCalls: 4, Window: time.Minute, Cooldown: time.Hour, MaxCooldown: time.Hour, HalfOpenSuccesses: 1, TimeoutWeight: 1}
	req := core.AdmitRequest{Breaker: cfg, Permit: core.PermitRequest{Scope: "W", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 5}, LeaseTTL: time.Hour}}
	call := func(o core.Outcome, sends int) {
		t.Helper()
		tk, err := a.Admit(ctx, req)
		if err != nil || !tk.Admitted() {
			t.Fatalf("Admit = %+v, %v", tk, err)
		}
		for range sends {
			if _, err := a.Finish(ctx, tk, core.Settlement{Kind: core.SettleRefund}, o); err != nil {
				t.Fatal(err)
			}
		}
	}
	call(core.OutcomeSuccess, 2) // one success, its Finish sent twice
	call(core.OutcomeFailure, 1)
	call(core.OutcomeFailure, 1)
	if s, err := b.Snapshot(ctx, "W", "a", cfg); err != nil || s.State != core.StateClosed || s.Opens != 0 {
		t.Fatalf("snapshot %+v, %v; want closed: 3 samples are below MinCalls 4", s, err)
	}
}
