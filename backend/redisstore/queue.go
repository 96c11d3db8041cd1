package redisstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// Defaults of QueueConfig.
const (
	// DefaultQueueLease is how long a waiter's place lasts without its
	// process renewing it.
	DefaultQueueLease = 5 * time.Minute
)

// QueueConfig tunes a Queue. The zero value is valid.
type QueueConfig struct {
	// Share and ClaimTTL are the discipline's (fairqueue.Config): the
	// passes a class with waiters lets go by before it is due (default
	// fairqueue.DefaultShare), and how long a handed-on slot stays
	// reserved for its waiter (default fairqueue.DefaultClaimTTL).
	Share    int
	ClaimTTL time.Duration
	// Lease is how long a waiter's place lasts in Redis when its process
	// does not renew it: a process that dies leaves no place older. A
	// waiter whose deadline comes sooner gets a lease to its deadline; one
	// that waits longer renews it once per Lease (one script). Default
	// (0 or less): DefaultQueueLease.
	Lease time.Duration
	// Logger receives the queue's rate-limited warnings (a subscriber that
	// cannot reconnect, a check that fails). Default: discard.
	Logger *slog.Logger
}

func (c QueueConfig) withDefaults() QueueConfig {
	if c.Share <= 0 {
		c.Share = fairqueue.DefaultShare
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = fairqueue.DefaultClaimTTL
	}
	if c.Lease <= 0 {
		c.Lease = DefaultQueueLease
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Queue is the fair queue of internal/fairqueue kept in Redis, shared by
// every process using the same Redis and prefix: calls that find a scope's
// gates full wait in one line per scope, by class, by tenant in turn, in
// arrival order, and a slot that frees is handed to the next of them at
// once, across processes.
//
// It works with the gates of its Limiter: Admit is the limiter's
// TryAcquire and the queue in one script, Release its Release and the
// handoff in one script. A call that does not wait costs no more round
// trips than TryAcquire and Release do.
//
// # Waking without polling
//
// Every process has one subscriber connection (one per queue's slot on a
// Redis Cluster: a shard channel lives on its slot's node), on which the
// scripts publish (SPUBLISH) to the process's channel of the queue: a
// claim handed to one of its waiters, the head's turn when room in a
// rate window is due, an entry gone, a claim it granted taken. The
// subscriber's one goroutine dispatches them to the waiters in memory. A
// waiter waits on a channel of its own and, at the head, one timer;
// waiting runs no command.
//
// # Failures
//
// A script publishes to a process before it hands anything to it: a
// process whose subscriber is gone has its entries dropped as they come
// up. Every entry has a lease (Lease, or to its deadline): a process that
// dies leaves no entry older, and scripts drop lapsed entries as they
// pass. A claim not taken within ClaimTTL (its holder died after it was
// woken) goes to the next waiter: the process that granted it checks it
// then, unless the holder's Admit told it that it was taken. After a
// reconnection of its subscriber a process asks for the state of its
// waiters, as it may have missed messages.
//
// A Queue is safe for concurrent use. Close it when done; it does not
// close the client. Create one with NewQueue.
type Queue struct {
	l    *Limiter
	cfg  QueueConfig
	proc string
	wake *waker

	keysMu sync.RWMutex
	keys   map[[2]string]*queueKeys

	// until returns the time left before ctx's deadline (untilDeadline).
	until func(ctx context.Context) (time.Duration, bool)
}

// untilDeadline is the time left before ctx's deadline. A deadline belongs
// to its context, whose timer runs on the time package's clock, so it is
// measured with that clock; the queue then keeps it as a length on its own
// clock (the server's time in the scripts).
func untilDeadline(ctx context.Context) (time.Duration, bool) {
	dl, ok := ctx.Deadline()
	if !ok {
		return 0, false
	}
	return time.Until(dl), true
}

// NewQueue returns the Queue of l's gates. Scopes whose limiter level is
// a pool keep their queue in the pool's slot; each scope has its own.
func NewQueue(l *Limiter, cfg QueueConfig) *Queue {
	q := &Queue{l: l, cfg: cfg.withDefaults(), proc: fmt.Sprintf("%016x", rand.Uint64()), keys: map[[2]string]*queueKeys{},
		until: untilDeadline}
	q.wake = newWaker(q)
	return q
}

// Close stops the subscriber and the checks. Waiters still waiting are
// woken as gone. It is idempotent.
func (q *Queue) Close() error {
	q.wake.close()
	return nil
}

// queueKeys are the names of one scope's queue.
type queueKeys struct {
	scope, pool string
	// keys are the queue's s, o, r and x (lua/lib/queue.lua).
	keys [4]string
	// prefix is the start of the processes' channels; tag names the
	// slot's scope or pool.
	prefix, tag string
}

// queueKeysOf returns the keys of scope's queue in pool.
func (q *Queue) queueKeysOf(scope, pool string) *queueKeys {
	id := [2]string{scope, pool}
	q.keysMu.RLock()
	k := q.keys[id]
	q.keysMu.RUnlock()
	if k != nil {
		return k
	}
	k = &queueKeys{scope: scope, pool: pool}
	base := queueBase(q.l.opt.prefix, scope, pool)
	for i, n := range []string{"s", "o", "r", "x"} {
		k.keys[i] = base + n
	}
	k.prefix = base + "w:"
	k.tag = scope
	if pool != "" {
		k.tag = pool
	}
	q.keysMu.Lock()
	if len(q.keys) < maxCachedKeys {
		q.keys[id] = k
	}
	q.keysMu.Unlock()
	return k
}

// queueBase returns the common start of a queue's keys: in its scope's
// slot, or in a pool the pool's, next to the gates:
//
//	{prefix}:lim:{SCOPE}:q:      {prefix}:pool:{POOL}:q:{scope}:
func queueBase(prefix, scope, pool string) string {
	if pool == "" {
		return prefix + ":lim:" + hashTag(scope) + ":q:"
	}
	return prefix + ":pool:" + hashTag(pool) + ":q:" + escape(scope) + ":"
}

// channel returns the channel of this process for the queue.
func (q *Queue) channel(k *queueKeys) string { return k.prefix + q.proc }

// writeQueue writes the fields every queue request has (lua/lib/queue.lua):
// the queue's keys from KEYS[qs], the discipline, this process, and the
// levels of source's units (label source) whose slots are at KEYS[1..].
func (q *Queue) writeQueue(w *request, k *queueKeys, qs int64, sk *scriptKeys, slotsAt func(level int) int64) {
	w.int("qs", qs)
	w.int("share", int64(q.cfg.Share))
	w.int("claim", micros(q.cfg.ClaimTTL))
	w.int("keep", micros(q.cfg.Lease))
	w.str("chan", k.prefix)
	w.str("proc", q.proc)
	if sk == nil {
		return
	}
	w.array("labels")
	w.open()
	w.str("lb", sk.source)
	w.array("lv")
	for i := range numLevels {
		w.open()
		w.int("i", int64(i))
		w.int("k", slotsAt(i))
		w.str("s", sk.suffix[i])
		w.close()
	}
	w.end()
	w.close()
	w.end()
}

// tenantHex is the tenant as the scripts keep it.
func tenantHex(name string) string { return hex.EncodeToString([]byte(name)) }

// queueStatus is the queue's answer to an Admit (lua/queue_admit.lua).
const (
	statusGranted = iota
	statusQueued
	statusLate // the deadline cannot be met
	statusRefused
)

// Admit asks for req's permit through the queue, in one script. w is the
// caller's waiter when it was woken (nil for a new call; a waiter woken
// with a claim must ask for the claim's source, core.WaitEvent.Source).
//
// It returns a granted Grant; or a refused one and the waiter to Wait on
// when the call queued (a new waiter, or w again); or a refused one and
// no waiter when the call cannot queue (a spend budget, or a request that
// no window will ever fit: the engine's answers to those stand); or a
// *core.QueueDeadlineError when its deadline (ctx's) cannot be met given
// the line ahead. An error otherwise means Redis failed; w, if any, is
// no longer waited on then (its place lapses with its lease).
func (q *Queue) Admit(ctx context.Context, req core.PermitRequest, place core.Place, w *QueueWaiter) (core.Grant, *QueueWaiter, error) {
	if !place.Priority.Valid() {
		return core.Grant{}, nil, &core.PriorityError{Value: strconv.Itoa(int(place.Priority))}
	}
	if len(place.Tenant) > core.MaxTenant {
		return core.Grant{}, nil, core.ErrTenantTooLong
	}
	if len(req.Budgets) > 0 {
		if err := checkBudgets(req.Budgets); err != nil {
			return core.Grant{}, nil, err
		}
		q.l.noteBudgets(req.Scope, req.Pool, req.Budgets)
	}
	q.l.pools.note(req.Scope, req.Pool)
	k := q.queueKeysOf(req.Scope, req.Pool)
	if err := q.wake.listen(ctx, k); err != nil {
		return core.Grant{}, nil, err
	}
	lease := newLease(&req)
	sk := q.l.scriptKeys(req.Scope, req.Source, req.Pool)
	keys := append(append(make([]string, 0, 3*numLevels+4+len(req.Budgets)), sk.keys[:3*numLevels]...), k.keys[:]...)
	if len(req.Budgets) > 0 {
		keys = q.l.withBudgets(keys, req.Scope, req.Pool, req.Budgets)
	}
	var id uint64
	if w != nil {
		id = w.id
	}
	left, hasDL := q.until(ctx)
	now := q.l.opt.clockOrSystem().Now()
	dl := now.Add(left) // the deadline on the queue's clock
	wr := newRequest()
	wr.open()
	wr.object("limiter")
	q.l.writeAcquire(wr, &req, sk, lease, int64(3*numLevels+4))
	wr.close()
	wr.object("queue")
	q.l.writeNow(wr)
	q.writeQueue(wr, k, 3*numLevels+1, sk, func(i int) int64 { return int64(3*i + 1) })
	wr.uint("id", id)
	wr.int("class", int64(place.Priority.Rank())) // the scripts rank classes as fairqueue does
	wr.str("tenant", tenantHex(place.Tenant))
	if hasDL {
		wr.int("left", max(int64(left/time.Microsecond), 0))
	}
	wr.int("lease", micros(q.leaseEnd(now, dl, hasDL).Sub(now)))
	wr.array("conc")
	wr.elem(int64(core.GateSourceConcurrency))
	wr.elem(int64(core.GateGlobalConcurrency))
	wr.end()
	wr.int("bgate", int64(core.GateBudget))
	wr.close()
	wr.close()
	res, err := queueAdmitScript.Run(ctx, q.l.c, keys, wr.String()).Int64Slice()
	if err != nil {
		if w != nil {
			q.wake.forget(w)
		}
		return core.Grant{}, nil, fmt.Errorf("polygateway: redisstore: queue admit: %w", err)
	}
	return q.admitted(res, &req, place, lease, w, k, dl, hasDL, left)
}

// queueDeadlineGrace is what a waiter's lease runs past its deadline: a
// live waiter leaves at its deadline itself; the lease only clears the
// entries of processes that died.
const queueDeadlineGrace = 5 * time.Second

// leaseEnd is when the lease of a waiter's entry made or renewed at now
// ends: Lease later, or at its deadline dl plus queueDeadlineGrace when
// that comes first.
func (q *Queue) leaseEnd(now, dl time.Time, hasDL bool) time.Time {
	end := now.Add(q.cfg.Lease)
	if hasDL && dl.Add(queueDeadlineGrace).Before(end) {
		end = dl.Add(queueDeadlineGrace)
	}
	return end
}

// admitted reads the reply of the admit script; dl is the call's deadline
// on the queue's clock, left the time that was left to it.
func (q *Queue) admitted(res []int64, req *core.PermitRequest, place core.Place, lease uint64, w *QueueWaiter,
	k *queueKeys, dl time.Time, hasDL bool, left time.Duration) (core.Grant, *QueueWaiter, error) {
	if len(res) != 10 {
		return core.Grant{}, nil, fmt.Errorf("polygateway: redisstore: queue admit: unexpected reply %v", res)
	}
	g, err := q.l.grant(res[:5], req, lease, "queue admit")
	if err != nil {
		return core.Grant{}, nil, err
	}
	status, id := res[5], uint64(res[6])
	if w != nil && (status != statusQueued || id != w.id) {
		q.wake.forget(w) // admitted, or its entry was gone
	}
	switch status {
	case statusGranted:
		return g, nil, nil
	case statusLate:
		return core.Grant{}, nil, &core.QueueDeadlineError{Ahead: int(res[7]), Estimate: fromMicros(res[8]), Left: max(left, 0)}
	case statusRefused:
		return g, nil, nil
	}
	if w == nil || w.id != id {
		w = q.wake.add(k, id, place, req.Source, dl, hasDL)
	}
	w.source = req.Source
	w.setTurn(res[9])
	return g, w, nil
}

// Release frees p's slots and settles it as Limiter.Release does, and
// hands a slot that frees while waiters are in line to the next of them,
// in one script. An error means Redis failed.
func (q *Queue) Release(ctx context.Context, p core.Permit, s core.Settlement) error {
	_, err := q.release(ctx, p, s)
	return err
}

// release is Release; it returns the entry the slot went to (0: none).
func (q *Queue) release(ctx context.Context, p core.Permit, s core.Settlement) (uint64, error) {
	if p.Lease&leaseLevels == 0 && len(p.Budgets) == 0 {
		return 0, nil
	}
	pool, ok := q.l.permitPool(p)
	if !ok {
		return 0, nil
	}
	k := q.queueKeysOf(p.Scope, pool)
	if err := q.wake.listen(ctx, k); err != nil {
		return 0, err
	}
	sk := q.l.scriptKeys(p.Scope, p.Source, pool)
	keys := append(append(make([]string, 0, 3*numLevels+4+len(p.Budgets)), sk.keys[:3*numLevels]...), k.keys[:]...)
	if len(p.Budgets) > 0 {
		keys = q.l.withBudgets(keys, p.Scope, pool, p.Budgets)
	}
	w := newRequest()
	w.open()
	w.object("limiter")
	q.l.writeRelease(w, p, s, sk, false, int64(3*numLevels+4))
	w.close()
	w.object("queue")
	q.writeQueue(w, k, 3*numLevels+1, sk, func(i int) int64 { return int64(3*i + 1) })
	w.str("label", p.Source)
	w.close()
	w.close()
	res, err := queueFinishScript.Run(ctx, q.l.c, keys, w.String()).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("polygateway: redisstore: queue release: %w", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("polygateway: redisstore: queue release: unexpected reply %v", res)
	}
	if res[0] > 0 {
		q.wake.granted(k, uint64(res[0]), p.Source)
	}
	return uint64(res[0]), nil
}

// labelKeys returns the keys of a script on k's queue that may move the
// reserved slots of label's unit: the queue's four, then label's levels'
// slots (level i's at 5+i).
func (q *Queue) labelKeys(k *queueKeys, label string) ([]string, *scriptKeys) {
	sk := q.l.scriptKeys(k.scope, label, k.pool)
	keys := make([]string, 0, 4+numLevels)
	keys = append(keys, k.keys[:]...)
	for i := range numLevels {
		keys = append(keys, sk.keys[3*i])
	}
	return keys, sk
}

// runQueue runs a leave or check script on k's queue: the request is the
// queue's fields plus what more adds; label names the unit whose slots it
// may move ("" = none).
func (q *Queue) runQueue(ctx context.Context, s *redis.Script, k *queueKeys, label string, more func(w *request)) *redis.Cmd {
	keys := k.keys[:]
	var sk *scriptKeys
	if label != "" {
		keys, sk = q.labelKeys(k, label)
	}
	w := newRequest()
	w.open()
	w.object("queue")
	q.l.writeNow(w)
	q.writeQueue(w, k, 1, sk, func(i int) int64 { return int64(5 + i) })
	more(w)
	w.close()
	w.close()
	return s.Run(ctx, q.l.c, keys, w.String())
}

// leave takes the waiter id out of k's queue (label: the unit of the
// claim it may hold, "" = none); a claim it held goes on, to the entry it
// returns (0: none).
func (q *Queue) leave(ctx context.Context, k *queueKeys, id uint64, label string) (uint64, error) {
	res, err := q.runQueue(ctx, queueLeaveScript, k, label, func(w *request) { w.uint("id", id) }).Int64Slice()
	if err != nil {
		return 0, fmt.Errorf("polygateway: redisstore: queue leave: %w", err)
	}
	if len(res) != 2 {
		return 0, fmt.Errorf("polygateway: redisstore: queue leave: unexpected reply %v", res)
	}
	if res[0] > 0 {
		q.wake.granted(k, uint64(res[0]), label)
	}
	return uint64(res[0]), nil
}

// writeNow writes the "now" of a test clock (see request.now).
func (l *Limiter) writeNow(w *request) { w.now(&l.opt) }

// Depth returns the number of waiters in line in scope's queue (of pool),
// per class, indexed by core.Priority.Rank; holders of claims and waiters
// returned to the front are not counted. An error means Redis failed.
func (q *Queue) Depth(ctx context.Context, scope, pool string) ([core.NumPriorities]int, error) {
	var d [core.NumPriorities]int
	k := q.queueKeysOf(scope, pool)
	v, err := q.l.c.HMGet(ctx, k.keys[0], "w0", "w1", "w2").Result()
	if err != nil {
		return d, fmt.Errorf("polygateway: redisstore: queue depth: %w", err)
	}
	for i, x := range v {
		if s, ok := x.(string); ok {
			n, _ := strconv.Atoi(s)
			d[i] = n
		}
	}
	return d, nil
}
