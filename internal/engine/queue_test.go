package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// queueFixture is an engine whose Admitter queues (queueAdmitter, limit
// slots) and whose upstream answers after service.
func queueFixture(t *testing.T, limit int, service time.Duration, opts ...func(*Config)) (*fixture, *queueAdmitter) {
	t.Helper()
	q := newQueueAdmitter(limit)
	set := testSettings(src("a", 0))
	f := newFixture(t, set, append([]func(*Config){func(c *Config) { c.Admitter = q }}, opts...)...)
	f.up.script("a", step{delay: service})
	return f, q
}

func placedCall(id string, p core.Priority, tenant string) *core.Call {
	c := newCall()
	c.ID, c.Place = id, core.Place{Priority: p, Tenant: tenant}
	return c
}

// TestAQueuedCallIsHandedTheSlotAFinishedCallFrees: with one slot taken,
// queued calls wait on their waiters and each is admitted on the slot its
// predecessor frees, interactive first, with exactly two admissions per
// queued call (the one that queued it and the claim's): no polling.
func TestAQueuedCallIsHandedTheSlotAFinishedCallFrees(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, 100*time.Millisecond)
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		run := func(c *core.Call) {
			wg.Go(func() {
				_, err := f.g.Handle(context.Background(), c)
				errs <- err
			})
			synctest.Wait()
		}
		run(placedCall("first", core.PriorityBatch, ""))
		for i := range 3 {
			run(placedCall("batch-"+string(rune('0'+i)), core.PriorityBatch, ""))
		}
		run(placedCall("person", core.PriorityInteractive, ""))
		if d := f.g.QueueDepth(); d[core.PriorityBatch] != 3 || d[core.PriorityInteractive] != 1 {
			t.Errorf("QueueDepth = %v while 3 batch and 1 interactive calls wait", d)
		}
		if st := f.status(t, "a"); st.Queued.Total() != 4 {
			t.Errorf("Sources().Queued = %v, want 4 waiting", st.Queued)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("call failed: %v", err)
			}
		}
		order := q.admitted()
		if len(order) != 5 || order[1].Priority != core.PriorityInteractive {
			t.Errorf("admitted %v, want the interactive call right after the first", order)
		}
		if admits, leaves, held := q.counts(); admits != 1+2*4 || leaves != 0 || held != 0 {
			t.Errorf("admits %d, leaves %d, held %d; want 9 admissions (1 + 2 per queued call), no leave, no slot held", admits, leaves, held)
		}
		if d := f.g.QueueDepth(); d.Total() != 0 {
			t.Errorf("QueueDepth = %v after every call ended", d)
		}
	})
}

// TestTheQueueWaitIsRecordedAndObserved: a call that waited one service
// time in the queue carries the wait in Call.QueueWait, and the
// Observer sees the wait by class and the admissions by place.
func TestTheQueueWaitIsRecordedAndObserved(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		obs := newQueueObserver()
		f, _ := queueFixture(t, 1, 200*time.Millisecond, func(c *Config) { c.Observer = obs })
		first, second := placedCall("first", core.PriorityNormal, "t1"), placedCall("second", core.PriorityBatch, "t2")
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), first) })
		synctest.Wait()
		if _, err := f.g.Handle(context.Background(), second); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		wg.Wait()
		if first.QueueWait != 0 || second.QueueWait != 200*time.Millisecond {
			t.Errorf("QueueWait = %v and %v, want 0 and 200ms", first.QueueWait, second.QueueWait)
		}
		obs.mu.Lock()
		defer obs.mu.Unlock()
		if w := obs.waits[core.PriorityBatch]; len(w) != 1 || w[0] != 200*time.Millisecond {
			t.Errorf("batch queue waits %v, want [200ms]", w)
		}
		if obs.admitted[first.Place] != 1 || obs.admitted[second.Place] != 1 {
			t.Errorf("admissions %v, want one per place", obs.admitted)
		}
	})
}

