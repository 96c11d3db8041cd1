package backendtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// The queue settings RunAdmitterQueueSuite expects of the backend.
const (
	// SuiteQueueShare is the queue's share: a class with waiters lets at
	// most this many admissions of a higher class pass before it is
	// served.
	SuiteQueueShare = 3
	// SuiteClaimTTL is how long a unit handed to a waiter stays reserved
	// for it.
	SuiteClaimTTL = 2 * time.Second
)

// suiteWakeGuard bounds how long the queue suite waits for a waiter to be
// woken before it reports that none was: a guard against a hang, not a
// measure of the backend's speed.
const suiteWakeGuard = 20 * time.Second

// RunAdmitterQueueSuite runs the conformance suite of an Admitter whose
// limiter queues (core.Limiter's contract, docs/explanation-queue.md).
// newAdmitter is called once per subtest with that subtest's t and a
// fresh FakeClock, which the queue's head timers must run on; the
// backend's queue must use SuiteQueueShare and SuiteClaimTTL. It may
// return the same shared backend every time: each subtest uses its own
// scope.
//
// Semantics pinned by the suite:
//
//   - A call that finds a gate full is queued: a refused ticket with
//     Queued set that holds nothing (and a probe the breaker granted is
//     given back).
//   - No barging: while a waiter is in line, a new call is queued behind
//     it, and a unit a release frees goes to the line, not to a newcomer.
//   - A release hands its unit to the next waiter at once (WaitClaimed on
//     the released source): by class, then tenants in turn within a
//     class, then arrival order; a lower class with waiters is served
//     after at most SuiteQueueShare admissions of higher classes.
//   - A deadline the line ahead cannot meet is refused with a
//     *core.QueueDeadlineError carrying the estimate, (ahead+1) times the
//     recent interval between admissions.
//   - A waiter that leaves (Leave, or its context ends) passes a claim it
//     held to the next; a claim not taken within SuiteClaimTTL lapses to
//     the next at the queue's next step, and its holder's Wait reports
//     WaitLapsed.
//   - The head of a line waiting for a rate window is told when room is
//     due (WaitTurn, on the fake clock). A budget does not queue a new
//     call, and a woken waiter that a budget refuses leaves the line: the
//     slot reserved for it goes to the next waiter.
//   - No unit stays free while waiters wait for one: the units reserved
//     for claims count as held.
func RunAdmitterQueueSuite(t *testing.T, newAdmitter func(t *testing.T, clk *FakeClock) AdmitterBackend) {
	t.Helper()
	for _, tc := range admitterQueueCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(epoch())
			b := newAdmitter(t, clk)
			h := &queueHarness{
				admitterHarness: &admitterHarness{t: t, be: b, clk: clk, scope: t.Name(), cfg: SuiteBreakerConfig()},
				events:          make(chan queueEvent, 64),
			}
			t.Cleanup(h.stop)
			tc.run(h)
		})
	}
}

var admitterQueueCases = []struct {
	name string
	run  func(h *queueHarness)
}{
	{"QueuedWhenGatesFull", queueWhenFull},
	{"ProbeGivenBackWhenQueued", queueProbeGivenBack},
	{"NoBargingPastWaiters", queueNoBarging},
	{"HandoffByClassTenantArrival", queueHandoffOrder},
	{"ShareBoundsPassesOverLowerClass", queueShareBound},
	{"DeadlineRefusedWithEstimate", queueDeadline},
	{"LeavingWaiterPassesClaimOn", queueLeavePassesClaim},
	{"CancelledWaiterLeaves", queueCancelledLeaves},
	{"UnclaimedClaimLapsesToNext", queueClaimLapses},
	{"HeadTurnWhenRateWindowFrees", queueHeadTurn},
	{"WaiterRefusedByABudgetPassesItsSlotOn", queueBudgetLeaves},
	{"NoUnitIdleWhileWaitersWait", queueNoIdleUnit},
}

// queueHarness drives waiters: each waits in a goroutine of its own and
// reports what woke it on events, so the suite learns who was woken.
type queueHarness struct {
	*admitterHarness
	events chan queueEvent
	wg     sync.WaitGroup
	mu     sync.Mutex
	cancel []context.CancelFunc
}

// queueCall is one call through the queue.
type queueCall struct {
	name   string
	req    core.AdmitRequest
	w      core.Waiter
	cancel context.CancelFunc
}

