package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

// Bounds of the waking.
const (
	// maxWakeMessage bounds a message read from a queue channel.
	maxWakeMessage = 1024
	// queueOpTimeout bounds a script the waking runs on its own (a leave
	// for an entry no waiter knows, a check, a resync).
	queueOpTimeout = time.Second
	// checkGrace is how long after a claim's end its grantor checks it,
	// so that a holder taking it at the last moment is not raced.
	checkGrace = 100 * time.Millisecond
	// resyncBatch is how many waiters one resync script reports on.
	resyncBatch = 1000
	// maxEarly bounds the messages kept for entries not known yet, and
	// earlyFor how long one is kept.
	maxEarly = 4096
	earlyFor = 10 * time.Second
)

// wakeMsg is a message of a queue's script to a process
// (lua/lib/queue.lua): K is "claim" (a unit reserved for the waiter ID,
// of label Lb, for At µs), "turn" (the waiter ID is the head; room is due in At µs),
// "gone" (the entry ID was dropped) or "ack" (the claim ID this process
// granted ended).
type wakeMsg struct {
	K  string `json:"k"`
	ID uint64 `json:"id"`
	Lb string `json:"lb"`
	At int64  `json:"at"`
}

// errWakeMsg is the error of a message that is not one.
var errWakeMsg = errors.New("polygateway: redisstore: not a queue message")

// parseWakeMsg reads a message from a queue channel. It accepts only
// what the scripts send: a small object of a known kind, a positive id,
// no negative time.
func parseWakeMsg(payload string) (wakeMsg, error) {
	var m wakeMsg
	if len(payload) > maxWakeMessage {
		return m, errWakeMsg
	}
	if err := json.Unmarshal([]byte(payload), &m); err != nil {
		return wakeMsg{}, fmt.Errorf("%w: %w", errWakeMsg, err)
	}
	switch {
	case m.ID == 0, m.At < 0:
		return wakeMsg{}, errWakeMsg
	case m.K == "claim", m.K == "turn", m.K == "gone", m.K == "ack":
		return m, nil
	}
	return wakeMsg{}, errWakeMsg
}

// waiter events.
const (
	evNone uint8 = iota
	evClaim
	evGone
)

// qwaiter is a call waiting in an Admitter's queue: the core.Waiter of a
// queued ticket. Wait on it; when it returns, admit again with it (on the
// claim's source after a claim).
type qwaiter struct {
	a      *Admitter
	k      *queueKeys
	id     uint64
	source string // the source of its last Admit
	// dl is the call's deadline, on the queue's clock.
	dl    time.Time
	hasDL bool
	wake  chan struct{}

	// guarded by the waker's mu
	lease  time.Time // when the entry's lease ends, on the queue's clock
	ev     uint8
	label  string
	turn   bool
	turnAt time.Time
	// claimEnd is when the claim of the last "claim" message lapses, on
	// the queue's clock, from when the message was read (zero: unknown).
	claimEnd time.Time
}

// ID returns the waiter's entry in its queue.
func (w *qwaiter) ID() uint64 { return w.id }

var _ core.Waiter = (*qwaiter)(nil)

// waitKey names a waiter: its queue's channel prefix and its id.
type waitKey struct {
	queue string
	id    uint64
}

// grant is a claim this process handed out and has not heard the end of.
type grant struct {
	k     *queueKeys
	label string
	check time.Time
}

// waker is an Admitter's queue subscriber: one PubSub (one per slot's node on a
// cluster), one goroutine reading it, and the waiters it dispatches to;
// and the checks of the claims it granted, run by a second goroutine
// when one is due.
type waker struct {
	a       *Admitter
	cluster bool

	mu        sync.Mutex
	closed    bool
	subs      map[string]*subscriber // by tag on a cluster, "" otherwise
	listening map[string]*queueKeys  // confirmed channels
	chanKeys  map[string]*queueKeys  // every channel asked for
	waiters   map[waitKey]*qwaiter
	grants    map[waitKey]grant
	// early holds messages for entries this process has not registered
	// yet: the script that made an entry may tell it something before its
	// reply reaches the caller.
	early map[waitKey]earlyMsg
	// acks holds the ends heard of claims this process granted before
	// their grant was noted (the holder may take a claim before the
	// granting script's reply is read), by when they were heard.
	acks map[waitKey]time.Time
	// abandoned holds the entries whose waiters left while their leave
	// failed, to take out of line when Redis answers (queue_abandon.go).
	abandoned map[waitKey]abandoned
	// anyAbandoned is set while abandoned may hold entries, so that a
	// script Redis answered can make their leaves due without the lock.
	anyAbandoned atomic.Bool
	pruned       time.Time
	// renewals holds, per queue with waiters of this process, when their
	// leases are next renewed.
	renewals map[*queueKeys]time.Time
	kick     chan struct{}
	checking bool
	wg       sync.WaitGroup
	stop     chan struct{}
	log      rateLog
}