// TestADeadlineTheQueueCannotMeetEndsAtOnce: the Admitter's
// QueueDeadlineError ends the call before any wait with a
// GatewayUnavailableError of reason queue_deadline whose RetryAfter is the
// estimate, wrapping the queue's error.
func TestADeadlineTheQueueCannotMeetEndsAtOnce(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, time.Second)
		q.deadline = &core.QueueDeadlineError{Ahead: 7, Estimate: 8 * time.Second, Left: time.Second}
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		_, err := f.g.Handle(ctx, newCall())
		if d := time.Since(start); d != 0 {
			t.Errorf("ended after %v, want at once", d)
		}
		u := asUnavailable(t, err)
		if u.Reason != core.ReasonQueueDeadline || u.RetryAfter != 8*time.Second {
			t.Errorf("reason %s, RetryAfter %v; want queue_deadline, 8s", u.Reason, u.RetryAfter)
		}
		var qd *core.QueueDeadlineError
		if !errors.As(err, &qd) || qd.Ahead != 7 {
			t.Errorf("errors.As(QueueDeadlineError) = %v, want the queue's error", qd)
		}
		wg.Wait()
	})
}

// TestACancelledWaiterLeavesTheQueue: a waiting call whose caller goes
// away ends with the cancellation, its place is given up, and the slot
// the holder frees later is freed, not handed to it.
func TestACancelledWaiterLeavesTheQueue(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, time.Second)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		var err error
		wg.Go(func() { _, err = f.g.Handle(ctx, newCall()) })
		synctest.Wait()
		if q.waiting() != 1 {
			t.Fatalf("%d waiting, want 1", q.waiting())
		}
		cancel()
		synctest.Wait()
		if q.waiting() != 0 {
			t.Errorf("%d waiting after the cancellation, want 0", q.waiting())
		}
		wg.Wait()
		var ce *core.CanceledError
		if !errors.As(err, &ce) {
			t.Errorf("err = %v, want a CanceledError", err)
		}
		if _, leaves, held := q.counts(); leaves != 1 || held != 0 {
			t.Errorf("leaves %d, held %d; want 1 and 0", leaves, held)
		}
	})
}

// TestAWaiterEndsByItsDeadlineAndLeaves: a queued call whose context ends
// while it waits returns when it ends, and leaves.
func TestAWaiterEndsByItsDeadlineAndLeaves(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, 10*time.Second)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		start := time.Now()
		_, err := f.g.Handle(ctx, newCall())
		if d := time.Since(start); d != 3*time.Second {
			t.Errorf("ended after %v, want at its 3s deadline", d)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want the deadline", err)
		}
		if q.waiting() != 0 {
			t.Errorf("%d waiting after the deadline, want 0", q.waiting())
		}
		wg.Wait()
	})
}

// TestAWaiterInAStalledScopeGivesUpAtTheStallWindow: while the only slot
// is held by an attempt that never answers, a queued call ends stalled
// when the stall window ends, and leaves the queue.
func TestAWaiterInAStalledScopeGivesUpAtTheStallWindow(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, 0)
		f.up.script("a", hangStep())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(ctx, newCall()) })
		synctest.Wait()
		start := time.Now()
		_, err := f.g.Handle(context.Background(), newCall())
		if d, sw := time.Since(start), f.set.Backpressure.StallWindow; d != sw {
			t.Errorf("ended after %v, want at the %v stall window", d, sw)
		}
		if u := asUnavailable(t, err); u.Reason != core.ReasonStalled {
			t.Errorf("reason %s, want stalled", u.Reason)
		}
		if q.waiting() != 0 {
			t.Errorf("%d waiting, want 0", q.waiting())
		}
		cancel()
		wg.Wait()
	})
}

// TestAWaiterKeepsItsPlacePastTheStallWindowWhileTheScopeProgresses: the
// stall rule's check points do not cost a waiter its place while calls
// ahead of it are answered: a call waiting three stall windows is served
// with one wait (two admissions), never requeued.
func TestAWaiterKeepsItsPlacePastTheStallWindowWhileTheScopeProgresses(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		const ahead = 6
		f, q := queueFixture(t, 1, 0)
		window := f.set.Backpressure.StallWindow
		f.up.script("a", step{delay: window / 2})
		var wg sync.WaitGroup
		for range ahead {
			wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
			synctest.Wait()
		}
		last := placedCall("last", core.PriorityNormal, "")
		if _, err := f.g.Handle(context.Background(), last); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		wg.Wait()
		if want := time.Duration(ahead) * window / 2; last.QueueWait != want {
			t.Errorf("QueueWait %v, want %v", last.QueueWait, want)
		}
		if admits, leaves, _ := q.counts(); admits != 1+2*ahead || leaves != 0 {
			t.Errorf("admits %d, leaves %d; want %d and 0 (no call requeued)", admits, leaves, 1+2*ahead)
		}
	})
}

