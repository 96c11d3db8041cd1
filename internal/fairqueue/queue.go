package fairqueue

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// NoRetry is the retry of a call that queued without trying the gates
// (Enqueue): what the head waits for is left as it was.
const NoRetry time.Duration = -1

// Defaults of Config.
const (
	DefaultShare    = 9
	DefaultClaimTTL = 2 * time.Second
)

// Config tunes a Queue. The zero value is valid.
type Config struct {
	// Share is how many consecutive choices of a higher class a class with
	// waiters lets pass before it is due (see the package documentation).
	// Default (0 or less): DefaultShare, so that a waiting class gets at
	// least one admission in every Share + core.NumPriorities - 1 = 11.
	Share int
	// ClaimTTL is how long a handed-on unit stays reserved for the waiter
	// it was handed to. Default (0 or less): DefaultClaimTTL.
	ClaimTTL time.Duration
	// Chosen, when set, is called (with the queue's lock held) each time
	// a waiter is chosen from the line: handed a unit, or admitted as the
	// head. Waiters returned to the front are not chosen again. It counts
	// admissions per class and tenant; it must not call the Queue.
	Chosen func(w *Waiter)
}

func (c Config) withDefaults() Config {
	if c.Share <= 0 {
		c.Share = DefaultShare
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = DefaultClaimTTL
	}
	return c
}

// Queue is the queue of one scope's waiting calls.
//
// Concurrency: a Queue is guarded by the lock given to New, which its
// owner also holds while it counts capacity, so that a release and its
// handoff are one step. Every method but Waiter.Wait must be called with
// that lock held; Wait takes it itself.
//
// The owner's protocol (what the memory limiter does):
//
//   - A new call (no Waiter) tries the gates only when Busy is false;
//     otherwise, or when a gate refuses, it calls Enqueue (with the
//     refusal's retry time) and waits.
//   - A unit that frees while Busy is handed on with Hand: when it
//     returns a waiter, the owner keeps the unit reserved for it under
//     the label (a count per label: the queue moves claims from waiter
//     to waiter and calls the unclaimed callback when a claim comes back
//     to no one).
//   - A waiter that Wait woke tries again: with its claim (Claim) when it
//     holds one — the reservation becomes its permit —, as the head
//     (Head) otherwise. It reports the answer: Admitted, or Requeue with
//     the refusal's retry time.
type Queue struct {
	mu        sync.Locker
	clock     core.Clock
	cfg       Config
	unclaimed func(label string)

	ord    order
	front  list // chosen once, refused again: first in line
	claims list // holding a claim, in the order the claims lapse
	seq    uint64
	// due is when the room the head waits for is expected (zero: the head
	// waits for a handoff); head is the head last told about it.
	due  time.Time
	head *Waiter
	est  interval
}

// New returns an empty queue guarded by mu, on clock. unclaimed is called
// (with mu held) when a claim on a unit of label comes back and no waiter
// is left to take it: the owner frees the unit then. It may be nil.
func New(cfg Config, clock core.Clock, mu sync.Locker, unclaimed func(label string)) *Queue {
	if unclaimed == nil {
		unclaimed = func(string) {}
	}
	cfg = cfg.withDefaults()
	return &Queue{mu: mu, clock: clock, cfg: cfg, unclaimed: unclaimed, ord: order{share: cfg.Share}}
}

// Waiter is one call waiting in a Queue. Its fields are guarded by the
// queue's lock.
type Waiter struct {
	q          *Queue
	prev, next *Waiter
	tenant     *tenant
	id         uint64
	claimEnd   time.Time
	label      string
	class      core.Priority
	state      state
	wake       chan struct{}
}

type state uint8

const (
	stateWaiting state = iota // in the order
	stateFront                // in front
	stateClaimed              // in claims
	stateLapsed               // its claim lapsed: it lost its place
	stateDone                 // admitted or left
)

// ID returns the waiter's number: 1 for the queue's first, and so on.
func (w *Waiter) ID() uint64 { return w.id }

// Busy reports whether waiters are in line (holders of claims aside): a
// new call must queue behind them rather than try the gates.
func (q *Queue) Busy() bool { return q.ord.len() > 0 || q.front.n > 0 }