func newWaker(a *Admitter, logger *slog.Logger) *waker {
	_, cluster := a.l.c.(*redis.ClusterClient)
	return &waker{a: a, cluster: cluster, subs: map[string]*subscriber{}, listening: map[string]*queueKeys{}, chanKeys: map[string]*queueKeys{},
		waiters: map[waitKey]*qwaiter{}, grants: map[waitKey]grant{}, early: map[waitKey]earlyMsg{}, acks: map[waitKey]time.Time{},
		abandoned: map[waitKey]abandoned{}, renewals: map[*queueKeys]time.Time{}, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), log: rateLog{log: logger, every: healLogEvery}}
}

// earlyMsg is a message kept for an entry not known yet.
type earlyMsg struct {
	m  wakeMsg
	at time.Time
}

// subscriber is one PubSub and its channels waiting for confirmation.
type subscriber struct {
	ps      *redis.PubSub
	pending map[string]chan struct{} // guarded by the waker's mu
}

// listen makes sure this process hears k's channel: the first time, it
// subscribes and waits for the confirmation.
func (wk *waker) listen(ctx context.Context, k *queueKeys) error {
	ch := wk.a.channel(k)
	wk.mu.Lock()
	if wk.closed {
		wk.mu.Unlock()
		return errors.New("polygateway: redisstore: admitter closed")
	}
	if wk.listening[ch] != nil {
		wk.mu.Unlock()
		return nil
	}
	tag := ""
	if wk.cluster {
		tag = k.tag
	}
	sub := wk.subs[tag]
	done := make(chan struct{})
	if sub == nil {
		sub = &subscriber{pending: map[string]chan struct{}{ch: done}}
		sub.ps = wk.a.l.c.SSubscribe(ctx, ch)
		wk.subs[tag] = sub
		wk.wg.Add(1)
		go wk.read(sub)
	} else if p := sub.pending[ch]; p != nil {
		done = p
	} else {
		sub.pending[ch] = done
		if err := sub.ps.SSubscribe(ctx, ch); err != nil {
			delete(sub.pending, ch)
			wk.mu.Unlock()
			return fmt.Errorf("polygateway: redisstore: queue subscribe: %w", err)
		}
	}
	wk.pendingKeys(ch, k)
	wk.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("polygateway: redisstore: queue subscribe: %w", ctx.Err())
	}
}

// listens reports whether this process hears k's channel already.
func (wk *waker) listens(k *queueKeys) bool {
	ch := wk.a.channel(k)
	wk.mu.Lock()
	defer wk.mu.Unlock()
	return wk.listening[ch] != nil
}

// pendingKeys remembers which queue a channel is (mu held).
func (wk *waker) pendingKeys(ch string, k *queueKeys) {
	wk.chanKeys[ch] = k
}

// read is a subscriber's goroutine: it confirms subscriptions, resyncs
// the waiters of a channel subscribed again after a reconnection, and
// dispatches messages. It ends when the PubSub is closed.
func (wk *waker) read(sub *subscriber) {
	defer wk.wg.Done()
	ctx := context.Background()
	fails := 0
	for {
		msg, err := sub.ps.Receive(ctx)
		if err != nil {
			if errors.Is(err, redis.ErrClosed) {
				return
			}
			fails++
			wk.log.warn(time.Now(), "polygateway: redisstore: queue subscriber failed; reconnecting", "err", err)
			if !wk.pause(backoff(fails)) {
				return
			}
			continue
		}
		fails = 0
		switch m := msg.(type) {
		case *redis.Subscription:
			wk.confirmed(sub, m.Channel)
		case *redis.Message:
			wk.dispatch(m.Channel, m.Payload)
		}
	}
}

// pause waits d unless the waker closes; it reports whether to go on. It
// paces reconnections on the wall clock, not the Limiter's: a test's fake
// clock must not hold a subscriber off Redis.
func (wk *waker) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-wk.stop:
		return false
	}
}