// queueEvent is what a waiter's Wait returned.
type queueEvent struct {
	c   *queueCall
	ev  core.WaitEvent
	err error
}

// stop ends every wait still running and waits for their goroutines.
func (h *queueHarness) stop() {
	h.mu.Lock()
	for _, c := range h.cancel {
		c()
	}
	h.mu.Unlock()
	h.wg.Wait()
}

// oneSlot is a source gate of one concurrency slot.
var oneSlot = core.Limits{MaxConcurrency: 1}

// call returns a call on source with the source's limits lim, as tenant
// of class p.
func (h *queueHarness) call(name, source string, lim core.Limits, p core.Priority, tenant string) *queueCall {
	r := h.req(source, lim, core.Limits{}, 0)
	r.Permit.Place = core.Place{Priority: p, Tenant: tenant}
	return &queueCall{name: name, req: r}
}

// queued admits c, which must be queued, holding nothing.
func (h *queueHarness) queued(c *queueCall) *queueCall {
	h.t.Helper()
	t := h.admit(c.req)
	if t.Admitted() || t.Queued == nil || t.Grant.OK || t.Grant.Permit.Lease != 0 {
		h.t.Fatalf("Admit(%s) = %+v, want refused and queued", c.name, t)
	}
	c.w = t.Queued
	return c
}

// enqueue queues c and starts its wait.
func (h *queueHarness) enqueue(c *queueCall) *queueCall {
	h.t.Helper()
	h.queued(c)
	h.wait(c)
	return c
}

// wait starts c's Wait in a goroutine of its own.
func (h *queueHarness) wait(c *queueCall) {
	ctx, cancel := context.WithCancel(h.t.Context())
	c.cancel = cancel
	h.mu.Lock()
	h.cancel = append(h.cancel, cancel)
	h.mu.Unlock()
	h.wg.Go(func() {
		ev, err := c.w.Wait(ctx)
		h.events <- queueEvent{c: c, ev: ev, err: err}
	})
}

// next returns the next waiter woken.
func (h *queueHarness) next() queueEvent {
	h.t.Helper()
	guard := time.NewTimer(suiteWakeGuard)
	defer guard.Stop()
	select {
	case e := <-h.events:
		return e
	case <-guard.C:
		h.t.Fatalf("no waiter was woken within %v", suiteWakeGuard)
		return queueEvent{}
	}
}

// claimed returns the next waiter woken, which must be name with a claim
// on source.
func (h *queueHarness) claimed(name, source string) queueEvent {
	h.t.Helper()
	e := h.next()
	if e.err != nil || e.c.name != name || e.ev.Kind != core.WaitClaimed || e.ev.Source != source {
		h.t.Fatalf("woken: %s with %+v, %v; want %s with a claim on %s", e.c.name, e.ev, e.err, name, source)
	}
	return e
}

// again admits the woken call of e with its waiter, on the claim's source.
func (h *queueHarness) again(e queueEvent) core.Ticket {
	h.t.Helper()
	r := e.c.req
	r.Permit.Waiter = e.c.w
	if e.ev.Kind == core.WaitClaimed {
		r.Permit.Source = e.ev.Source
	}
	return h.admit(r)
}

// take admits the woken call of e again: it must be granted.
func (h *queueHarness) take(e queueEvent) core.Ticket {
	h.t.Helper()
	t := h.again(e)
	if !t.Admitted() || t.Queued != nil {
		h.t.Fatalf("Admit(%s) after %+v = %+v, want admitted", e.c.name, e.ev, t)
	}
	return t
}

func (h *queueHarness) release(t core.Ticket) {
	h.t.Helper()
	h.finish(t, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess)
}

func queueWhenFull(h *queueHarness) {
	hold := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	c := h.enqueue(h.call("w", "a", oneSlot, core.PriorityNormal, "t"))
	h.wantUsage("a", core.LimiterUsage{InFlight: 1})
	h.release(hold)
	h.take(h.claimed(c.name, "a"))
	h.wantUsage("a", core.LimiterUsage{InFlight: 1})
}