// Enqueue adds a waiter of class and tenant at the back of its line.
// deadline (zero: none) is when the call must end: a waiter whose
// deadline cannot be met given the queue ahead is refused with a
// *core.QueueDeadlineError. retry is when the refusal that made the call wait
// expects room: > 0 a time, 0 none (a concurrency slot, which a release
// hands on); NoRetry for a call that queued without trying the gates. It
// matters only when the waiter becomes the head.
func (q *Queue) Enqueue(class core.Priority, name string, deadline time.Time, retry time.Duration) (*Waiter, error) {
	if !class.Valid() {
		return nil, &core.PriorityError{Value: strconv.Itoa(int(class))}
	}
	if len(name) > core.MaxTenant {
		return nil, core.ErrTenantTooLong
	}
	now := q.clock.Now()
	q.lapse(now)
	if !deadline.IsZero() {
		ahead := q.front.n + q.higher(class) + q.ord.ahead(class, name, q.count(class, name))
		if err := q.est.check(ahead, deadline.Sub(now)); err != nil {
			return nil, err
		}
	}
	if !q.Busy() {
		q.est.idle(now)
	}
	q.seq++
	w := &Waiter{q: q, id: q.seq, class: class, wake: make(chan struct{}, 1)}
	q.ord.add(w, name)
	if q.peek() == w && retry >= 0 {
		q.setDue(now, retry)
	}
	q.changed()
	return w, nil
}

// higher counts the waiters of the classes above c.
func (q *Queue) higher(c core.Priority) int {
	n := 0
	for d := range c.Rank() {
		n += q.ord.classes[d].n
	}
	return n
}

// count returns the number of waiters of tenant name in class c.
func (q *Queue) count(c core.Priority, name string) int {
	if t := q.ord.classes[c.Rank()].tenants[name]; t != nil {
		return t.n
	}
	return 0
}

// Head returns the waiter Hand would choose now, or nil.
func (q *Queue) Head() *Waiter { return q.peek() }

func (q *Queue) peek() *Waiter {
	if q.front.first != nil {
		return q.front.first
	}
	return q.ord.next()
}

// Hand hands a unit of label that has just freed to the next waiter: it
// is chosen, the unit is reserved for it for ClaimTTL, and it is woken.
// It returns the waiter, or nil when none is in line (the owner frees
// the unit then).
func (q *Queue) Hand(label string) *Waiter {
	now := q.clock.Now()
	q.lapse(now)
	w := q.hand(now, label)
	q.changed()
	return w
}

func (q *Queue) hand(now time.Time, label string) *Waiter {
	w := q.front.first
	if w != nil {
		q.front.remove(w)
	} else {
		if w = q.ord.next(); w == nil {
			return nil
		}
		q.choose(now, w)
	}
	w.state, w.label, w.claimEnd = stateClaimed, label, now.Add(q.cfg.ClaimTTL)
	q.claims.push(w)
	w.signal()
	return w
}

// choose takes w, in line, out as the one chosen.
func (q *Queue) choose(now time.Time, w *Waiter) {
	q.ord.serve(w)
	q.est.sample(now)
	if q.cfg.Chosen != nil {
		q.cfg.Chosen(w)
	}
}

// Claim returns the label of the unit reserved for w, if w holds a claim
// that has not lapsed.
func (q *Queue) Claim(w *Waiter) (label string, ok bool) {
	q.lapse(q.clock.Now())
	if w.state != stateClaimed {
		return "", false
	}
	return w.label, true
}

// Owns reports whether w is one of q's waiters.
func (q *Queue) Owns(w *Waiter) bool { return w != nil && w.q == q }

// Queued reports whether w is still in the queue (in line, or holding a
// claim).
func (q *Queue) Queued(w *Waiter) bool { return w.state <= stateClaimed }

// Admitted removes w, which got its permit: with its claim, or as the
// head (then it counts as chosen). The head that follows is woken when
// room is due.
func (q *Queue) Admitted(w *Waiter) {
	now := q.clock.Now()
	switch w.state {
	case stateClaimed:
		q.claims.remove(w)
	case stateFront:
		q.front.remove(w)
	case stateWaiting:
		q.choose(now, w)
	default:
		return
	}
	w.state = stateDone
	q.lapse(now)
	q.changed()
}

// Requeue puts w, refused again by a gate after it was woken, first in
// line: a holder of a claim goes to the back of the front (the owner has
// taken its reserved unit back), the head stays where it is. retry is
// when the refusal expects room (0: unknown, or a concurrency slot: the
// head then waits for a handoff).
func (q *Queue) Requeue(w *Waiter, retry time.Duration) {
	now := q.clock.Now()
	switch w.state {
	case stateClaimed:
		q.claims.remove(w)
		w.state, w.label = stateFront, ""
		q.front.push(w)
	case stateFront, stateWaiting:
	default:
		return
	}
	q.setDue(now, retry)
	q.lapse(now)
	q.changed()
}

// Leave removes w (its call was cancelled or reached its deadline). A
// claim it held goes to the next waiter.
func (q *Queue) Leave(w *Waiter) {
	q.leave(q.clock.Now(), w)
	q.changed()
}

func (q *Queue) leave(now time.Time, w *Waiter) {
	switch w.state {
	case stateWaiting:
		q.ord.remove(w)
	case stateFront:
		q.front.remove(w)
	case stateClaimed:
		q.claims.remove(w)
		if q.hand(now, w.label) == nil {
			q.unclaimed(w.label)
		}
	default:
		return
	}
	w.state = stateDone
}