// TestAClaimOnASourceAtItsAdaptiveLimitIsGivenUpAtItsEnd: woken with a
// slot reserved on a source whose adaptive-concurrency limit is full, the
// call waits for a slot until the claim ends, then gives the claim up and
// asks again; once the source has room it is answered.
func TestAClaimOnASourceAtItsAdaptiveLimitIsGivenUpAtItsEnd(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, 100*time.Millisecond)
		q.claimLeft = 500 * time.Millisecond
		s := f.g.sourceNamed("a")
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		var err error
		wg.Go(func() { _, err = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		// Fill the adaptive limit before the holder finishes.
		fill := int64(aimdCap)
		s.inflight.Add(fill)
		time.Sleep(100*time.Millisecond + q.claimLeft)
		synctest.Wait()
		if _, leaves, _ := q.counts(); leaves != 1 {
			t.Errorf("leaves %d at the claim's end, want 1", leaves)
		}
		s.inflight.Add(-fill)
		f.g.slotFree()
		wg.Wait()
		if err != nil {
			t.Errorf("Handle: %v", err)
		}
	})
}

// TestACallQueuedOnAFullSourceTriesAnotherFirst: a new call the queue
// takes on a full source while another source is free gives its place back
// and is answered by the other at once, without waiting.
func TestACallQueuedOnAFullSourceTriesAnotherFirst(t *testing.T) {
	t.Parallel()
	for _, deadline := range []bool{false, true} {
		inBubble(t, func(t *testing.T) {
			q := newQueueAdmitter(4)
			q.full = map[string]bool{"a": true}
			if deadline {
				q.deadline = &core.QueueDeadlineError{Ahead: 3, Estimate: time.Second}
			}
			f := newFixture(t, testSettings(src("a", 0), src("b", 1)), func(c *Config) { c.Admitter = q })
			start := time.Now()
			resp, err := f.g.Handle(context.Background(), newCall())
			if err != nil || resp.SourceName != "b" || time.Since(start) != 0 {
				t.Fatalf("= %v, %v after %v; want b's answer at once", resp, err, time.Since(start))
			}
			if _, leaves, held := q.counts(); q.waiting() != 0 || held != 0 || (!deadline && leaves != 1) {
				t.Errorf("%d waiting, %d leaves, %d held; want the place on a given back", q.waiting(), leaves, held)
			}
		})
	}
}

// TestAWaitThatFailsEndsTheCallAsABackendFailure: a queue that cannot wait
// (its backend failed) ends the call with a GovernanceBackendError.
func TestAWaitThatFailsEndsTheCallAsABackendFailure(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, time.Second)
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		down := errors.New("queue backend down")
		q.mu.Lock()
		q.waitErr = down
		q.mu.Unlock()
		_, err := f.g.Handle(context.Background(), newCall())
		var gb *core.GovernanceBackendError
		if !errors.As(err, &gb) || !errors.Is(err, down) || gb.Op != "wait" {
			t.Errorf("err = %v, want a GovernanceBackendError of the wait wrapping the failure", err)
		}
		wg.Wait()
	})
}

