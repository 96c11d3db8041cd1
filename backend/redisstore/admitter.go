package redisstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

// Admitter is the native admission port of a Limiter and a Breaker of this
// package on the same client: Admit runs the breaker's Allow, the scope's
// fair queue and all the gates in one script, Finish the release, the
// handoff of what it frees, the settlement and the record in one script,
// so a governed call costs one round trip before the upstream call and one
// after. PushBack shares a 429's wait through the Breaker, and Admit
// honours it in its one script.
//
// # The queue
//
// With WithQueue, when a gate that frees by itself refuses (a concurrency
// gate, or a rate window that says when it has room), the call does not
// fail: it waits in
// its scope's queue, shared by every process on the same Redis and prefix
// (docs/explanation-queue.md): by priority class with a share rule for the
// lower ones, tenants in turn, in arrival order. Admit returns a ticket
// with Queued set; the caller waits on it and admits again with it
// (AdmitRequest.Waiter), on the source a claim names. A new call never
// passes waiters in line. A slot freed by Finish while waiters are in line
// is handed to the next of them at once: it stays reserved for it for
// QueueConfig.ClaimTTL and its process is woken. A circuit that refuses is
// not queued; a spend budget's refusal and a request no window can ever
// fit are not queued either (the ticket is refused as before); a deadline
// (the context's) that the line ahead cannot meet is refused with a
// *core.QueueDeadlineError. A call that does not wait costs nothing more
// than its two scripts. Without WithQueue a gate's refusal is a refused
// ticket, as core.ComposeAdmitter's.
//
// Every process has one subscriber connection (one per queue's slot on a
// Redis Cluster: a shard channel lives on its slot's node), opened by its
// first call that waits, on which the scripts publish (SPUBLISH) to the
// process's channel of the queue: a claim handed to one of its waiters,
// the head's turn when room in a rate window is due, an entry gone, a
// claim it granted taken. The subscriber's one goroutine dispatches them
// to the waiters in memory. A waiter waits on a channel of its own and, at
// the head, one timer; waiting runs no command.
//
// A script publishes to a process before it hands anything to it: a
// process whose subscriber is gone has its entries dropped as they come
// up. Every entry has a lease (QueueConfig.Lease, or to its deadline): a
// process that dies leaves no entry older, and scripts drop lapsed entries
// as they pass; a process renews its waiters' leases together, one script
// per queue every four fifths of the lease. A claim not taken within
// ClaimTTL (its holder died after it was woken) goes to the next waiter:
// the process that granted it checks it then, unless the holder's Admit
// told it that it was taken. After a reconnection of its subscriber a
// process asks for the state of its waiters, as it may have missed
// messages.
//
// # Healing
//
// A call whose Redis reply is lost must not keep its slots for the length
// of its lease. The Admitter gives them back by itself, by the lease it drew
// (leases are drawn by the client, so it knows them before the script runs):
//
//   - Admit fails (the script may have run: a reset connection or a
//     timeout, and go-redis may have sent it before the failure it reports
//     last, a failed dial of a retry, say): the call is refused with a
//     GovernanceBackendError, and a reclaim of the lease is queued: it frees whatever the script took and gives the probe back if
//     the script granted it to this lease, and refunds what it reserved on
//     the request's budgets. Where nothing was taken it leaves a
//     tombstone, so that a script that reaches Redis later still (a
//     command delayed on a dying connection) takes no slot and reserves
//     nothing. (A budget gets its tombstone only where its current window
//     has been started; a late Admit that finds none, or arrives in a
//     later window, keeps its reservation until that window ends, never
//     settled: the budget errs on the safe side.) A queue entry the lost
//     script may have made is a stray: a claim handed to it lapses to the
//     next waiter, and it lapses with its lease.
//   - Finish fails: a reclaim releases the permit, settled as Finish would
//     have (its budgets included), and gives back the probe if the attempt
//     held it. The outcome
//     itself is dropped: retrying it could count it twice (the record may
//     have been applied before the reply was lost), so the breaker misses
//     one sample rather than counting one twice, and a probe returns with
//     no verdict (the next caller probes again).
//
// Reclaims are idempotent. One worker goroutine runs them, retrying with a
// backoff (and at once whenever a script of this Admitter gets an answer
// again) until each has run once or the permit's lease has ended (then the
// slots have freed by themselves); it starts on the first reclaim and is
// stopped by Close. The queue is bounded; a reclaim that finds it full is
// dropped (its slots free when the lease ends). Failures are logged through
// the WithLogger logger, at most once per 10 s with a count of the rest.
//
// Nothing of this can let more calls through than the gates allow: a slot
// is given back only after its call has ended or was refused.
//
// # Bounds
//
// Every command is bounded by the caller's context when the client has
// ContextTimeoutEnabled (the clients made from REDIS_URL do; set it on a
// client of your own), and by the client's read and write timeouts
// otherwise. A slow or unreachable Redis fails the call with a
// GovernanceBackendError; nothing goes upstream unprotected.
//
// An Admitter is safe for concurrent use. Close it when done (it does not
// close the client; waiters still waiting are woken as lapsed). Create one
// with NewAdmitter.
type Admitter struct {
	l    *Limiter
	b    *Breaker
	heal *healer

	// The queue (queuing: WithQueue was given): its settings, this
	// process's name in it, its waker.
	queuing bool
	qcfg    QueueConfig
	proc    string
	wake    *waker
	// until returns the time left before ctx's deadline (untilDeadline).
	until func(ctx context.Context) (time.Duration, bool)
}

