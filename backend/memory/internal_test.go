package memory

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

type stubClock struct{ t time.Time }

func (c *stubClock) Now() time.Time { return c.t }

// NewTimer is never used by the backends.
func (*stubClock) NewTimer(d time.Duration) core.Timer { return core.SystemClock{}.NewTimer(d) }
func (*stubClock) AfterFunc(d time.Duration, f func()) core.Timer {
	return core.SystemClock{}.AfterFunc(d, f)
}

var t0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

func TestRingWrapsGrowsAndFinds(t *testing.T) {
	var r ring
	lease := uint64(0)
	at := int64(0)
	// Push and expire so the head walks around, then grow while wrapped.
	for round := range 5 {
		for range 12 + round*7 {
			lease++
			at++
			r.push(entry{at: at, lease: lease, amount: int64(lease)})
		}
		r.expire(at - 5)
		if r.n != 5 {
			t.Fatalf("round %d: %d entries after expiry, want 5", round, r.n)
		}
	}
	var sum int64
	for i := range r.n {
		e := r.at(i)
		if i > 0 && r.at(i-1).lease >= e.lease {
			t.Fatalf("leases out of order at %d", i)
		}
		sum += e.amount
		if got := r.find(e.lease); got != i {
			t.Fatalf("find(%d) = %d, want %d", e.lease, got, i)
		}
	}
	if sum != r.tokens {
		t.Fatalf("running sum %d, entries sum to %d", r.tokens, sum)
	}
	if r.find(1) != -1 || r.find(lease+1) != -1 {
		t.Fatal("find of a lease not in the ring should be -1")
	}
	r.settle(lease, 0)
	r.settle(1, 99) // gone: no-op
	if r.tokens != sum-int64(lease) {
		t.Fatalf("tokens %d after settling the newest to 0, want %d", r.tokens, sum-int64(lease))
	}
	r.expire(at)
	if r.n != 0 || r.tokens != 0 {
		t.Fatalf("ring not empty: n %d, tokens %d", r.n, r.tokens)
	}
}

func TestRingGivesBackBurstMemory(t *testing.T) {
	var r ring
	for i := range maxIdleRing + 1 {
		r.push(entry{at: 1, lease: uint64(i + 1)})
	}
	r.expire(1)
	if r.buf != nil {
		t.Fatalf("an empty ring kept %d slots after a burst", len(r.buf))
	}
	r.push(entry{at: 2, lease: 1})
	for range 10 {
		r.push(entry{at: 2, lease: 2})
	}
	r.expire(2)
	if len(r.buf) != minRing {
		t.Fatalf("a small ring was given back (cap %d)", len(r.buf))
	}
}

func TestLimiterNonPositiveLeaseTTLNeverExpires(t *testing.T) {
	ctx := context.Background()
	clk := &stubClock{t0}
	l := NewLimiter(WithClock(clk))
	req := core.PermitRequest{Scope: "s", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1}}
	g, _ := l.TryAcquire(ctx, req)
	clk.t = clk.t.Add(1000 * time.Hour)
	if g2, _ := l.TryAcquire(ctx, req); g2.OK || g2.Gate != core.GateSourceConcurrency {
		t.Fatalf("a slot without a lease TTL expired: %+v", g2)
	}
	_ = l.Release(ctx, g.Permit, core.Settlement{})
	if g3, _ := l.TryAcquire(ctx, req); !g3.OK {
		t.Fatalf("refused after release: %+v", g3)
	}
}

func TestLimiterCountsWindowOnlyWhileGateOn(t *testing.T) {
	ctx := context.Background()
	l := NewLimiter(WithClock(&stubClock{t0}))
	_, _ = l.TryAcquire(ctx, core.PermitRequest{Scope: "s", Source: "a", Tokens: 10})
	u, _ := l.Usage(ctx, "s", "a")
	if u != (core.LimiterUsage{InFlight: 1}) {
		t.Fatalf("usage %+v, want only the slot counted with every gate off", u)
	}
	_, _ = l.TryAcquire(ctx, core.PermitRequest{Scope: "s", Source: "a", Tokens: 10, GlobalLimits: core.Limits{TPM: 100}})
	if u, _ := l.Usage(ctx, "s", ""); u != (core.LimiterUsage{InFlight: 2, Requests: 1, Tokens: 10}) {
		t.Fatalf("global usage %+v", u)
	}
	if g, _ := l.TryAcquire(ctx, core.PermitRequest{Scope: "s", Source: "a", Tokens: -5, SourceLimits: core.Limits{TPM: 1}}); !g.OK || g.Permit.Tokens != 0 {
		t.Fatalf("negative tokens: %+v, want granted with 0 tokens", g)
	}
}

