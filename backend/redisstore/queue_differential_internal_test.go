package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// call is one call of the test on both sides.
type call struct {
	source string
	place  core.Place
	mt, rt core.Ticket       // the admitted tickets, while running
	mw     *fairqueue.Waiter // the memory side's waiter, while queued
	rw     *qwaiter          // Redis's, while queued
	stop   context.CancelFunc
	claim  string    // the source of the claim it holds
	dl     time.Time // its deadline on the fake clock (zero: none)
}

// memEvent is what the memory side's Wait of a call returned.
type memEvent struct {
	cl  *call
	ev  core.WaitEvent
	err error
}

// queueDiff is the state of one run of the differential test.
type queueDiff struct {
	t       *testing.T
	ctx     context.Context
	ma      core.Admitter // memory
	ra      *Admitter     // Redis
	events  chan memEvent
	running []*call
	queued  []*call
	claimed map[uint64]*call // holders of a claim, by id
	// counts
	admissions, handoffs, lates int
}

// TestQueueMatchesFairqueue drives the memory Admitter with its queue
// (the reference discipline, internal/fairqueue, in front of the memory
// limiter's gates) and the Redis Admitter with its queue (the scripts, in
// front of the Redis gates) with the same random operations on one fake
// clock — arrivals of every class, skewed tenants, either source, some
// with deadlines; finishes that hand slots on; claims taken; waiters
// leaving, with and without a claim — and requires the same answer at
// every step: admitted or queued (and the entry's number), refused for a
// deadline with the same position and estimate, the slot handed to the
// same waiter.
func TestQueueMatchesFairqueue(t *testing.T) {
	c, prefix := internalClient(t)
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { queueDifferential(t, c, prefix, seed) })
	}
}

func queueDifferential(t *testing.T, c *redis.Client, prefix string, seed uint64) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 31))
	clk := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	share := 1 + rng.IntN(5)
	// Claims and leases do not lapse here: the fake clock moves only a
	// few seconds, and lapses are the other tests' subject.
	ra := NewAdmitter(NewLimiter(c, WithPrefix(prefix), WithClock(clk)), NewBreaker(c, WithPrefix(prefix), WithClock(clk)),
		WithQueue(QueueConfig{Share: share, ClaimTTL: time.Hour, Lease: time.Hour}))
	defer ra.Close()
	ml := memory.NewLimiter(memory.WithClock(clk), memory.WithQueue(memory.QueueConfig{Share: share, ClaimTTL: time.Hour}))
	d := &queueDiff{t: t, ctx: ctx, ma: core.ComposeAdmitter(ml, memory.NewBreaker(memory.WithClock(clk))), ra: ra,
		events: make(chan memEvent, 64), claimed: map[uint64]*call{}}
	defer d.stopAll()
	scope := fmt.Sprintf("DIFFQ%d", seed)
	request := func(source string, place core.Place) core.AdmitRequest {
		return core.AdmitRequest{Permit: core.PermitRequest{Scope: scope, Source: source, SourceLimits: core.Limits{MaxConcurrency: 2},
			GlobalLimits: core.Limits{MaxConcurrency: 3}, LeaseTTL: 24 * time.Hour, Place: place}}
	}
	tenants := []string{"big", "big", "big", "mid", "mid", "small", "tiny"}
	for step := range 400 {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		switch op := rng.IntN(100); {
		case op < 45:
			cl := &call{source: []string{"a", "b"}[rng.IntN(2)],
				place: core.Place{Priority: core.Priority(rng.IntN(core.NumPriorities)), Tenant: tenants[rng.IntN(len(tenants))]}}
			var left time.Duration
			if rng.IntN(4) == 0 {
				left = time.Duration(50+rng.IntN(2000))*time.Millisecond + time.Duration(rng.IntN(1000))*time.Microsecond
				cl.dl = clk.Now().Add(left)
			}
			d.arrive(where, cl, request(cl.source, cl.place), left)
		case op < 70 && len(d.running) > 0:
			d.finish(where, rng.IntN(len(d.running)))
		case op < 85 && len(d.claimed) > 0:
			ids := mapKeys(d.claimed)
			cl := d.claimed[ids[rng.IntN(len(ids))]]
			d.take(where, cl, request(cl.claim, cl.place))
		case op < 93 && (len(d.queued) > 0 || len(d.claimed) > 0):
			// A waiter leaves: in line, or holding a claim.
			if n := len(d.queued); n > 0 && (len(d.claimed) == 0 || rng.IntN(2) == 0) {
				d.leave(where, d.queued[rng.IntN(n)])
			} else {
				ids := mapKeys(d.claimed)
				d.leave(where, d.claimed[ids[rng.IntN(len(ids))]])
			}
		default:
			clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
			// Waiters whose deadline passed leave, as their Wait would, in
			// the order of their deadlines.
			var late []*call
			for _, cl := range append(slices.Clone(d.queued), mapValues(d.claimed)...) {
				if !cl.dl.IsZero() && !clk.Now().Before(cl.dl) {
					late = append(late, cl)
				}
			}
			slices.SortFunc(late, func(a, b *call) int { return a.dl.Compare(b.dl) })
			for _, cl := range late {
				d.leave(where+" (deadline)", cl)
			}
		}
	}
	t.Logf("share %d: %d admissions, %d handoffs, %d refused for their deadline", share, d.admissions, d.handoffs, d.lates)
}