func queueProbeGivenBack(h *queueHarness) {
	h.open("a")
	h.clk.Advance(h.cfg.Cooldown)
	hold, err := h.be.Limiter.TryAcquire(h.t.Context(), h.req("a", oneSlot, core.Limits{}, 0).Permit)
	if err != nil || !hold.OK {
		h.t.Fatalf("TryAcquire = %+v, %v", hold, err)
	}
	c := h.call("w", "a", oneSlot, core.PriorityNormal, "t")
	t := h.admit(c.req)
	if !t.Admission.Probe || t.Queued == nil || t.Admitted() {
		h.t.Fatalf("Admit on a half-open circuit with the gate full = %+v, want the probe, then queued", t)
	}
	if s := h.snap("a"); s.ProbeHeld || s.State != core.StateHalfOpen {
		h.t.Fatalf("snapshot %+v, want half-open with the probe given back", s)
	}
	c.w = t.Queued
	h.wait(c)
	if err := h.be.Limiter.Release(h.t.Context(), hold.Permit, core.Settlement{Kind: core.SettleRefund}); err != nil {
		h.t.Fatal(err)
	}
	if p := h.take(h.claimed("w", "a")); !p.Admission.Probe {
		h.t.Fatalf("admission %+v of the woken waiter, want the probe", p.Admission)
	}
}

func queueNoBarging(h *queueHarness) {
	two := core.Limits{MaxConcurrency: 2}
	h1 := h.granted(h.req("a", two, core.Limits{}, 0))
	h2 := h.granted(h.req("a", two, core.Limits{}, 0))
	h.enqueue(h.call("w1", "a", two, core.PriorityNormal, "t"))
	h.enqueue(h.call("w2", "a", two, core.PriorityNormal, "t"))
	h.release(h1)
	e1 := h.claimed("w1", "a")
	// w2 is in line: a newcomer queues behind it, whatever the gates say.
	late := h.enqueue(h.call("late", "a", two, core.PriorityNormal, "other"))
	h.wantUsage("a", core.LimiterUsage{InFlight: 2})
	t1 := h.take(e1)
	h.release(h2)
	t2 := h.take(h.claimed("w2", "a"))
	h.release(t1)
	h.release(h.take(h.claimed(late.name, "a")))
	h.release(t2)
	// A rate window's room goes to the head it was due for: a newcomer
	// queues behind, though the window has room.
	rpm := core.Limits{RPM: 1}
	h.release(h.granted(h.req("r", rpm, core.Limits{}, 0)))
	h.enqueue(h.call("head", "r", rpm, core.PriorityNormal, "t"))
	h.clk.Advance(time.Minute)
	e := h.next()
	if e.c.name != "head" || e.err != nil || e.ev.Kind != core.WaitTurn {
		h.t.Fatalf("woken: %s with %+v, %v; want head's turn", e.c.name, e.ev, e.err)
	}
	newcomer := h.queued(h.call("newcomer", "r", rpm, core.PriorityNormal, "u"))
	h.release(h.take(e))
	newcomer.w.Leave(h.t.Context())
	h.wantUsage("r", core.LimiterUsage{Requests: 1})
}

func queueHandoffOrder(h *queueHarness) {
	cur := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	for _, c := range []struct {
		name, tenant string
		p            core.Priority
	}{
		{"etl-1", "etl", core.PriorityBatch},
		{"a-1", "a", core.PriorityNormal},
		{"a-2", "a", core.PriorityNormal},
		{"b-1", "b", core.PriorityNormal},
		{"a-3", "a", core.PriorityNormal},
		{"chat-1", "chat", core.PriorityInteractive},
		{"c-1", "c", core.PriorityNormal},
	} {
		h.enqueue(h.call(c.name, "a", oneSlot, c.p, c.tenant))
	}
	// Interactive first; normal with tenants a, b, c in turn (c joined
	// the ring last), each in arrival order; batch once it has been
	// passed over SuiteQueueShare (3) times.
	for _, name := range []string{"chat-1", "a-1", "b-1", "etl-1", "c-1", "a-2", "a-3"} {
		h.release(cur)
		cur = h.take(h.claimed(name, "a"))
	}
	h.release(cur)
}