var (
	_ core.Admitter = (*Admitter)(nil)
	_ io.Closer     = (*Admitter)(nil)
)

// NewAdmitter returns the native Admitter of l and b, or nil when they do
// not share one client (compose them with core.ComposeAdmitter then).
// WithLogger and WithQueue apply; l and b keep their own prefix and clock.
func NewAdmitter(l *Limiter, b *Breaker, opts ...Option) *Admitter {
	if l == nil || b == nil || l.c != b.c {
		return nil
	}
	o := buildOptions(opts)
	a := &Admitter{l: l, b: b, proc: fmt.Sprintf("%016x", rand.Uint64()),
		until: untilDeadline}
	if o.queue != nil {
		a.queuing, a.qcfg = true, *o.queue
	}
	a.qcfg = a.qcfg.withDefaults()
	logger := o.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	clock := l.opt.clockOrSystem()
	a.heal = &healer{a: a, clock: clock, log: rateLog{log: logger, every: healLogEvery},
		jobs: make(chan *reclaim, healQueue), wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.wake = newWaker(a, logger)
	return a
}

// Admit implements core.Admitter: one script, the breaker's Allow (a
// source switched off is refused with Disabled, one pushed back with
// PushedBack, its pushback read in the same script), the scope's queue,
// the six gates and the budgets (see The queue). A scope whose permit and
// circuit name different pools (keys in different slots) is admitted as
// core.ComposeAdmitter would, in two round trips and without the queue
// (a waiter passed in leaves). A waiter that is not one of this
// Admitter's counts as a new call. A budget that cannot be enforced or a
// place the queue cannot keep fails it with a GovernanceBackendError,
// before any round trip; after any error a waiter passed in has left the
// queue.
func (a *Admitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	p := req.Permit
	c := admitCall{}
	if w, ok := p.Waiter.(*qwaiter); ok && w.a == a && a.queuing {
		c.w = w
	}
	p.Waiter = nil
	if p.Pool != req.Breaker.Pool {
		if c.w != nil {
			c.w.Leave(ctx)
		}
		req.Permit = p
		return core.ComposeAdmitter(a.l, a.b).Admit(ctx, req)
	}
	if err := p.Place.Check(); err != nil {
		if c.w != nil {
			c.w.Leave(ctx)
		}
		return core.Ticket{}, admitErr(err)
	}
	if len(p.Budgets) > 0 {
		if err := checkBudgets(p.Budgets); err != nil {
			return core.Ticket{}, admitErr(err)
		}
	}
	a.l.pools.note(p.Scope, p.Pool)
	c.k = a.l.queueKeysOf(p.Scope, p.Pool)
	listening := a.wake.listens(c.k)
	c.left, c.hasDL = a.until(ctx)
	c.now = a.l.opt.clockOrSystem().Now()
	c.dl = c.now.Add(c.left) // the deadline on the queue's clock
	lease := newLease(&p)
	keys, arg := a.admitArgs(&req, lease, &c)
	res, err := admitScript.Run(ctx, a.l.c, keys, arg).Int64Slice()
	if err != nil {
		if c.w != nil {
			c.w.Leave(context.WithoutCancel(ctx)) // bounded; else its entry lapses with its lease
		}
		if !errors.Is(err, redis.ErrClosed) {
			j := &reclaim{permit: core.Permit{Scope: p.Scope, Source: p.Source, Lease: lease, Budgets: p.Budgets},
				pool: p.Pool, settle: core.Settlement{Kind: core.SettleRefund}, probe: true, lost: c.w == nil}
			j.deadline, j.expires = leaseEnd(lease, a.heal.clock.Now())
			a.heal.add(j)
		}
		return core.Ticket{}, admitErr(fmt.Errorf("polygateway: redisstore: admit: %w", err))
	}
	a.heal.answered()
	a.wake.answered()
	if len(res) != admitReply {
		return core.Ticket{}, admitErr(fmt.Errorf("polygateway: redisstore: admit: unexpected reply %v", res))
	}
	t := core.Ticket{Admission: admission(res[:allowReply]), Breaker: req.Breaker}
	if !t.Admission.Allowed {
		if c.w != nil {
			a.wake.forget(c.w) // the script took it out of the queue
		}
		return t, nil
	}
	if t.Grant, err = a.l.grant(res[allowReply:allowReply+5], &p, lease, "admit"); err != nil {
		return core.Ticket{}, admitErr(err)
	}
	if err := a.queued(ctx, &t, res[allowReply+5:], &req, &c, listening); err != nil {
		return core.Ticket{}, err
	}
	return t, nil
}

// admitErr wraps an error of Admit as the port says.
func admitErr(err error) error {
	return &core.GovernanceBackendError{Backend: "limiter", Op: "admit", Err: err}
}

// admitArgs returns the keys and the argument of the admit script of req
// (lua/admit.lua) for an attempt holding lease: the levels' keys, the
// circuit, the queue's four, then the budgets' hashes.
func (a *Admitter) admitArgs(req *core.AdmitRequest, lease uint64, c *admitCall) ([]string, string) {
	p := &req.Permit
	sk := a.l.scriptKeys(p.Scope, p.Source, p.Pool)
	keys := append(append(make([]string, 0, circuitIndex+4+len(p.Budgets)), sk.withCircuit(a.l, a.b)...), c.k.keys[:]...)
	if len(p.Budgets) > 0 {
		keys = a.l.withBudgets(keys, p.Scope, p.Pool, p.Budgets)
	}
	w := newRequest()
	w.open()
	w.object("breaker")
	w.int("key", circuitIndex)
	a.b.writeAllow(w, &req.Breaker, strconv.FormatUint(lease, 10))
	w.close()
	w.object("limiter")
	a.l.writeAcquire(w, p, sk, lease, circuitIndex+4)
	w.close()
	a.writeAdmitQueue(w, c, p.Place, sk, circuitIndex+1)
	w.close()
	return keys, w.String()
}

// PushBack implements core.Admitter: it records the pushback on
// the Admitter's Breaker (Breaker.PushBack: one script, next to the
// circuit, under the breaker's prefix), which Admit reads in its own
// script at no extra round trip. A failure is returned as a
// GovernanceBackendError; d <= 0 records nothing.
func (a *Admitter) PushBack(ctx context.Context, scope, source string, cfg core.BreakerConfig, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := a.b.PushBack(ctx, scope, source, cfg, d); err != nil {
		return &core.GovernanceBackendError{Backend: "breaker", Op: "pushback", Err: err}
	}
	return nil
}

// Finish implements core.Admitter: one script, which also hands a slot it
// frees to the next waiter of the scope's queue (see The queue). On
// failure the release is retried in the background (see Healing); the
// outcome is dropped.
func (a *Admitter) Finish(ctx context.Context, t core.Ticket, s core.Settlement, o core.Outcome) (bool, error) {
	applied, _, err := a.finish(ctx, t, s, o)
	return applied, err
}

// finish is Finish; it also returns the queue's entry a slot went to (0:
// none).
func (a *Admitter) finish(ctx context.Context, t core.Ticket, s core.Settlement, o core.Outcome) (bool, uint64, error) {
	if !t.Admitted() {
		return false, 0, nil
	}
	p := t.Grant.Permit
	pool, ok := a.l.permitPool(p)
	if !ok || pool != t.Breaker.Pool {
		applied, err := core.ComposeAdmitter(a.l, a.b).Finish(ctx, t, s, o)
		return applied, 0, err
	}
	sk := a.l.scriptKeys(p.Scope, p.Source, pool)
	k := a.l.queueKeysOf(p.Scope, pool)
	keys := append(append(make([]string, 0, circuitIndex+4+len(p.Budgets)), sk.withCircuit(a.l, a.b)...), k.keys[:]...)
	if len(p.Budgets) > 0 {
		keys = a.l.withBudgets(keys, p.Scope, pool, p.Budgets)
	}
	w := newRequest()
	w.open()
	w.object("limiter")
	a.l.writeRelease(w, p, s, sk, false, circuitIndex+4)
	w.close()
	w.object("breaker")
	w.int("key", circuitIndex)
	a.b.writeRecord(w, t.Admission, o, &t.Breaker, p.Lease)
	w.close()
	w.object("queue")
	if a.queuing {
		a.writeQueue(w, k, circuitIndex+1, sk, func(i int) int64 { return int64(3*i + 1) })
		w.str("label", p.Source)
	} else {
		w.bool("off", true)
	}
	w.close()
	w.close()
	res, err := finishScript.Run(ctx, a.l.c, keys, w.String()).Int64Slice()
	if err == nil && len(res) != 3 {
		err = fmt.Errorf("unexpected reply %v", res)
	}
	if err != nil {
		j := &reclaim{permit: p, pool: pool, settle: s, probe: t.Admission.Probe}
		j.deadline, j.expires = leaseEnd(p.Lease, p.AcquiredAt)
		a.heal.add(j)
		return false, 0, &core.GovernanceBackendError{Backend: "limiter", Op: "finish",
			Err: fmt.Errorf("polygateway: redisstore: finish: %w", err)}
	}
	a.heal.answered()
	if res[1] > 0 {
		a.wake.granted(k, uint64(res[1]), p.Source)
		if !a.wake.listens(k) {
			// Hear the ends of the claims this process grants, so that
			// their holders' word spares it a check of each: once per
			// queue, bounded; a failure only leaves the checks to run.
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), queueOpTimeout)
			_ = a.wake.listen(lctx, k)
			cancel()
		}
	}
	return res[0] == 1, uint64(res[1]), nil
}