// arrive admits a new call on both sides (with left to its deadline, 0:
// none) and compares the answers.
func (d *queueDiff) arrive(where string, cl *call, req core.AdmitRequest, left time.Duration) {
	d.t.Helper()
	mctx, rctx := d.ctx, d.ctx
	if left > 0 {
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(d.ctx, left)
		defer cancel()
		rctx, cancel = context.WithTimeout(d.ctx, left)
		defer cancel()
	}
	mt, mErr := d.ma.Admit(mctx, req)
	rt, rErr := d.ra.Admit(rctx, req)
	var md, rd *core.QueueDeadlineError
	switch {
	case errors.As(mErr, &md):
		if !errors.As(rErr, &rd) || md.Ahead != rd.Ahead || md.Estimate != rd.Estimate {
			d.t.Fatalf("%s: memory %v, Redis %v, %+v", where, mErr, rErr, rt)
		}
		d.lates++
	case mErr != nil || rErr != nil:
		d.t.Fatalf("%s: %v, %v", where, mErr, rErr)
	case mt.Admitted() != rt.Admitted():
		d.t.Fatalf("%s: arrival admitted by memory %v, by Redis %v", where, mt.Admitted(), rt.Admitted())
	case mt.Admitted():
		cl.mt, cl.rt = mt, rt
		d.running = append(d.running, cl)
		d.admissions++
	default:
		mw, _ := mt.Queued.(*fairqueue.Waiter)
		rw, _ := rt.Queued.(*qwaiter)
		if mw == nil || rw == nil || rw.id != mw.ID() {
			d.t.Fatalf("%s: queued by memory as %v, by Redis as %v", where, mt.Queued, rt.Queued)
		}
		cl.mw, cl.rw = mw, rw
		d.wait(cl)
		d.queued = append(d.queued, cl)
	}
}

// wait runs the memory side's Wait of cl in a goroutine of its own, which
// reports on events.
func (d *queueDiff) wait(cl *call) {
	ctx, cancel := context.WithCancel(d.ctx)
	cl.stop = cancel
	w := cl.mw
	go func() {
		ev, err := w.Wait(ctx)
		d.events <- memEvent{cl: cl, ev: ev, err: err}
	}()
}

// next returns the memory side's next event.
func (d *queueDiff) next(where string) memEvent {
	d.t.Helper()
	guard := time.NewTimer(20 * time.Second)
	defer guard.Stop()
	select {
	case e := <-d.events:
		return e
	case <-guard.C:
		d.t.Fatalf("%s: no memory waiter was woken within 20s", where)
		return memEvent{}
	}
}

