package memory_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// TestQueueAdmissionOrderProperty drives the memory limiter's queue,
// through the composed Admitter, with random arrivals of random classes
// and tenants, releases and cancellations, each caller in a goroutine of
// its own in a bubble, and holds the order of admissions to the
// discipline: class (within the share rule), then tenants in turn, then
// arrival; no caller is admitted twice or lost.
func TestQueueAdmissionOrderProperty(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed-", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { runQueueProperty(t, seed) })
		})
	}
}

// queueRun is one run: the admitter, the callers and what they did.
type queueRun struct {
	t   *testing.T
	a   core.Admitter
	req core.AdmitRequest
	m   *discipline

	mu       sync.Mutex
	holder   chan struct{} // closed to make the caller holding the unit finish
	admitted map[int]bool
	order    []int // queued callers, in the order admitted
	left     map[int]bool
	queued   map[int]bool
	err      error
}

func runQueueProperty(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	share := 1 + rng.IntN(4)
	l := memory.NewLimiter(memory.WithQueue(memory.QueueConfig{Share: share, ClaimTTL: backendtest.SuiteClaimTTL}))
	r := &queueRun{
		t: t, a: core.ComposeAdmitter(l, memory.NewBreaker()), m: newDiscipline(share),
		admitted: map[int]bool{}, left: map[int]bool{}, queued: map[int]bool{},
		req: core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: core.PermitRequest{
			Scope: "s", Source: "a", SourceLimits: core.Limits{MaxConcurrency: 1},
		}},
	}
	tenants := []string{"a", "a", "a", "b", "b", "c", "d"}
	cancels := map[int]context.CancelFunc{}
	var wg sync.WaitGroup
	for id := range 120 {
		switch op := rng.IntN(10); {
		case op < 5:
			ctx, cancel := context.WithCancel(t.Context())
			cancels[id] = cancel
			p := core.Place{Priority: core.PriorityOfRank(rng.IntN(core.NumPriorities)), Tenant: tenants[rng.IntN(len(tenants))]}
			wg.Go(func() { r.caller(ctx, id, p) })
		case op < 8:
			r.release()
		default:
			// A random caller still waiting gives up.
			r.mu.Lock()
			var waiting []int
			for id := range r.queued {
				if !r.admitted[id] && !r.left[id] {
					waiting = append(waiting, id)
				}
			}
			r.mu.Unlock()
			if len(waiting) > 0 {
				slices.Sort(waiting)
				cancels[waiting[rng.IntN(len(waiting))]]()
			}
		}
		synctest.Wait()
		if r.failed() {
			break
		}
	}
	// Drain: release until the line is empty, then end every call.
	for r.release() {
		synctest.Wait()
	}
	for _, c := range cancels {
		c()
	}
	wg.Wait()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for id := range r.queued {
		if !r.admitted[id] && !r.left[id] {
			t.Fatalf("caller %d queued, then neither admitted nor gone", id)
		}
	}
	if len(r.order) == 0 {
		t.Fatal("no caller was admitted from the queue: the run shows nothing")
	}
}

// caller is one call: it admits, waits while queued, and holds the unit
// until told to finish.
func (r *queueRun) caller(ctx context.Context, id int, p core.Place) {
	req := r.req
	req.Permit.Place = p
	first := true
	for {
		tk, err := r.a.Admit(ctx, req)
		if err != nil {
			r.fail(fmt.Errorf("caller %d: Admit: %w", id, err))
			return
		}
		if tk.Admitted() {
			r.hold(id, tk)
			return
		}
		if tk.Queued == nil {
			r.fail(fmt.Errorf("caller %d: refused and not queued: %+v", id, tk))
			return
		}
		if first {
			r.mu.Lock()
			r.queued[id] = true
			r.m.arrive(id, p.Priority.Rank(), p.Tenant)
			r.mu.Unlock()
			first = false
		}
		ev, err := tk.Queued.Wait(ctx)
		if err != nil {
			r.mu.Lock()
			r.left[id] = true
			r.m.leave(id)
			r.mu.Unlock()
			return
		}
		if ev.Kind == core.WaitLapsed {
			r.fail(fmt.Errorf("caller %d: its claim lapsed, though it takes it at once", id))
			return
		}
		req.Permit.Waiter, req.Permit.Source = tk.Queued, ev.Source
	}
}