// confirmed notes the subscription of ch; one that was confirmed before
// is a resubscription after a reconnection: messages may have been lost,
// so the waiters of ch ask for their state.
func (wk *waker) confirmed(sub *subscriber, ch string) {
	wk.mu.Lock()
	k := wk.chanKeys[ch]
	if done := sub.pending[ch]; done != nil {
		delete(sub.pending, ch)
		wk.listening[ch] = k
		close(done)
		wk.mu.Unlock()
		return
	}
	if k == nil {
		wk.mu.Unlock()
		return
	}
	var ws []*qwaiter
	for key, w := range wk.waiters {
		if key.queue == k.prefix {
			ws = append(ws, w)
		}
	}
	wk.mu.Unlock()
	wk.resync(k, ws)
}

// dispatch hands a message of channel ch to its waiter.
func (wk *waker) dispatch(ch, payload string) {
	m, err := parseWakeMsg(payload)
	if err != nil {
		wk.log.warn(time.Now(), "polygateway: redisstore: dropped a message on a queue channel", "err", err)
		return
	}
	wk.mu.Lock()
	k := wk.listening[ch]
	if k == nil {
		wk.mu.Unlock()
		return
	}
	key := waitKey{k.prefix, m.ID}
	if m.K == "ack" {
		if _, ok := wk.grants[key]; ok {
			delete(wk.grants, key)
		} else if len(wk.acks) < maxEarly {
			wk.acks[key] = time.Now()
		}
		wk.mu.Unlock()
		return
	}
	w := wk.waiters[key]
	if w == nil && wk.heardAbandoned(key, m) {
		wk.mu.Unlock()
		return
	}
	if w == nil {
		// Its Admit's reply has not been read yet (or was lost: then the
		// entry lapses with its claim and its lease).
		if len(wk.early) < maxEarly {
			wk.early[key] = earlyMsg{m: m, at: time.Now()}
		}
		wk.mu.Unlock()
		return
	}
	wk.apply1(w, key, m)
	wk.mu.Unlock()
	w.signal()
}

// apply1 applies message m to w (mu held).
func (wk *waker) apply1(w *qwaiter, key waitKey, m wakeMsg) {
	switch m.K {
	case "claim":
		w.ev, w.label, w.turn, w.claimEnd = evClaim, m.Lb, false, time.Time{}
		if m.At > 0 {
			w.claimEnd = wk.a.l.opt.clockOrSystem().Now().Add(fromMicros(m.At))
		}
	case "gone":
		w.ev = evGone
		delete(wk.waiters, key)
	case "turn":
		w.turn, w.turnAt = true, wk.a.l.opt.clockOrSystem().Now().Add(fromMicros(m.At))
	}
}

// add registers the waiter of entry id.
func (wk *waker) add(k *queueKeys, id uint64, source string, dl time.Time, hasDL bool) *qwaiter {
	now := wk.a.l.opt.clockOrSystem().Now()
	w := &qwaiter{a: wk.a, k: k, id: id, source: source, dl: dl, hasDL: hasDL, wake: make(chan struct{}, 1)}
	w.lease = wk.a.leaseEnd(now, dl, hasDL)
	key := waitKey{k.prefix, id}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if old := wk.waiters[key]; old != nil {
		// Its id was given again: the queue's keys were lost (a restart
		// of Redis) and the ids count from 1 again, so its entry is gone.
		old.ev = evGone
		old.signal()
	}
	wk.waiters[key] = w
	if _, ok := wk.renewals[k]; !ok && !wk.closed {
		wk.renewals[k] = now.Add(wk.a.qcfg.Lease * 4 / 5)
		wk.startChecks()
	}
	if e, ok := wk.early[key]; ok {
		delete(wk.early, key)
		wk.apply1(w, key, e.m)
		w.signal()
	}
	if t := time.Now(); len(wk.early)+len(wk.acks) > 0 && t.Sub(wk.pruned) > time.Second {
		wk.pruned = t
		for k, e := range wk.early {
			if t.Sub(e.at) > earlyFor {
				delete(wk.early, k)
			}
		}
		for k, at := range wk.acks {
			if t.Sub(at) > earlyFor {
				delete(wk.acks, k)
			}
		}
	}
	return w
}

