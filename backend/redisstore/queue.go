package redisstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
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

// QueueConfig tunes the fair queue of an Admitter (WithQueue). The zero
// value is valid.
type QueueConfig struct {
	// Share is how many consecutive choices of a higher class a class with
	// waiters lets pass before it is due. Default (0 or less):
	// fairqueue.DefaultShare (9).
	Share int
	// ClaimTTL is how long a handed-on slot stays reserved for its waiter.
	// Default (0 or less): fairqueue.DefaultClaimTTL (2 s).
	ClaimTTL time.Duration
	// Lease is how long a waiter's place lasts in Redis when its process
	// does not renew it: a process that dies leaves no place older. A
	// waiter whose deadline comes sooner gets a lease to its deadline; one
	// that waits longer renews it once per Lease (one script). Default
	// (0 or less): DefaultQueueLease (5 minutes).
	Lease time.Duration
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
	return c
}

// WithQueue gives NewAdmitter its fair queue, tuned by cfg (see
// Admitter): a call that a gate refuses waits in line (Ticket.Queued)
// rather than being refused. Without it a gate's refusal is a refused
// ticket, for callers that do not wait on Ticket.Queued. The other
// constructors ignore it.
func WithQueue(cfg QueueConfig) Option {
	return func(o *options) { o.queue = &cfg }
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
func (l *Limiter) queueKeysOf(scope, pool string) *queueKeys {
	return l.qkeys.get([2]string{scope, pool}, func() *queueKeys {
		k := &queueKeys{scope: scope, pool: pool}
		base := queueBase(l.opt.prefix, scope, pool)
		for i, n := range []string{"s", "o", "r", "x"} {
			k.keys[i] = base + n
		}
		k.prefix = base + "w:"
		k.tag = scope
		if pool != "" {
			k.tag = pool
		}
		return k
	})
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
func (a *Admitter) channel(k *queueKeys) string { return k.prefix + a.proc }

// writeQueue writes the fields every queue request of this Admitter has
// (lua/lib/queue.lua): writeQueueKeys', the discipline and this process.
func (a *Admitter) writeQueue(w *request, k *queueKeys, qs int64, sk *scriptKeys, slotsAt func(level int) int64) {
	a.l.writeQueueKeys(w, k, qs, sk, slotsAt)
	w.int("share", int64(a.qcfg.Share))
	w.int("claim", micros(a.qcfg.ClaimTTL))
	w.int("keep", micros(a.qcfg.Lease))
	w.str("proc", a.proc)
}

// writeQueueKeys writes the fields of a queue request that name the
// queue: its keys from KEYS[qs], its processes' channels, and the levels
// of source's units (label source) whose slots are at KEYS[slotsAt(i)]
// (none when sk is nil). A request of the Limiter's own adds proc = "".
func (l *Limiter) writeQueueKeys(w *request, k *queueKeys, qs int64, sk *scriptKeys, slotsAt func(level int) int64) {
	w.int("qs", qs)
	w.str("chan", k.prefix)
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

// The queue's part of an admit reply (lua/admit.lua): its status.
const (
	statusGranted = iota
	statusQueued
	statusLate // the deadline cannot be met
	statusRefused
)

// admitReply is the length of an admit reply: the allow reply, the
// acquire reply, then status, id, ahead, estimate and turn.
const admitReply = allowReply + 5 + 5

// queueDeadlineGrace is what a waiter's lease runs past its deadline: a
// live waiter leaves at its deadline itself; the lease only clears the
// entries of processes that died.
const queueDeadlineGrace = 5 * time.Second

// leaseEnd is when the lease of a waiter's entry made or renewed at now
// ends: Lease later, or at its deadline dl plus queueDeadlineGrace when
// that comes first.
func (a *Admitter) leaseEnd(now, dl time.Time, hasDL bool) time.Time {
	end := now.Add(a.qcfg.Lease)
	if hasDL && dl.Add(queueDeadlineGrace).Before(end) {
		end = dl.Add(queueDeadlineGrace)
	}
	return end
}

// admitCall is what an Admit knows of its call besides the request: its
// queue, its waiter (nil for a new call) and its deadline on the queue's
// clock.
type admitCall struct {
	k     *queueKeys
	w     *qwaiter
	now   time.Time
	dl    time.Time
	left  time.Duration
	hasDL bool
}

// writeAdmitQueue writes the queue request of an admit (lua/admit.lua):
// the queue's fields with its keys at qs, the caller's entry, its place
// and deadline, and the gates the queue waits out.
func (a *Admitter) writeAdmitQueue(w *request, c *admitCall, place core.Place, sk *scriptKeys, qs int64) {
	w.object("queue")
	if !a.queuing {
		w.bool("off", true)
		w.close()
		return
	}
	a.l.writeNow(w)
	a.writeQueue(w, c.k, qs, sk, func(i int) int64 { return int64(3*i + 1) })
	var id uint64
	if c.w != nil {
		id = c.w.id
	}
	w.uint("id", id)
	w.int("class", int64(place.Priority.Rank()))
	w.str("tenant", tenantHex(place.Tenant))
	if c.hasDL {
		w.int("left", max(int64(c.left/time.Microsecond), 0))
	}
	w.int("lease", micros(a.leaseEnd(c.now, c.dl, c.hasDL).Sub(c.now)))
	w.array("conc")
	w.elem(int64(core.GateSourceConcurrency))
	w.elem(int64(core.GateGlobalConcurrency))
	w.end()
	w.int("bgate", int64(core.GateBudget))
	w.close()
}

// queued reads the queue's part of an admit reply (res: status, id,
// ahead, estimate, turn) into t: a waiter to wait on, or a
// *core.QueueDeadlineError.
func (a *Admitter) queued(ctx context.Context, t *core.Ticket, res []int64, req *core.AdmitRequest, c *admitCall, listening bool) error {
	status, id := res[0], uint64(res[1])
	if c.w != nil && (status != statusQueued || id != c.w.id) {
		a.wake.forget(c.w) // admitted, refused, or its entry was gone
	}
	switch status {
	case statusLate:
		return &core.QueueDeadlineError{Ahead: int(res[2]), Estimate: fromMicros(res[3]), Left: max(c.left, 0)}
	case statusQueued:
	default:
		return nil
	}
	w := c.w
	if w == nil || w.id != id {
		w = a.wake.add(c.k, id, req.Permit.Source, c.dl, c.hasDL)
	}
	w.source = req.Permit.Source
	w.setTurn(res[4])
	t.Queued, t.Grant.Queued = w, w
	if !listening {
		// The entry was made before this process heard its queue's
		// channel: a word for it may have gone unheard. Listen, then ask
		// for its state.
		if err := a.wake.listen(ctx, c.k); err != nil {
			w.Leave(context.WithoutCancel(ctx))
			return &core.GovernanceBackendError{Backend: "limiter", Op: "admit", Err: err}
		}
		a.wake.resync(c.k, []*qwaiter{w})
	}
	return nil
}

// labelKeys returns the keys of a script on k's queue that may move the
// reserved slots of label's unit: the queue's four, then label's levels'
// slots (level i's at 5+i).
func (a *Admitter) labelKeys(k *queueKeys, label string) ([]string, *scriptKeys) {
	sk := a.l.scriptKeys(k.scope, label, k.pool)
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
func (a *Admitter) runQueue(ctx context.Context, s *redis.Script, k *queueKeys, label string, more func(w *request)) *redis.Cmd {
	keys := k.keys[:]
	var sk *scriptKeys
	if label != "" {
		keys, sk = a.labelKeys(k, label)
	}
	w := newRequest()
	w.open()
	w.object("queue")
	a.l.writeNow(w)
	a.writeQueue(w, k, 1, sk, func(i int) int64 { return int64(5 + i) })
	more(w)
	w.close()
	w.close()
	return s.Run(ctx, a.l.c, keys, w.String())
}

// leave takes the waiter id out of k's queue (label: the unit of the
// claim it may hold, "" = none); a claim it held goes on, to the entry it
// returns (0: none).
func (a *Admitter) leave(ctx context.Context, k *queueKeys, id uint64, label string) (uint64, error) {
	for range 2 {
		res, err := a.runQueue(ctx, queueLeaveScript, k, label, func(w *request) { w.uint("id", id) }).Slice()
		if err != nil {
			return 0, fmt.Errorf("polygateway: redisstore: queue leave: %w", err)
		}
		if len(res) != 3 {
			return 0, fmt.Errorf("polygateway: redisstore: queue leave: unexpected reply %v", res)
		}
		to, ok1 := res[0].(int64)
		other, ok2 := res[2].(string)
		if !ok1 || !ok2 {
			return 0, fmt.Errorf("polygateway: redisstore: queue leave: unexpected reply %v", res)
		}
		if other != "" && other != label {
			label = other // it holds a claim of that label: again, with its keys
			continue
		}
		if to > 0 {
			a.wake.granted(k, uint64(to), label)
		}
		return uint64(to), nil
	}
	return 0, errors.New("polygateway: redisstore: queue leave: the claim's label changed twice")
}

// writeNow writes the "now" of a test clock (see request.now).
func (l *Limiter) writeNow(w *request) { w.now(&l.opt) }

// Depth returns the number of calls waiting in line in scope's queue (of
// pool; "" when the scope has none), per priority class (indexed by
// core.Priority); holders of claims and waiters returned to the front
// are not counted. An error means Redis failed.
func (a *Admitter) Depth(ctx context.Context, scope, pool string) ([core.NumPriorities]int, error) {
	var d [core.NumPriorities]int
	k := a.l.queueKeysOf(scope, pool)
	v, err := a.l.c.HMGet(ctx, k.keys[0], "w0", "w1", "w2").Result()
	if err != nil {
		return d, fmt.Errorf("polygateway: redisstore: queue depth: %w", err)
	}
	for i, x := range v {
		if s, ok := x.(string); ok {
			n, _ := strconv.Atoi(s)
			d[core.PriorityOfRank(i)] = n
		}
	}
	return d, nil
}