// TestRingFindAgreesWithAScan holds the galloping search to a linear scan
// on rings of every size up to 70 (wrapped or not), with gaps between
// leases (they are drawn from one counter shared by every domain), for
// every lease present and every one missing around them.
func TestRingFindAgreesWithAScan(t *testing.T) {
	t.Parallel()
	scan := func(r *ring, lease uint64) int {
		for i := range r.n {
			if r.at(i).lease == lease {
				return i
			}
		}
		return -1
	}
	for n := range 71 {
		for _, offset := range []int{0, 5, 13} {
			var r ring
			lease := uint64(0)
			for i := range offset + n {
				lease += 1 + uint64(i%3) // gaps of 0, 1 and 2
				r.push(entry{at: int64(i), lease: lease})
			}
			r.expire(int64(offset) - 1) // drop the first offset entries: the head moves
			if r.n != n {
				t.Fatalf("n=%d offset=%d: %d entries", n, offset, r.n)
			}
			for l := uint64(0); l <= lease+2; l++ {
				if got, want := r.find(l), scan(&r, l); got != want {
					t.Fatalf("n=%d offset=%d: find(%d) = %d, a scan finds %d", n, offset, l, got, want)
				}
			}
		}
	}
}

func TestWithClockNilKeepsWallClock(t *testing.T) {
	l := NewLimiter(WithClock(nil), nil)
	if _, ok := l.clk.clock.(core.SystemClock); !ok || !l.clk.system {
		t.Fatalf("clock %T (system %v), want core.SystemClock", l.clk.clock, l.clk.system)
	}
}

func TestFailWindowBuckets(t *testing.T) {
	cfg := core.BreakerConfig{Window: 60 * time.Second, FailRate: 0.5}
	var w failWindow
	sec := int64(time.Second)
	w.add(0, 1, cfg)      // bucket 0: [0s, 6s)
	w.add(5*sec, 0, cfg)  // bucket 0
	w.add(59*sec, 1, cfg) // bucket 9
	if s, f := w.sum(59 * sec); s != 3 || f != 2 {
		t.Fatalf("sum = %d, %v; want 3, 2", s, f)
	}
	// At 60 s bucket 0 leaves: the window reaches back 54-60 s.
	if s, f := w.sum(60 * sec); s != 1 || f != 1 {
		t.Fatalf("sum at 60s = %d, %v; want 1, 1", s, f)
	}
	w.add(61*sec, 0, cfg) // bucket 10 reuses bucket 0's slot
	if s, _ := w.sum(61 * sec); s != 2 {
		t.Fatalf("sum at 61s = %d, want 2", s)
	}
	if s, _ := w.sum(120 * sec); s != 0 {
		t.Fatalf("sum at 120s = %d, want 0", s)
	}
	// A different Window restarts the window.
	cfg.Window = 10 * time.Second
	w.add(121*sec, 1, cfg)
	if s, _ := w.sum(121 * sec); s != 1 {
		t.Fatalf("sum after a Window change = %d, want 1", s)
	}
	// Negative times (a clock set before the backend's start) bucket too.
	var n failWindow
	n.add(-sec, 1, cfg)
	if s, _ := n.sum(-sec); s != 1 {
		t.Fatalf("negative-time sum = %d, want 1", s)
	}
}