// forget unregisters w.
func (wk *waker) forget(w *qwaiter) {
	key := waitKey{w.k.prefix, w.id}
	wk.mu.Lock()
	if wk.waiters[key] == w {
		delete(wk.waiters, key)
	}
	wk.mu.Unlock()
}

// granted notes a claim this process handed to entry id of k: unless the
// claim's end is heard of first, it is checked after its end.
func (wk *waker) granted(k *queueKeys, id uint64, label string) {
	at := wk.a.l.opt.clockOrSystem().Now().Add(wk.a.qcfg.ClaimTTL + checkGrace)
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.closed {
		return
	}
	key := waitKey{k.prefix, id}
	if _, ok := wk.acks[key]; ok {
		delete(wk.acks, key) // taken already
		return
	}
	wk.grants[key] = grant{k: k, label: label, check: at}
	wk.startChecks()
}

// startChecks starts the checks goroutine, or wakes it to look at what
// was added (mu held).
func (wk *waker) startChecks() {
	if !wk.checking {
		wk.checking = true
		wk.wg.Add(1)
		go wk.checks()
	}
	select {
	case wk.kick <- struct{}{}:
	default:
	}
}

// checks is the goroutine of the process's own work on its queues: the
// checks of the claims it granted and has not heard the end of, due a
// little after their end (they let the claims lapse to the next waiters),
// and the renewals of its waiters' leases, one script per queue every
// four fifths of QueueConfig.Lease. It sleeps until the earliest is due.
func (wk *waker) checks() {
	defer wk.wg.Done()
	clk := wk.a.l.opt.clockOrSystem()
	for {
		wk.mu.Lock()
		now := clk.Now()
		var due []grant
		var renew []*queueKeys
		next := time.Time{}
		soonest := func(t time.Time) {
			if next.IsZero() || t.Before(next) {
				next = t
			}
		}
		for key, g := range wk.grants {
			if !now.Before(g.check) {
				due = append(due, g)
				delete(wk.grants, key)
			} else {
				soonest(g.check)
			}
		}
		for k, at := range wk.renewals {
			if !now.Before(at) {
				renew = append(renew, k)
			} else {
				soonest(at)
			}
		}
		gone, retry := wk.dueAbandoned(now)
		if !retry.IsZero() {
			soonest(retry)
		}
		wk.mu.Unlock()
		for _, g := range due {
			wk.check(g.k, g.label)
		}
		for _, k := range renew {
			wk.renew(k, now)
		}
		wk.retryLeaves(now, gone)
		if len(due)+len(renew)+len(gone) > 0 {
			continue // look again: the work took time
		}
		if !wk.sleep(clk, now, next) {
			return
		}
	}
}

// sleep waits until next (zero: until kicked) or a kick; it reports
// false when the waker closes.
func (wk *waker) sleep(clk core.Clock, now, next time.Time) bool {
	var tc <-chan time.Time
	if !next.IsZero() {
		t := clk.NewTimer(next.Sub(now))
		defer t.Stop()
		tc = t.C()
	}
	select {
	case <-wk.stop:
		return false
	case <-wk.kick:
	case <-tc:
	}
	return true
}

// renew renews, in one script, the leases of this process's waiters of
// k that would end before the next renewal, and schedules that one (none
// when k has no waiter of this process left).
func (wk *waker) renew(k *queueKeys, now time.Time) {
	lease := wk.a.qcfg.Lease
	wk.mu.Lock()
	var ws []*qwaiter
	for key, w := range wk.waiters {
		if key.queue == k.prefix && w.lease.Before(now.Add(lease)) && w.lease.Before(wk.a.leaseEnd(now, w.dl, w.hasDL)) {
			ws = append(ws, w)
		}
	}
	left := false
	for key := range wk.waiters {
		if key.queue == k.prefix {
			left = true
			break
		}
	}
	if left {
		wk.renewals[k] = now.Add(lease * 4 / 5)
	} else {
		delete(wk.renewals, k)
	}
	wk.mu.Unlock()
	for batch := range slices.Chunk(ws, resyncBatch) {
		ctx, cancel := context.WithTimeout(context.Background(), queueOpTimeout)
		states, err := wk.a.states(ctx, k, batch, batch)
		cancel()
		if err != nil {
			wk.log.warn(time.Now(), "polygateway: redisstore: cannot renew the leases of waiters; they lapse unless renewed",
				"scope", k.scope, "err", err)
			wk.mu.Lock()
			wk.renewals[k] = now.Add(lease / 10) // try again sooner
			wk.mu.Unlock()
			return
		}
		wk.mu.Lock()
		for _, w := range batch {
			w.lease = wk.a.leaseEnd(now, w.dl, w.hasDL)
		}
		wk.mu.Unlock()
		wk.apply(batch, states)
	}
}