// Lapse lets the claims not taken within ClaimTTL lapse: each goes to the
// next waiter, and its holder loses its place (Wait reports core.WaitLapsed). The
// other methods do it first; an owner calls it when it has nothing else
// to do with the queue.
func (q *Queue) Lapse() {
	q.lapse(q.clock.Now())
	q.changed()
}

func (q *Queue) lapse(now time.Time) {
	for w := q.claims.first; w != nil && !now.Before(w.claimEnd); w = q.claims.first {
		q.claims.remove(w)
		w.state = stateLapsed
		w.signal()
		if q.hand(now, w.label) == nil {
			q.unclaimed(w.label)
		}
	}
}

// setDue records when the head may find room: now+retry, or none.
func (q *Queue) setDue(now time.Time, retry time.Duration) {
	if retry > 0 {
		q.due = now.Add(retry)
	} else {
		q.due = time.Time{}
	}
}

// changed wakes the head when it is not the one last told, so that it
// holds the timer for the room that is due.
func (q *Queue) changed() {
	h := q.peek()
	if h == q.head {
		return
	}
	q.head = h
	if h != nil && !q.due.IsZero() {
		h.signal()
	}
}

// signal wakes w's Wait; a wake it has not consumed yet stands.
func (w *Waiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

var _ core.Waiter = (*Waiter)(nil)

// Wait blocks until w may try again or ctx ends: core.WaitClaimed with
// the label of the unit reserved for it as the event's Source and the
// time its claim has left (until it lapses) as ClaimLeft,
// core.WaitTurn when it is the head and the room it waits for is due,
// core.WaitLapsed when its claim lapsed. It starts no goroutine: it waits
// on w's channel and, when w is the head and room is due, on one timer of
// the queue's clock. When ctx ends, w leaves the queue (a claim it held
// goes on) and Wait returns a *core.CanceledError. A waiter already
// admitted or gone returns ErrDone. Wait takes the queue's lock itself.
func (w *Waiter) Wait(ctx context.Context) (core.WaitEvent, error) {
	q := w.q
	for {
		q.mu.Lock()
		now := q.clock.Now()
		q.lapse(now)
		q.changed()
		var d time.Duration = -1
		switch w.state {
		case stateClaimed:
			q.mu.Unlock()
			// lapse(now) took the claims that ended: some time is left.
			return core.WaitEvent{Kind: core.WaitClaimed, Source: w.label, ClaimLeft: w.claimEnd.Sub(now)}, nil
		case stateLapsed:
			w.state = stateDone
			q.mu.Unlock()
			return core.WaitEvent{Kind: core.WaitLapsed}, nil
		case stateDone:
			q.mu.Unlock()
			return core.WaitEvent{}, ErrDone
		}
		if q.peek() == w && !q.due.IsZero() {
			if !now.Before(q.due) {
				q.mu.Unlock()
				return core.WaitEvent{Kind: core.WaitTurn}, nil
			}
			d = q.due.Sub(now)
		}
		q.mu.Unlock()
		if err := w.block(ctx, d); err != nil {
			return core.WaitEvent{}, err
		}
	}
}

// Leave removes w from its queue as Queue.Leave does (a claim it held
// goes to the next waiter), taking the queue's lock itself; it does
// nothing for a waiter already admitted or gone. It never blocks on ctx.
func (w *Waiter) Leave(context.Context) {
	q := w.q
	q.mu.Lock()
	q.Leave(w)
	q.mu.Unlock()
}

// block waits for w's wake, d on the queue's clock (d < 0: no timer), or
// ctx; when ctx ends, w leaves.
func (w *Waiter) block(ctx context.Context, d time.Duration) error {
	q := w.q
	var (
		tc <-chan time.Time
		t  core.Timer
	)
	if d >= 0 {
		t = q.clock.NewTimer(d)
		tc = t.C()
	}
	select {
	case <-ctx.Done():
		q.mu.Lock()
		q.Leave(w)
		q.mu.Unlock()
		if t != nil {
			t.Stop()
		}
		return &core.CanceledError{Err: ctx.Err()}
	case <-w.wake:
	case <-tc:
	}
	if t != nil {
		t.Stop()
	}
	return nil
}

// list is an intrusive list of waiters (front, claims).
type list struct {
	first, last *Waiter
	n           int
}

func (l *list) push(w *Waiter) {
	w.prev, w.next = l.last, nil
	if l.last != nil {
		l.last.next = w
	} else {
		l.first = w
	}
	l.last = w
	l.n++
}

func (l *list) remove(w *Waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		l.first = w.next
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		l.last = w.prev
	}
	w.prev, w.next = nil, nil
	l.n--
}