// handed checks that the claim Redis handed to id (0: none) went to the
// same waiter in memory, on source, and moves it to the holders.
func (d *queueDiff) handed(where string, id uint64, source string) {
	d.t.Helper()
	if id == 0 {
		return
	}
	e := d.next(where)
	if e.err != nil || e.ev.Kind != core.WaitClaimed || e.ev.Source != source || e.cl.mw.ID() != id {
		d.t.Fatalf("%s: Redis handed a slot of %s to %d; memory woke %d with %+v, %v", where, source, id, e.cl.mw.ID(), e.ev, e.err)
	}
	d.handoffs++
	d.claimed[id] = takeCall(&d.queued, id, source)
}

// finish ends the i-th running call on both sides.
func (d *queueDiff) finish(where string, i int) {
	d.t.Helper()
	cl := d.running[i]
	d.running = slices.Delete(d.running, i, i+1)
	if _, err := d.ma.Finish(d.ctx, cl.mt, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		d.t.Fatal(err)
	}
	_, to, err := d.ra.finish(d.ctx, cl.rt, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess)
	if err != nil {
		d.t.Fatal(err)
	}
	d.handed(where, to, cl.source)
}

// take admits the holder of a claim, with its waiter, on both sides.
func (d *queueDiff) take(where string, cl *call, req core.AdmitRequest) {
	d.t.Helper()
	delete(d.claimed, cl.mw.ID())
	mreq, rreq := req, req
	mreq.Permit.Waiter, rreq.Permit.Waiter = cl.mw, cl.rw
	mt, mErr := d.ma.Admit(d.ctx, mreq)
	rt, rErr := d.ra.Admit(d.ctx, rreq)
	if mErr != nil || rErr != nil || !mt.Admitted() || !rt.Admitted() {
		d.t.Fatalf("%s: the holder of a claim on %s: memory %+v %v, Redis %+v %v", where, cl.claim, mt, mErr, rt, rErr)
	}
	cl.source, cl.mt, cl.rt = cl.claim, mt, rt
	d.running = append(d.running, cl)
	d.admissions++
}

// leave takes cl, queued or holding a claim, out of both queues and
// compares where a claim it held went.
func (d *queueDiff) leave(where string, cl *call) {
	d.t.Helper()
	if _, ok := d.claimed[cl.mw.ID()]; ok {
		delete(d.claimed, cl.mw.ID())
		cl.mw.Leave(d.ctx) // its Wait has returned
	} else {
		d.queued = slices.DeleteFunc(d.queued, func(x *call) bool { return x == cl })
		cl.stop() // its Wait leaves, and reports
		if e := d.next(where); e.cl != cl || !errors.Is(e.err, context.Canceled) {
			d.t.Fatalf("%s: memory woke %d with %+v, %v; want %d cancelled", where, e.cl.mw.ID(), e.ev, e.err, cl.mw.ID())
		}
	}
	label := cl.claim
	if label == "" {
		label = cl.source
	}
	d.ra.wake.forget(cl.rw)
	to, err := d.ra.leave(d.ctx, cl.rw.k, cl.rw.id, label)
	if err != nil {
		d.t.Fatal(err)
	}
	d.handed(where, to, cl.claim)
}

// stopAll ends the memory side's waits still running.
func (d *queueDiff) stopAll() {
	for _, cl := range d.queued {
		cl.stop()
		select {
		case <-d.events:
		case <-time.After(10 * time.Second):
			// A test that failed may have read the event already: end
			// rather than wait for the package's timeout.
			d.t.Error("a memory waiter did not report its end")
			return
		}
	}
}

// takeCall moves the queued call id to the holders of a claim on label.
func takeCall(queued *[]*call, id uint64, label string) *call {
	for i, cl := range *queued {
		if cl.mw.ID() == id {
			*queued = slices.Delete(*queued, i, i+1)
			cl.claim = label
			return cl
		}
	}
	panic(fmt.Sprintf("no queued call %d", id))
}

func mapValues(m map[uint64]*call) []*call {
	vs := make([]*call, 0, len(m))
	for _, k := range mapKeys(m) {
		vs = append(vs, m[k])
	}
	return vs
}

func mapKeys(m map[uint64]*call) []uint64 {
	ks := make([]uint64, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