// check runs the check script on k with label's slots: claims that
// lapsed move on.
func (wk *waker) check(k *queueKeys, label string) {
	ctx, cancel := context.WithTimeout(context.Background(), queueOpTimeout)
	defer cancel()
	if err := wk.a.runQueue(ctx, queueCheckScript, k, label, func(*request) {}).Err(); err != nil {
		wk.log.warn(time.Now(), "polygateway: redisstore: cannot check a claim; it lapses at the next use of the queue",
			"scope", k.scope, "err", err)
	}
}

// resync asks for the state of ws, waiters of k, after a reconnection.
func (wk *waker) resync(k *queueKeys, ws []*qwaiter) {
	for batch := range slices.Chunk(ws, resyncBatch) {
		ctx, cancel := context.WithTimeout(context.Background(), queueOpTimeout)
		states, err := wk.a.states(ctx, k, batch, nil)
		cancel()
		if err != nil {
			wk.log.warn(time.Now(), "polygateway: redisstore: cannot read the queue's state after a reconnection",
				"scope", k.scope, "err", err)
			return
		}
		wk.apply(batch, states)
	}
}

// waitState is a waiter's state as the check script reports it.
type waitState struct {
	state int64 // 0 gone, 1 waiting, 2 holding a claim
	turn  int64 // µs until the head's room is due; -1 none
	label string
}

// states runs the check script for ws (renewing the leases of renew) and
// returns their states.
func (a *Admitter) states(ctx context.Context, k *queueKeys, ws, renew []*qwaiter) ([]waitState, error) {
	now := a.l.opt.clockOrSystem().Now()
	res, err := a.runQueue(ctx, queueCheckScript, k, "", func(w *request) {
		w.array("ids")
		for _, x := range ws {
			w.elem(int64(x.id))
		}
		w.end()
		w.array("renew")
		for _, x := range renew {
			w.elem(int64(x.id))
		}
		w.end()
		w.array("lease")
		for _, x := range renew {
			w.elem(micros(a.leaseEnd(now, x.dl, x.hasDL).Sub(now)))
		}
		w.end()
	}).Slice()
	if err != nil {
		return nil, fmt.Errorf("polygateway: redisstore: queue check: %w", err)
	}
	if len(res) != 3*len(ws) {
		return nil, fmt.Errorf("polygateway: redisstore: queue check: unexpected reply of %d values", len(res))
	}
	out := make([]waitState, len(ws))
	for i := range out {
		s, ok1 := res[3*i].(int64)
		t, ok2 := res[3*i+1].(int64)
		l, ok3 := res[3*i+2].(string)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("polygateway: redisstore: queue check: unexpected reply %v", res[3*i:3*i+3])
		}
		out[i] = waitState{state: s, turn: t, label: l}
	}
	return out, nil
}

// apply sets what the check script reported of ws and wakes them.
func (wk *waker) apply(ws []*qwaiter, states []waitState) {
	now := wk.a.l.opt.clockOrSystem().Now()
	wk.mu.Lock()
	for i, w := range ws {
		switch s := states[i]; s.state {
		case 0:
			w.ev = evGone
			if key := (waitKey{w.k.prefix, w.id}); wk.waiters[key] == w {
				delete(wk.waiters, key)
			}
		case 2:
			w.ev, w.label, w.claimEnd = evClaim, s.label, time.Time{}
		default:
			if s.turn >= 0 {
				w.turn, w.turnAt = true, now.Add(fromMicros(s.turn))
			}
		}
	}
	wk.mu.Unlock()
	for _, w := range ws {
		w.signal()
	}
}

// close stops the goroutines and wakes every waiter as gone.
func (wk *waker) close() {
	wk.mu.Lock()
	if wk.closed {
		wk.mu.Unlock()
		return
	}
	wk.closed = true
	close(wk.stop)
	subs := wk.subs
	ws := make([]*qwaiter, 0, len(wk.waiters))
	for _, w := range wk.waiters {
		w.ev = evGone
		ws = append(ws, w)
	}
	clear(wk.waiters)
	wk.mu.Unlock()
	for _, s := range subs {
		_ = s.ps.Close()
	}
	wk.wg.Wait()
	for _, w := range ws {
		w.signal()
	}
}