func queueShareBound(h *queueHarness) {
	cur := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	h.enqueue(h.call("batch-1", "a", oneSlot, core.PriorityBatch, "bulk"))
	h.enqueue(h.call("batch-2", "a", oneSlot, core.PriorityBatch, "bulk"))
	n := 2*SuiteQueueShare + 2
	for i := range n {
		h.enqueue(h.call(fmt.Sprint("live-", i), "a", oneSlot, core.PriorityInteractive, "live"))
	}
	// Batch is passed over SuiteQueueShare times, then served.
	var order []string
	for range n + 2 {
		h.release(cur)
		e := h.next()
		if e.err != nil || e.ev.Kind != core.WaitClaimed {
			h.t.Fatalf("woken: %s with %+v, %v; want a claim", e.c.name, e.ev, e.err)
		}
		order = append(order, e.c.name)
		cur = h.take(e)
	}
	h.release(cur)
	if order[SuiteQueueShare] != "batch-1" || order[2*SuiteQueueShare+1] != "batch-2" {
		h.t.Fatalf("admission order %v: batch must come after every %d interactive admissions", order, SuiteQueueShare)
	}
}

func queueDeadline(h *queueHarness) {
	cur := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	for _, name := range []string{"w1", "w2", "w3", "w4"} {
		h.enqueue(h.call(name, "a", oneSlot, core.PriorityNormal, "t"))
	}
	// Two admissions 100ms apart: the interval is 100ms.
	for _, name := range []string{"w1", "w2"} {
		h.clk.Advance(100 * time.Millisecond)
		h.release(cur)
		cur = h.take(h.claimed(name, "a"))
	}
	// Two ahead of a new call of tenant t: admitted in about 300ms.
	c := h.call("late", "a", oneSlot, core.PriorityNormal, "t")
	ctx, cancel := context.WithTimeout(h.t.Context(), 250*time.Millisecond)
	defer cancel()
	_, err := h.be.Admitter.Admit(ctx, c.req)
	var de *core.QueueDeadlineError
	if !errors.As(err, &de) || de.Ahead != 2 || de.Estimate != 300*time.Millisecond || de.Left <= 0 || de.Left > 250*time.Millisecond {
		h.t.Fatalf("Admit with 250ms left = %v, want a QueueDeadlineError of 2 ahead, 300ms", err)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 1})
	// With time enough it queues.
	long, cancelLong := context.WithTimeout(h.t.Context(), time.Hour)
	defer cancelLong()
	if t, err := h.be.Admitter.Admit(long, c.req); err != nil || t.Queued == nil {
		h.t.Fatalf("Admit with an hour left = %+v, %v; want queued", t, err)
	} else {
		t.Queued.Leave(h.t.Context())
	}
	h.release(cur)
}

func queueLeavePassesClaim(h *queueHarness) {
	hold := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	w1 := h.enqueue(h.call("w1", "a", oneSlot, core.PriorityNormal, "t"))
	h.enqueue(h.call("w2", "a", oneSlot, core.PriorityNormal, "t"))
	h.release(hold)
	h.claimed("w1", "a")
	w1.w.Leave(h.t.Context())
	h.wantUsage("a", core.LimiterUsage{InFlight: 1}) // the unit is reserved for w2
	h.release(h.take(h.claimed("w2", "a")))
	h.wantUsage("a", core.LimiterUsage{})
}

func queueCancelledLeaves(h *queueHarness) {
	hold := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	w1 := h.enqueue(h.call("w1", "a", oneSlot, core.PriorityNormal, "t"))
	h.enqueue(h.call("w2", "a", oneSlot, core.PriorityNormal, "t"))
	w1.cancel()
	if e := h.next(); e.c != w1 || !errors.Is(e.err, context.Canceled) {
		h.t.Fatalf("woken: %s with %+v, %v; want w1 cancelled", e.c.name, e.ev, e.err)
	}
	h.release(hold)
	h.release(h.take(h.claimed("w2", "a")))
}

func queueClaimLapses(h *queueHarness) {
	hold := h.granted(h.req("a", oneSlot, core.Limits{}, 0))
	w1 := h.enqueue(h.call("w1", "a", oneSlot, core.PriorityNormal, "t"))
	h.enqueue(h.call("w2", "a", oneSlot, core.PriorityNormal, "t"))
	h.release(hold)
	h.claimed("w1", "a")
	h.clk.Advance(SuiteClaimTTL)
	// The queue's next step lets w1's claim lapse to w2; the newcomer
	// finds the unit reserved and queues.
	late := h.enqueue(h.call("late", "a", oneSlot, core.PriorityNormal, "u"))
	t2 := h.take(h.claimed("w2", "a"))
	h.wait(w1)
	if e := h.next(); e.c != w1 || e.err != nil || e.ev.Kind != core.WaitLapsed {
		h.t.Fatalf("woken: %s with %+v, %v; want w1's claim lapsed", e.c.name, e.ev, e.err)
	}
	h.release(t2)
	h.release(h.take(h.claimed(late.name, "a")))
}