// hold records the admission of id, checks it against the discipline,
// and holds the unit until release tells it to finish.
func (r *queueRun) hold(id int, tk core.Ticket) {
	done := make(chan struct{})
	r.mu.Lock()
	if r.admitted[id] {
		r.failLocked(fmt.Errorf("caller %d admitted twice", id))
	}
	r.admitted[id] = true
	if r.holder != nil {
		r.failLocked(fmt.Errorf("caller %d admitted while another holds the only unit", id))
	}
	r.holder = done
	if !r.queued[id] && r.m.choose() >= 0 {
		r.failLocked(fmt.Errorf("caller %d admitted past the waiters in line", id))
	}
	if r.queued[id] {
		if want := r.m.choose(); want != id {
			r.failLocked(fmt.Errorf("caller %d admitted; the discipline chooses %d (order so far %v)", id, want, r.order))
		}
		r.m.serve(id)
		r.order = append(r.order, id)
	}
	r.mu.Unlock()
	<-done
	if _, err := r.a.Finish(context.Background(), tk, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess); err != nil {
		r.fail(err)
	}
}

// release makes the holder of the unit finish; false when none holds it.
func (r *queueRun) release() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.holder == nil {
		return false
	}
	close(r.holder)
	r.holder = nil
	return true
}

func (r *queueRun) fail(err error) {
	r.mu.Lock()
	r.failLocked(err)
	r.mu.Unlock()
}

func (r *queueRun) failLocked(err error) {
	if r.err == nil {
		r.err = err
	}
}

// failed reports whether the run has found a fault (the test fails once
// every caller has ended).
func (r *queueRun) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil
}

// discipline is the admission order written plainly on slices: classes
// by rank with the share rule, tenants in turn, arrival order.
type discipline struct {
	share   int
	rings   [core.NumPriorities][]string
	lines   [core.NumPriorities]map[string][]int
	skipped [core.NumPriorities]int
	where   map[int]struct {
		rank   int
		tenant string
	}
}

func newDiscipline(share int) *discipline {
	d := &discipline{share: share, where: map[int]struct {
		rank   int
		tenant string
	}{}}
	for c := range d.lines {
		d.lines[c] = map[string][]int{}
	}
	return d
}

func (d *discipline) waiting(c int) int {
	n := 0
	for _, ids := range d.lines[c] {
		n += len(ids)
	}
	return n
}

func (d *discipline) arrive(id, c int, t string) {
	d.where[id] = struct {
		rank   int
		tenant string
	}{c, t}
	if len(d.lines[c][t]) == 0 {
		d.rings[c] = append(d.rings[c], t)
	}
	d.lines[c][t] = append(d.lines[c][t], id)
}

// choose returns the next to admit: the first waiter of the tenant whose
// turn it is in the due class passed over most (a tie to the higher),
// else in the highest class with waiters; -1 when none waits.
func (d *discipline) choose() int {
	best := -1
	for c := range d.lines {
		if d.waiting(c) > 0 && d.skipped[c] >= d.share && (best < 0 || d.skipped[c] > d.skipped[best]) {
			best = c
		}
	}
	if best < 0 {
		for c := range d.lines {
			if d.waiting(c) > 0 {
				best = c
				break
			}
		}
	}
	if best < 0 {
		return -1
	}
	return d.lines[best][d.rings[best][0]][0]
}

// leave takes id out of its line, not as a choice.
func (d *discipline) leave(id int) {
	w, ok := d.where[id]
	if !ok {
		return
	}
	delete(d.where, id)
	c, t := w.rank, w.tenant
	d.lines[c][t] = slices.DeleteFunc(d.lines[c][t], func(x int) bool { return x == id })
	if len(d.lines[c][t]) == 0 {
		delete(d.lines[c], t)
		d.rings[c] = slices.DeleteFunc(d.rings[c], func(x string) bool { return x == t })
	}
	if d.waiting(c) == 0 {
		d.skipped[c] = 0
	}
}

// serve takes id out as the one chosen.
func (d *discipline) serve(id int) {
	w := d.where[id]
	c, t := w.rank, w.tenant
	first := d.rings[c][0] == t
	d.leave(id)
	if first && len(d.lines[c][t]) > 0 {
		d.rings[c] = append(slices.DeleteFunc(d.rings[c], func(x string) bool { return x == t }), t)
	}
	d.skipped[c] = 0
	for e := c + 1; e < len(d.lines); e++ {
		if d.waiting(e) > 0 {
			d.skipped[e]++
		}
	}
}