// Reclaiming reports how many reclaims are queued or waiting for a retry.
func (a *Admitter) Reclaiming() int { return int(a.heal.pending.Load()) }

// Close stops the queue's subscriber and checks (waiters still waiting
// are woken as lapsed), then the reclaim worker after one last try of what
// it still holds (bounded by one second when the client has
// ContextTimeoutEnabled; by its read timeout otherwise). It is idempotent
// and does not close the client.
func (a *Admitter) Close() error {
	a.wake.close()
	a.heal.close()
	return nil
}

// reclaim is one lease to give back.
type reclaim struct {
	permit core.Permit // Scope, Source, Lease
	pool   string
	settle core.Settlement
	// probe asks to give back the circuit's probe if this lease holds it.
	probe bool
	// lost says the lease is a new call's whose Admit lost its reply: the
	// entry it may have queued leaves the line.
	lost bool
	// deadline is when the lease ends at the latest (expires=false: never).
	deadline time.Time
	expires  bool
	due      time.Time
	tries    int
}

// run runs the reclaim script once.
func (a *Admitter) reclaim(ctx context.Context, j *reclaim) error {
	sk := a.l.scriptKeys(j.permit.Scope, j.permit.Source, j.pool)
	keys := sk.reclaimKeys(a.l, a.b)
	if len(j.permit.Budgets) > 0 {
		keys = a.l.withBudgets(keys, j.permit.Scope, j.pool, j.permit.Budgets)
	}
	w := newRequest()
	w.open()
	a.l.writeRelease(w, j.permit, j.settle, sk, true, goneIndex(numLevels-1))
	if j.probe {
		w.object("circuit")
		w.int("key", circuitIndex)
		w.str("holder", strconv.FormatUint(j.permit.Lease, 10))
		w.close()
	}
	var k *queueKeys
	if a.queuing {
		// A slot freed here goes to the queue's next waiter, as in finish.
		k = a.l.queueKeysOf(j.permit.Scope, j.pool)
		qs := int64(len(keys) + 1)
		keys = append(keys, k.keys[:]...)
		w.object("queue")
		a.writeQueue(w, k, qs, sk, func(i int) int64 { return int64(3*i + 1) })
		w.str("label", j.permit.Source)
		if j.lost {
			w.str("mb", strconv.FormatUint(j.permit.Lease, 10))
		}
		w.close()
	}
	w.close()
	res, err := reclaimScript.Run(ctx, a.l.c, keys, w.String()).Slice()
	if err != nil {
		return err
	}
	to, hold, label, err := reclaimReply(res)
	if err != nil || k == nil {
		return err
	}
	if to > 0 {
		a.wake.granted(k, uint64(to), j.permit.Source)
	}
	if hold > 0 {
		// The lost Admit's entry holds a claim of another source: it
		// leaves with that source's keys, so its reserved slot goes on.
		_, err = a.leave(ctx, k, uint64(hold), label)
	}
	return err
}