func queueHeadTurn(h *queueHarness) {
	// A concurrency gate that never binds, so that InFlight counts the
	// calls on every backend (Redis keeps slots only under such a gate).
	rpm := core.Limits{RPM: 2, MaxConcurrency: 10}
	for range 2 {
		h.release(h.granted(h.req("a", rpm, core.Limits{}, 0)))
	}
	h.clk.Advance(10 * time.Second)
	// The window frees 50s from now: the head waits for it, the next in
	// line behind it.
	h.enqueue(h.call("head", "a", rpm, core.PriorityNormal, "t"))
	h.enqueue(h.call("next", "a", rpm, core.PriorityNormal, "t"))
	h.clk.Advance(50 * time.Second)
	// The head is told; admitted, it tells the next, for there is room.
	var held []core.Ticket
	for _, name := range []string{"head", "next"} {
		e := h.next()
		if e.c.name != name || e.err != nil || e.ev.Kind != core.WaitTurn {
			h.t.Fatalf("woken: %s with %+v, %v; want %s's turn", e.c.name, e.ev, e.err, name)
		}
		held = append(held, h.take(e))
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 2, Requests: 2})
	for _, t := range held {
		h.release(t)
	}
}

func queueNoIdleUnit(h *queueHarness) {
	two := core.Limits{MaxConcurrency: 2}
	held := []core.Ticket{h.granted(h.req("a", two, core.Limits{}, 0)), h.granted(h.req("a", two, core.Limits{}, 0))}
	var calls []*queueCall
	for i := range 6 {
		calls = append(calls, h.enqueue(h.call(fmt.Sprint("w", i), "a", two, core.PriorityNormal, fmt.Sprint("t", i%2))))
	}
	calls[3].cancel()
	if e := h.next(); e.c != calls[3] || !errors.Is(e.err, context.Canceled) {
		h.t.Fatalf("woken: %s with %+v, %v; want w3 cancelled", e.c.name, e.ev, e.err)
	}
	for waiting := 5; waiting > 0; waiting-- {
		h.release(held[0])
		held = held[1:]
		h.wantUsage("a", core.LimiterUsage{InFlight: 2}) // reserved for the claim
		e := h.next()
		if e.err != nil || e.ev.Kind != core.WaitClaimed || e.c == calls[3] {
			h.t.Fatalf("woken: %s with %+v, %v; want a claim", e.c.name, e.ev, e.err)
		}
		held = append(held, h.take(e))
		h.wantUsage("a", core.LimiterUsage{InFlight: 2})
	}
	for _, t := range held {
		h.release(t)
	}
	h.wantUsage("a", core.LimiterUsage{})
}

func queueBudgetLeaves(h *queueHarness) {
	budgets := []core.Budget{{Key: h.scope + ":budget", Limit: 100, Window: time.Minute}}
	c := h.call("w", "a", oneSlot, core.PriorityNormal, "t")
	c.req.Permit.Budgets, c.req.Permit.Cost = budgets, 60
	hold := h.granted(c.req)
	h.enqueue(c) // the slot is held: it queues
	h.enqueue(h.call("v", "a", oneSlot, core.PriorityNormal, "u"))
	h.finish(hold, core.Settlement{Kind: core.SettleEstimate}, core.OutcomeSuccess)
	// Woken with the slot, w finds the budget spent: it leaves the line,
	// and the slot goes on to v.
	t := h.again(h.claimed("w", "a"))
	if t.Admitted() || t.Grant.Gate != core.GateBudget || t.Queued != nil {
		h.t.Fatalf("Admit(w) with its claim and the budget spent = %+v, want refused by the budget and out of line", t)
	}
	h.wantUsage("a", core.LimiterUsage{InFlight: 1}) // reserved for v's claim
	h.release(h.take(h.claimed("v", "a")))
	h.wantUsage("a", core.LimiterUsage{})
	// With no one in line, a call the budget refuses is refused, not queued.
	t = h.admit(c.req)
	if t.Admitted() || t.Grant.Gate != core.GateBudget || t.Queued != nil {
		h.t.Fatalf("Admit with the budget spent and no one in line = %+v, want refused by the budget, not queued", t)
	}
}