// TestAFailFastScopeDoesNotWaitInTheQueue: with QUOTA_FULL=fail_fast a
// call the queue takes leaves it and ends at once, rate_limited.
func TestAFailFastScopeDoesNotWaitInTheQueue(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		q := newQueueAdmitter(1)
		set := testSettings(src("a", 0))
		set.QuotaFull = core.QuotaFullFailFast
		f := newFixture(t, set, func(c *Config) { c.Admitter = q })
		f.up.script("a", step{delay: time.Second})
		var wg sync.WaitGroup
		wg.Go(func() { _, _ = f.g.Handle(context.Background(), newCall()) })
		synctest.Wait()
		start := time.Now()
		_, err := f.g.Handle(context.Background(), newCall())
		if u := asUnavailable(t, err); u.Reason != core.ReasonRateLimited || time.Since(start) != 0 {
			t.Errorf("reason %s after %v, want rate_limited at once", u.Reason, time.Since(start))
		}
		if _, leaves, _ := q.counts(); q.waiting() != 0 || leaves != 1 {
			t.Errorf("%d waiting, %d leaves; want the place given back", q.waiting(), leaves)
		}
		wg.Wait()
	})
}

// TestTheCallsPlaceIsCheckedBeforeAnyRequest: a tenant name longer than
// core.MaxTenant is refused before any admission; an invalid class is
// admitted as normal.
func TestTheCallsPlaceIsCheckedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		f, q := queueFixture(t, 1, 0)
		_, err := f.g.Handle(context.Background(), placedCall("long", core.PriorityBatch, strings.Repeat("t", core.MaxTenant+1)))
		var rj *core.RequestRejectedError
		if !errors.As(err, &rj) || !errors.Is(err, core.ErrTenantTooLong) {
			t.Errorf("err = %v, want a RequestRejectedError matching ErrTenantTooLong", err)
		}
		if admits, _, _ := q.counts(); admits != 0 {
			t.Errorf("%d admissions for a refused place, want 0", admits)
		}
		if _, err := f.g.Handle(context.Background(), placedCall("odd", core.Priority(7), "")); err != nil {
			t.Fatalf("Handle: %v", err)
		}
		if got := q.admitted(); len(got) != 1 || got[0].Priority != core.PriorityNormal {
			t.Errorf("admitted %v, want the invalid class as normal", got)
		}
	})
}

// TestAWokenCallRefusedByItsBudgetEndsWithBudgetExhausted: a call that
// queued behind a full gate and, handed the slot, finds its spend budget
// spent ends at once with budget_exhausted and the time until the
// budget's window ends, as a call the budget refuses without waiting
// does: budgets are not waited for in the queue.
func TestAWokenCallRefusedByItsBudgetEndsWithBudgetExhausted(t *testing.T) {
	t.Parallel()
	inBubble(t, func(t *testing.T) {
		lim := memory.NewLimiter(memory.WithQueue(memory.QueueConfig{}))
		budget := core.Budget{Key: "client:a", Limit: 10, Window: time.Hour}
		spent := core.PermitRequest{Scope: "elsewhere", Source: "x", Budgets: []core.Budget{budget}, Cost: 10}
		if g, err := lim.TryAcquire(context.Background(), spent); err != nil || !g.OK {
			t.Fatalf("TryAcquire spending the budget = %+v, %v", g, err)
		}
		a := src("a", 0)
		a.Limits = core.Limits{MaxConcurrency: 1}
		f := newFixture(t, testSettings(a), func(c *Config) { c.Limiter = lim })
		f.up.script("a", step{delay: 100 * time.Millisecond})
		var wg sync.WaitGroup
		wg.Go(func() {
			if _, err := f.g.Handle(context.Background(), newCall()); err != nil {
				t.Errorf("the call holding the slot: %v", err)
			}
		})
		synctest.Wait()
		call := placedCall("broke", core.PriorityNormal, "a")
		call.Budgets = []core.Budget{budget}
		start := time.Now()
		_, err := f.g.Handle(context.Background(), call)
		if d := time.Since(start); d != 100*time.Millisecond {
			t.Errorf("ended after %v, want when the slot was handed to it (100ms)", d)
		}
		u := asUnavailable(t, err)
		if u.Reason != core.ReasonBudgetExhausted || u.Budget != budget.Key || u.RetryAfter <= 0 || u.RetryAfter > time.Hour {
			t.Errorf("reason %s, budget %q, RetryAfter %v; want budget_exhausted of %q until its window ends", u.Reason, u.Budget, u.RetryAfter, budget.Key)
		}
		if d := f.g.QueueDepth(); d.Total() != 0 {
			t.Errorf("QueueDepth = %v after the call ended", d)
		}
		wg.Wait()
	})
}