// reclaimReply reads the reclaim script's reply: the entry a unit went to,
// and the entry to take out with a leave of label (0: none).
func reclaimReply(res []any) (to, hold int64, label string, err error) {
	if len(res) == 3 {
		var ok1, ok2, ok3 bool
		to, ok1 = res[0].(int64)
		hold, ok2 = res[1].(int64)
		label, ok3 = res[2].(string)
		if ok1 && ok2 && ok3 {
			return to, hold, label, nil
		}
	}
	return 0, 0, "", fmt.Errorf("polygateway: redisstore: reclaim: unexpected reply %v", res)
}

// Bounds of the reclaim worker.
const (
	healQueue      = 1024        // reclaims handed over and not yet taken
	healPending    = 4096        // reclaims the worker holds for retries
	healTimeout    = time.Second // one reclaim attempt
	healBackoffMin = 50 * time.Millisecond
	healBackoffMax = 2 * time.Second
	healLogEvery   = 10 * time.Second // at most one warning per this
)

// healer is the Admitter's reclaim queue and its one worker.
type healer struct {
	a       *Admitter
	clock   core.Clock
	log     rateLog
	jobs    chan *reclaim
	wake    chan struct{} // Redis answered: retry now
	stop    chan struct{}
	done    chan struct{}
	pending atomic.Int64

	mu      sync.Mutex
	started bool
	closed  bool
}

