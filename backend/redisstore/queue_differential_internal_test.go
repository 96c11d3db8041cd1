package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

// memGate is the in-process side of the differential test: a
// fairqueue.Queue owned as the memory limiter owns it, in front of the
// same gates as the Redis side — two sources of 2 slots each under a
// global gate of 3.
type memGate struct {
	mu       sync.Mutex
	q        *fairqueue.Queue
	src      map[string]int
	glob     int
	reserved map[string]int
}

func newMemGate(clk core.Clock, cfg fairqueue.Config) *memGate {
	g := &memGate{src: map[string]int{}, reserved: map[string]int{}}
	g.q = fairqueue.New(cfg, clk, &g.mu, func(l string) { g.reserved[l]--; g.give(l) })
	return g
}

func (g *memGate) room(s string) bool { return g.src[s] < 2 && g.glob < 3 }
func (g *memGate) take(s string)      { g.src[s]++; g.glob++ }
func (g *memGate) give(s string)      { g.src[s]--; g.glob-- }

// call is one call of the test on both sides.
type call struct {
	source string
	place  core.Place
	permit core.Permit       // Redis's, while running
	mw     *fairqueue.Waiter // while queued
	rw     *QueueWaiter      // while queued
	claim  string            // the label of the claim it holds
	dl     time.Time         // its deadline (zero: none)
}

// TestQueueMatchesFairqueue drives the in-process queue (fairqueue, in
// front of counters) and the Redis queue (the scripts, in front of the
// Redis limiter's gates) with the same random operations on one fake
// clock — arrivals of every class, skewed tenants, either source, some
// with deadlines; releases that hand slots on; claims taken; waiters
// leaving, with and without a claim — and requires the same answer at
// every step: admitted or queued (and the entry's number), refused for a
// deadline with the same position and estimate, the slot handed to the
// same waiter, the same depths.
func TestQueueMatchesFairqueue(t *testing.T) {
	c, prefix := internalClient(t)
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { queueDifferential(t, c, prefix, seed) })
	}
}