func TestBreakerChannelsOff(t *testing.T) {
	ctx := context.Background()
	b := NewBreaker(WithClock(&stubClock{t0}))
	record := func(src string, cfg core.BreakerConfig, o core.Outcome, n int) core.BreakerSnapshot {
		for range n {
			adm, _ := b.Allow(ctx, "s", src, cfg)
			if adm.Allowed {
				_, _ = b.Record(ctx, "s", src, adm, o, cfg)
			}
		}
		s, _ := b.Snapshot(ctx, "s", src, cfg)
		return s
	}
	// No threshold and no window: failures never open; dead still does.
	off := core.BreakerConfig{Cooldown: time.Second}
	if s := record("off", off, core.OutcomeFailure, 100); s.State != core.StateClosed {
		t.Fatalf("with both channels off: %+v", s)
	}
	if s := record("off", off, core.OutcomeDead, 1); s.State != core.StateOpen {
		t.Fatalf("dead with both channels off: %+v", s)
	}
	// A zero cooldown is half-open at once.
	zero := core.BreakerConfig{FailThreshold: 1}
	if s := record("zero", zero, core.OutcomeFailure, 1); s.State != core.StateHalfOpen || s.Opens != 1 {
		t.Fatalf("zero cooldown: %+v", s)
	}
	// A probe without a ProbeTTL never expires, and its refusals carry no RetryAfter.
	adm, _ := b.Allow(ctx, "s", "zero", zero)
	if !adm.Probe {
		t.Fatalf("want the probe: %+v", adm)
	}
	if again, _ := b.Allow(ctx, "s", "zero", zero); again.Allowed || again.RetryAfter != 0 {
		t.Fatalf("second caller: %+v", again)
	}
}

func TestLimiterTimeNeverRunsBackwardsInAScope(t *testing.T) {
	ctx := context.Background()
	clk := &stubClock{t0}
	l := NewLimiter(WithClock(clk))
	req := core.PermitRequest{Scope: "s", Source: "a", SourceLimits: core.Limits{RPM: 2}}
	clk.t = t0.Add(100 * time.Second)
	_, _ = l.TryAcquire(ctx, req)
	clk.t = t0.Add(50 * time.Second) // a stale reading: counts as +100s
	_, _ = l.TryAcquire(ctx, req)
	if g, _ := l.TryAcquire(ctx, req); g.OK || g.RetryAfter != time.Minute {
		t.Fatalf("grant %+v, want refused for 60s from +100s", g)
	}
	clk.t = t0.Add(160 * time.Second)
	if u, _ := l.Usage(ctx, "s", "a"); u.Requests != 0 {
		t.Fatalf("%d requests in the window at +160s, want 0", u.Requests)
	}
}

// TestLimiterForgetsBudgetsWhoseWindowEnded sends many distinct budget keys
// (a tenant's budget per call, say) through one Limiter over several
// windows: a spend whose window has ended is dropped, so the Limiter keeps
// the budgets of the current window only, as Redis's keys expire.
func TestLimiterForgetsBudgetsWhoseWindowEnded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clk := &stubClock{t: t0}
	l := NewLimiter(WithClock(clk))
	const perWindow, windows = 2000, 6
	for w := range windows {
		for i := range perWindow {
			b := core.Budget{Key: "tenant:" + strconv.Itoa(w*perWindow+i), Limit: 1000, Window: time.Hour}
			g, err := l.TryAcquire(ctx, core.PermitRequest{Scope: "s", Source: "a", Budgets: []core.Budget{b}, Cost: 10})
			if err != nil || !g.OK {
				t.Fatalf("window %d budget %d: TryAcquire = %+v, %v", w, i, g, err)
			}
			if err := l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Cost: 10}); err != nil {
				t.Fatal(err)
			}
		}
		clk.t = clk.t.Add(time.Hour)
	}
	l.budgets.mu.Lock()
	kept := len(l.budgets.m)
	l.budgets.mu.Unlock()
	if kept > 2*perWindow {
		t.Fatalf("%d budget spends kept after %d windows of %d distinct keys, want at most %d", kept, windows, perWindow, 2*perWindow)
	}
	// A spend of the current window is still counted.
	b := core.Budget{Key: "tenant:live", Limit: 15, Window: time.Hour}
	req := core.PermitRequest{Scope: "s", Source: "a", Budgets: []core.Budget{b}, Cost: 10}
	if g, _ := l.TryAcquire(ctx, req); !g.OK {
		t.Fatalf("first call on a fresh budget refused: %+v", g)
	}
	for i := range perWindow {
		nb := core.Budget{Key: "tenant:new" + strconv.Itoa(i), Limit: 1000, Window: time.Hour}
		if g, _ := l.TryAcquire(ctx, core.PermitRequest{Scope: "s", Source: "a", Budgets: []core.Budget{nb}, Cost: 10}); !g.OK {
			t.Fatalf("budget %d refused: %+v", i, g)
		}
	}
	if g, _ := l.TryAcquire(ctx, req); g.OK || g.Gate != core.GateBudget {
		t.Fatalf("second call over the live budget = %+v, want refused by its budget", g)
	}
}