// add queues j, starting the worker on first use. It never blocks.
func (h *healer) add(j *reclaim) {
	if j.permit.Lease&leaseLevels == 0 && !j.probe && len(j.permit.Budgets) == 0 {
		return // nothing was stored
	}
	j.due = h.clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		h.log.warn(j.due, "polygateway: redisstore: admitter closed; a failed call's slots free when their lease ends",
			"scope", j.permit.Scope, "source", j.permit.Source)
		return
	}
	if !h.started {
		h.started = true
		go h.run()
	}
	select {
	case h.jobs <- j:
		h.pending.Add(1)
	default:
		h.log.warn(j.due, "polygateway: redisstore: reclaim queue full; a failed call's slots free when their lease ends",
			"scope", j.permit.Scope, "source", j.permit.Source)
	}
}

// answered tells the worker that Redis answers again: reclaims waiting
// for their backoff are retried at once. It costs an atomic load when
// nothing waits.
func (h *healer) answered() {
	if h.pending.Load() == 0 {
		return
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// close stops the worker, if it started, and waits for it.
func (h *healer) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	started := h.started
	h.mu.Unlock()
	if started {
		close(h.stop)
		<-h.done
	}
}

// run is the worker: it takes reclaims, runs those that are due, and
// retries the failed ones with a backoff.
func (h *healer) run() {
	defer close(h.done)
	var pending []*reclaim
	for {
		var wake <-chan time.Time
		var timer core.Timer
		if len(pending) > 0 {
			next := pending[0].due
			for _, j := range pending[1:] {
				if j.due.Before(next) {
					next = j.due
				}
			}
			timer = h.clock.NewTimer(max(next.Sub(h.clock.Now()), 0))
			wake = timer.C()
		}
		select {
		case j := <-h.jobs:
			pending = h.take(pending, j)
		case <-wake:
		case <-h.wake:
			now := h.clock.Now()
			for _, j := range pending {
				j.due = now
			}
		case <-h.stop:
			if timer != nil {
				timer.Stop()
			}
			h.flush(pending)
			return
		}
		if timer != nil {
			timer.Stop()
		}
		for more := true; more; {
			select {
			case j := <-h.jobs:
				pending = h.take(pending, j)
			default:
				more = false
			}
		}
		pending = h.attempt(pending)
	}
}

// take adds j to the worker's reclaims, within their bound.
func (h *healer) take(pending []*reclaim, j *reclaim) []*reclaim {
	if len(pending) >= healPending {
		h.pending.Add(-1)
		h.log.warn(h.clock.Now(), "polygateway: redisstore: too many reclaims waiting; a failed call's slots free when their lease ends",
			"scope", j.permit.Scope, "source", j.permit.Source)
		return pending
	}
	return append(pending, j)
}

// attempt runs the due reclaims. After the first failure the rest wait
// for the same backoff: Redis is most likely unreachable for all of them.
func (h *healer) attempt(pending []*reclaim) []*reclaim {
	now := h.clock.Now()
	kept := pending[:0]
	var failedUntil time.Time
	for _, j := range pending {
		switch {
		case j.expires && !now.Before(j.deadline):
			h.pending.Add(-1) // the lease has ended: nothing is held any more
			continue
		case j.due.After(now):
		case !failedUntil.IsZero():
			j.due = failedUntil
		default:
			ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
			err := h.a.reclaim(ctx, j)
			cancel()
			if err == nil {
				h.pending.Add(-1)
				continue
			}
			j.tries++
			j.due = now.Add(backoff(j.tries))
			failedUntil = j.due
			h.log.warn(now, "polygateway: redisstore: cannot give back a failed call's slots yet; retrying",
				"scope", j.permit.Scope, "source", j.permit.Source, "waiting", len(pending), "err", err)
		}
		kept = append(kept, j)
	}
	clear(pending[len(kept):])
	return kept
}

// flush gives every reclaim still held one last try, all within healTimeout.
func (h *healer) flush(pending []*reclaim) {
	for more := true; more; {
		select {
		case j := <-h.jobs:
			pending = append(pending, j)
		default:
			more = false
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), healTimeout)
	defer cancel()
	failed := 0
	for _, j := range pending {
		if ctx.Err() != nil || h.a.reclaim(ctx, j) != nil {
			failed++
		}
		h.pending.Add(-1)
	}
	if failed > 0 {
		h.log.warn(h.clock.Now(), "polygateway: redisstore: admitter closed with reclaims that did not land; their slots free when their leases end",
			"dropped", failed)
	}
}

// backoff is the wait before retry n (from 1): doubling from
// healBackoffMin up to healBackoffMax.
func backoff(n int) time.Duration {
	d := healBackoffMin
	for i := 1; i < n && d < healBackoffMax; i++ {
		d *= 2
	}
	return min(d, healBackoffMax)
}

// rateLog writes at most one warning per every, with the count of those
// it held back since the last one. Safe for concurrent use.
type rateLog struct {
	log   *slog.Logger
	every time.Duration

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *rateLog) warn(now time.Time, msg string, args ...any) {
	r.mu.Lock()
	if d := now.Sub(r.last); !r.last.IsZero() && d >= 0 && d < r.every {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	n := r.suppressed
	r.suppressed, r.last = 0, now
	r.mu.Unlock()
	r.log.Warn(msg, append(args, "suppressed", n)...)
}
