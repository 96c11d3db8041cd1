package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// queueAdmitter is a fake queuing core.Admitter: limit concurrency slots
// per scope; a call that finds them taken (or others in line) queues by
// class rank, then arrival; a Finish hands its slot to the head of the
// line (WaitClaimed on the finished permit's source) instead of freeing
// it. With deadline set, every new call that would queue is refused with
// it.
type queueAdmitter struct {
	mu       sync.Mutex
	limit    int
	held     int
	line     []*fakeWaiter
	seq      int
	deadline *core.QueueDeadlineError
	// claimLeft is the ClaimLeft of the events it sends.
	claimLeft time.Duration
	// full names sources whose gates are always full: a new call on one
	// queues (or meets deadline).
	full map[string]bool
	// waitErr, when set, is what Wait fails with (the waiter leaves).
	waitErr error
	// admits counts Admit calls; leaves the places given up by Leave (or
	// a cancelled Wait); order the places of the admitted calls.
	admits, leaves int
	order          []core.Place
}

var _ core.Admitter = (*queueAdmitter)(nil)

type fakeWaiter struct {
	q       *queueAdmitter
	place   core.Place
	seq     int
	ev      chan core.WaitEvent
	claimed bool   // a slot is reserved for it
	source  string // on this source
	done    bool   // admitted or left
}

var _ core.Waiter = (*fakeWaiter)(nil)

func newQueueAdmitter(limit int) *queueAdmitter { return &queueAdmitter{limit: limit} }

func admittedTicket(req core.AdmitRequest) core.Ticket {
	return core.Ticket{Breaker: req.Breaker, Admission: core.Admission{Allowed: true, State: core.StateClosed},
		Grant: core.Grant{OK: true, Permit: core.Permit{Scope: req.Permit.Scope, Source: req.Permit.Source}}}
}

// queuedTicket is the answer of a concurrency gate that queued the call,
// as core.ComposeAdmitter gives it: the breaker admitted, the gate refused.
func queuedTicket(w *fakeWaiter) core.Ticket {
	return core.Ticket{Admission: core.Admission{Allowed: true, State: core.StateClosed},
		Grant: core.Grant{Gate: core.GateSourceConcurrency, Queued: w}, Queued: w}
}

func (q *queueAdmitter) Admit(_ context.Context, req core.AdmitRequest) (core.Ticket, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.admits++
	if w, ok := req.Permit.Waiter.(*fakeWaiter); ok && !w.done {
		if w.claimed {
			// The reserved slot becomes the permit.
			w.claimed, w.done = false, true
			q.order = append(q.order, w.place)
			return admittedTicket(req), nil
		}
		return queuedTicket(w), nil
	}
	if q.held < q.limit && len(q.line) == 0 && !q.full[req.Permit.Source] {
		q.held++
		q.order = append(q.order, req.Permit.Place)
		return admittedTicket(req), nil
	}
	if q.deadline != nil {
		return core.Ticket{}, q.deadline
	}
	q.seq++
	w := &fakeWaiter{q: q, place: req.Permit.Place, seq: q.seq, ev: make(chan core.WaitEvent, 1)}
	q.line = append(q.line, w)
	slices.SortStableFunc(q.line, func(a, b *fakeWaiter) int {
		if d := a.place.Priority.Rank() - b.place.Priority.Rank(); d != 0 {
			return d
		}
		return a.seq - b.seq
	})
	return queuedTicket(w), nil
}

// hand gives a slot to the head of the line, or frees it; q.mu is held.
func (q *queueAdmitter) hand(source string) {
	if len(q.line) == 0 {
		q.held--
		return
	}
	w := q.line[0]
	q.line = q.line[1:]
	w.claimed, w.source = true, source
	w.ev <- core.WaitEvent{Kind: core.WaitClaimed, Source: source, ClaimLeft: q.claimLeft}
}

func (q *queueAdmitter) Finish(_ context.Context, t core.Ticket, _ core.Settlement, _ core.Outcome) (bool, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.hand(t.Grant.Permit.Source)
	return true, nil
}

// PushBack records nothing: the fake has no circuits.
func (*queueAdmitter) PushBack(context.Context, string, string, core.BreakerConfig, time.Duration) error {
	return nil
}

func (q *queueAdmitter) waiting() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.line)
}

func (q *queueAdmitter) counts() (admits, leaves, held int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.admits, q.leaves, q.held
}

func (q *queueAdmitter) admitted() []core.Place {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.order)
}

func (w *fakeWaiter) Wait(ctx context.Context) (core.WaitEvent, error) {
	w.q.mu.Lock()
	err := w.q.waitErr
	w.q.mu.Unlock()
	if err != nil {
		w.Leave(ctx)
		return core.WaitEvent{}, err
	}
	select {
	case ev := <-w.ev:
		return ev, nil
	case <-ctx.Done():
		w.Leave(ctx)
		return core.WaitEvent{}, &core.CanceledError{Err: ctx.Err()}
	}
}

func (w *fakeWaiter) Leave(context.Context) {
	q := w.q
	q.mu.Lock()
	defer q.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	q.leaves++
	if w.claimed {
		// The reservation passes on.
		w.claimed = false
		q.hand(w.source)
		return
	}
	q.line = slices.DeleteFunc(q.line, func(x *fakeWaiter) bool { return x == w })
}

// queueObserver records the queue's events.
type queueObserver struct {
	recordingObserver
	mu       sync.Mutex
	waits    map[core.Priority][]time.Duration
	admitted map[core.Place]int
}

var _ core.Observer = (*queueObserver)(nil)

func newQueueObserver() *queueObserver {
	return &queueObserver{waits: map[core.Priority][]time.Duration{}, admitted: map[core.Place]int{}}
}

func (o *queueObserver) Admitted(_ string, p core.Place) {
	o.mu.Lock()
	o.admitted[p]++
	o.mu.Unlock()
}

func (o *queueObserver) QueueWaited(_ string, c core.Priority, d time.Duration) {
	o.mu.Lock()
	o.waits[c] = append(o.waits[c], d)
	o.mu.Unlock()
}