func queueDifferential(t *testing.T, c *redis.Client, prefix string, seed uint64) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 31))
	clk := backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	share := 1 + rng.IntN(5)
	l := NewLimiter(c, WithPrefix(prefix), WithClock(clk))
	// Claims and leases do not lapse here: the fake clock moves only a
	// few seconds, and lapses are the other tests' subject.
	q := NewQueue(l, QueueConfig{Share: share, ClaimTTL: time.Hour, Lease: time.Hour})
	defer q.Close()
	// Deadlines here are on the fake clock, as the in-process side has them.
	q.until = func(ctx context.Context) (time.Duration, bool) {
		dl, ok := ctx.Deadline()
		return dl.Sub(clk.Now()), ok
	}
	mg := newMemGate(clk, fairqueue.Config{Share: share, ClaimTTL: time.Hour})
	scope := fmt.Sprintf("DIFFQ%d", seed)
	limits := core.Limits{MaxConcurrency: 2}
	request := func(source string) core.PermitRequest {
		return core.PermitRequest{Scope: scope, Source: source, SourceLimits: limits,
			GlobalLimits: core.Limits{MaxConcurrency: 3}, LeaseTTL: 24 * time.Hour}
	}
	tenants := []string{"big", "big", "big", "mid", "mid", "small", "tiny"}
	var running, queued []*call
	claimed := map[uint64]*call{} // holders of a claim, by id
	admissions, handoffs, lates := 0, 0, 0
	lastOp := 0
	// leave takes cl, queued or holding a claim, out of both queues and
	// compares where a claim it held went.
	leave := func(cl *call, where string) {
		t.Helper()
		if _, ok := claimed[cl.mw.ID()]; ok {
			delete(claimed, cl.mw.ID())
		} else {
			queued = slices.DeleteFunc(queued, func(x *call) bool { return x == cl })
		}
		mg.mu.Lock()
		before := holders(mg.q, queued)
		mg.q.Leave(cl.mw)
		after := holders(mg.q, queued)
		mg.mu.Unlock()
		var mto uint64
		for id := range after {
			if !before[id] {
				mto = id
			}
		}
		label := cl.claim
		if label == "" {
			label = cl.source
		}
		q.wake.forget(cl.rw)
		to, err := q.leave(ctx, cl.rw.k, cl.rw.id, label)
		if err != nil {
			t.Fatal(err)
		}
		if to != mto {
			t.Fatalf("%s: the claim of leaving %d went to %d in process, %d in Redis", where, cl.mw.ID(), mto, to)
		}
		if to > 0 {
			handoffs++
			claimed[to] = takeCall(&queued, to, cl.claim)
		}
	}
	for step := range 400 {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		op := rng.IntN(100)
		switch {
		case op < 45:
			cl := &call{source: []string{"a", "b"}[rng.IntN(2)],
				place: core.Place{Priority: core.PriorityOfRank(rng.IntN(core.NumPriorities)), Tenant: tenants[rng.IntN(len(tenants))]}}
			var dl time.Time
			cctx := ctx
			if rng.IntN(4) == 0 {
				dl = clk.Now().Add(time.Duration(50+rng.IntN(2000))*time.Millisecond + time.Duration(rng.IntN(1000))*time.Microsecond)
				cl.dl = dl
				var cancel context.CancelFunc
				cctx, cancel = context.WithDeadline(ctx, dl) // in 2030: it never ends by itself
				defer cancel()
			}
			// The in-process side.
			mg.mu.Lock()
			var mErr error
			mRan := false
			switch {
			case !mg.q.Busy() && mg.room(cl.source):
				mg.take(cl.source)
				mRan = true
			case !mg.q.Busy():
				cl.mw, mErr = mg.q.Enqueue(cl.place.Priority, cl.place.Tenant, dl, 0)
			default:
				cl.mw, mErr = mg.q.Enqueue(cl.place.Priority, cl.place.Tenant, dl, fairqueue.NoRetry)
			}
			mg.mu.Unlock()
			// The Redis side.
			g, w, rErr := q.Admit(cctx, request(cl.source), cl.place, nil)
			cl.rw = w
			var md, rd *core.QueueDeadlineError
			switch {
			case errors.As(mErr, &md):
				if !errors.As(rErr, &rd) || md.Ahead != rd.Ahead || md.Estimate != rd.Estimate {
					t.Fatalf("%s: in process %v, in Redis %v, %v", where, mErr, rErr, g)
				}
				lates++
				continue
			case mErr != nil || rErr != nil:
				t.Fatalf("%s: %v, %v", where, mErr, rErr)
			case mRan != g.OK:
				t.Fatalf("%s: arrival admitted in process %v, in Redis %v", where, mRan, g.OK)
			case mRan:
				cl.permit = g.Permit
				running = append(running, cl)
				admissions++
			default:
				if w == nil || w.ID() != cl.mw.ID() {
					t.Fatalf("%s: queued in process as %d, in Redis as %v", where, cl.mw.ID(), w)
				}
				queued = append(queued, cl)
			}
		case op < 70 && len(running) > 0:
			i := rng.IntN(len(running))
			cl := running[i]
			running = slices.Delete(running, i, i+1)
			mg.mu.Lock()
			mw := mg.q.Hand(cl.source)
			if mw != nil {
				mg.reserved[cl.source]++
			} else {
				mg.give(cl.source)
			}
			mg.mu.Unlock()
			to, err := q.release(ctx, cl.permit, core.Settlement{Kind: core.SettleRefund})
			if err != nil {
				t.Fatal(err)
			}
			if (mw == nil) != (to == 0) || mw != nil && mw.ID() != to {
				t.Fatalf("%s: released slot of %s went to %v in process, %d in Redis", where, cl.source, mw, to)
			}
			if to > 0 {
				handoffs++
				claimed[to] = takeCall(&queued, to, cl.source)
			}
		case op < 85 && len(claimed) > 0:
			ids := mapKeys(claimed)
			id := ids[rng.IntN(len(ids))]
			cl := claimed[id]
			delete(claimed, id)
			mg.mu.Lock()
			label, ok := mg.q.Claim(cl.mw)
			if !ok || label != cl.claim {
				t.Fatalf("%s: waiter %d holds %q %v in process, %q in the test", where, id, label, ok, cl.claim)
			}
			mg.reserved[label]--
			mg.give(label)
			if !mg.room(label) {
				t.Fatalf("%s: no room on %s for the holder of its claim", where, label)
			}
			mg.take(label)
			mg.q.Admitted(cl.mw)
			mg.mu.Unlock()
			cl.source = label
			g, w, err := q.Admit(ctx, request(label), cl.place, cl.rw)
			if err != nil || !g.OK || w != nil {
				t.Fatalf("%s: the holder of a claim on %s: %+v %v %v", where, label, g, w, err)
			}
			cl.permit = g.Permit
			running = append(running, cl)
			admissions++
		case op < 93 && (len(queued) > 0 || len(claimed) > 0):
			// A waiter leaves: in line, or holding a claim.
			var cl *call
			if n := len(queued); n > 0 && (len(claimed) == 0 || rng.IntN(2) == 0) {
				cl = queued[rng.IntN(n)]
			} else {
				ids := mapKeys(claimed)
				cl = claimed[ids[rng.IntN(len(ids))]]
			}
			leave(cl, where)
		default:
			clk.Advance(time.Duration(rng.IntN(300)) * time.Millisecond)
			// Waiters whose deadline passed leave, as their Wait would, in
			// the order of their deadlines.
			var late []*call
			for _, cl := range append(slices.Clone(queued), mapValues(claimed)...) {
				if !cl.dl.IsZero() && !clk.Now().Before(cl.dl) {
					late = append(late, cl)
				}
			}
			slices.SortFunc(late, func(a, b *call) int { return a.dl.Compare(b.dl) })
			for _, cl := range late {
				leave(cl, where+" (deadline)")
			}
		}
		lastOp = op
		mg.mu.Lock()
		md := mg.q.Depth()
		mg.mu.Unlock()
		rd, err := q.Depth(ctx, scope, "")
		if err != nil {
			t.Fatal(err)
		}
		if md != rd {
			t.Fatalf("%s (op %d): depths %v in process, %v in Redis", where, lastOp, md, rd)
		}
	}
	t.Logf("share %d: %d admissions, %d handoffs, %d refused for their deadline", share, admissions, handoffs, lates)
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

// holders returns the ids of the queued calls holding a claim now.
func holders(q *fairqueue.Queue, queued []*call) map[uint64]bool {
	out := map[uint64]bool{}
	for _, cl := range queued {
		if _, ok := q.Claim(cl.mw); ok {
			out[cl.mw.ID()] = true
		}
	}
	return out
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