func (w *qwaiter) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// setTurn notes the admit script's word on the head's room: µs until due,
// or -1.
func (w *qwaiter) setTurn(us int64) {
	wk := w.a.wake
	wk.mu.Lock()
	w.turn = us >= 0
	if w.turn {
		w.turnAt = w.a.l.opt.clockOrSystem().Now().Add(fromMicros(us))
	}
	wk.mu.Unlock()
}

// Wait implements core.Waiter: it blocks until w may admit again or ctx
// ends. It returns core.WaitClaimed with the source whose slot is reserved
// for it (and, when the claim's message said, the time the claim has left,
// counted from when the message was read), core.WaitTurn when it is the head and room is due, or
// core.WaitLapsed when its place is gone (it admits again as a new call,
// without its waiter). It runs no command
// while it waits (its process renews the leases of all its waiters of a
// queue together, see Admitter). When ctx ends, w leaves the queue (a claim it
// held goes on) and Wait returns a *core.CanceledError.
func (w *qwaiter) Wait(ctx context.Context) (core.WaitEvent, error) {
	wk := w.a.wake
	clk := w.a.l.opt.clockOrSystem()
	for {
		wk.mu.Lock()
		now := clk.Now()
		switch w.ev {
		case evClaim:
			w.ev = evNone
			ev := core.WaitEvent{Kind: core.WaitClaimed, Source: w.label}
			if !w.claimEnd.IsZero() {
				// At least a moment: 0 would say the end is unknown.
				ev.ClaimLeft = max(w.claimEnd.Sub(now), time.Microsecond)
			}
			wk.mu.Unlock()
			return ev, nil
		case evGone:
			wk.mu.Unlock()
			return core.WaitEvent{Kind: core.WaitLapsed}, nil
		}
		d := time.Duration(-1)
		if w.turn {
			if !now.Before(w.turnAt) {
				w.turn = false
				wk.mu.Unlock()
				return core.WaitEvent{Kind: core.WaitTurn}, nil
			}
			d = w.turnAt.Sub(now)
		}
		wk.mu.Unlock()
		if err := w.block(ctx, clk, d); err != nil {
			return core.WaitEvent{}, err
		}
	}
}

// block waits for w's wake, d on clk (d < 0: no timer), or ctx; when ctx
// ends, w leaves the queue.
func (w *qwaiter) block(ctx context.Context, clk core.Clock, d time.Duration) error {
	var tc <-chan time.Time
	if d >= 0 {
		t := clk.NewTimer(d)
		defer t.Stop()
		tc = t.C()
	}
	select {
	case <-ctx.Done():
		w.Leave(context.WithoutCancel(ctx))
		return &core.CanceledError{Err: ctx.Err()}
	case <-w.wake:
	case <-tc:
	}
	return nil
}

// Leave takes w out of the queue (a claim it held goes on to the next
// waiter), bounded by queueOpTimeout. Wait does it when its context
// ends; a caller that stops waiting otherwise calls it. On a failure the
// process takes the entry out once Redis answers again (retried with
// backoff; see queue_abandon.go), or it lapses with its lease.
func (w *qwaiter) Leave(ctx context.Context) { w.leave(ctx) }

// leave is Leave; it returns the entry a claim went to (0: none).
func (w *qwaiter) leave(ctx context.Context) uint64 {
	wk := w.a.wake
	key := waitKey{w.k.prefix, w.id}
	wk.mu.Lock()
	if cur := wk.waiters[key]; cur != nil && cur != w {
		// Its id was given again (add): its entry is gone, and the one
		// of that id is another call's.
		wk.mu.Unlock()
		return 0
	}
	label := ""
	if w.ev == evClaim {
		label = w.label
	}
	delete(wk.waiters, key)
	wk.mu.Unlock()
	lctx, cancel := context.WithTimeout(ctx, queueOpTimeout)
	defer cancel()
	if label == "" {
		// A claim may be on its way: one on the waiter's own source is
		// the likeliest.
		label = w.source
	}
	to, err := w.a.leave(lctx, w.k, w.id, label)
	if err != nil {
		wk.log.warn(time.Now(), "polygateway: redisstore: cannot take a waiter out of a queue yet; retrying",
			"scope", w.k.scope, "err", err)
		wk.abandon(w.k, w.id, label)
	}
	return to
}
