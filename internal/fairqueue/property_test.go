package fairqueue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/fairqueue"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// watch checks the admission order against the rules themselves, apart
// from any implementation: fed every arrival, choice and departure, it
// fails the test when a choice breaks class order (beyond the share
// rule's exception and its bound), a tenant's turn, or arrival order.
type watch struct {
	t     testing.TB
	share int
	// in line: per id its class and tenant
	class  map[uint64]int
	tenant map[uint64]string
	// passes[c] counts the choices of a higher class since c was last
	// chosen, while c had waiters; run[c] all choices of other classes.
	passes, run [core.NumPriorities]int
	// lastServed[c][t] is the choice number of tenant t's last choice in
	// class c; since[c][t] the choice number when t last entered the line.
	lastServed, since [core.NumPriorities]map[string]int
	lastID            map[[2]string]uint64
	choices           int
	maxRun            int
	chosen, gone      map[uint64]bool
}

func newWatch(t testing.TB, share int) *watch {
	w := &watch{t: t, share: share, class: map[uint64]int{}, tenant: map[uint64]string{},
		lastID: map[[2]string]uint64{}, chosen: map[uint64]bool{}, gone: map[uint64]bool{}}
	for c := range w.lastServed {
		w.lastServed[c], w.since[c] = map[string]int{}, map[string]int{}
	}
	return w
}

func (w *watch) count(c int, t string) int {
	n := 0
	for id, cc := range w.class {
		if cc == c && (t == "" || w.tenant[id] == t) {
			n++
		}
	}
	return n
}

func (w *watch) arrive(id uint64, c int, t string) {
	if w.count(c, t) == 0 {
		w.since[c][t] = w.choices
	}
	w.class[id], w.tenant[id] = c, t
}

func (w *watch) leave(id uint64) {
	if _, ok := w.class[id]; !ok {
		return
	}
	c := w.class[id]
	delete(w.class, id)
	delete(w.tenant, id)
	w.gone[id] = true
	if w.count(c, "") == 0 {
		w.passes[c], w.run[c] = 0, 0
	}
}

// choose checks the choice of id.
func (w *watch) choose(id uint64) {
	t := w.t
	t.Helper()
	c, ok := w.class[id]
	if !ok {
		t.Fatalf("waiter %d chosen but not in line (chosen before: %v, gone: %v)", id, w.chosen[id], w.gone[id])
	}
	name := w.tenant[id]
	w.choices++
	// Arrival order within the tenant.
	key := [2]string{core.PriorityOfRank(c).String(), name}
	if id < w.lastID[key] {
		t.Fatalf("waiter %d of rank %d/%s chosen after %d, which came later", id, c, name, w.lastID[key])
	}
	w.lastID[key] = id
	// Class order: a lower class is chosen over a waiting higher one only
	// once it has been passed over Share times.
	for h := range c {
		if w.count(h, "") > 0 && w.passes[c] < w.share {
			t.Fatalf("waiter %d of rank %d chosen while rank %d waits, passed over only %d times (share %d)", id, c, h, w.passes[c], w.share)
		}
	}
	// Turns: every other tenant of the class in line since before this
	// tenant's last choice has had its turn since.
	if prev, ok := w.lastServed[c][name]; ok {
		for other, since := range w.since[c] {
			if other == name || w.count(c, other) == 0 || since >= prev {
				continue
			}
			if last, ok := w.lastServed[c][other]; !ok || last < prev {
				t.Fatalf("tenant %s of rank %d served twice while %s, in line throughout, was not", name, c, other)
			}
		}
	}
	w.lastServed[c][name] = w.choices
	delete(w.class, id)
	delete(w.tenant, id)
	w.chosen[id] = true
	if w.count(c, name) == 0 {
		delete(w.since[c], name)
	}
	for d := range w.passes {
		dc := d
		switch {
		case dc == c:
			w.passes[d], w.run[d] = 0, 0
		case w.count(dc, "") == 0:
			w.passes[d], w.run[d] = 0, 0
		default:
			if dc > c {
				w.passes[d]++
			}
			w.run[d]++
			w.maxRun = max(w.maxRun, w.run[d])
			if limit := w.share + core.NumPriorities - 2; w.run[d] > limit {
				t.Fatalf("rank %d passed over %d times in a row, more than %d", dc, w.run[d], limit)
			}
		}
	}
}

// TestQueueMatchesModel drives the Queue and the model with the same
// random operations — arrivals of every class and of skewed tenants,
// handoffs, claims taken, refused and left, heads admitted, waiters
// leaving, time passing so that claims lapse — and requires the same
// answer to every step: who is handed a unit, who is the head, the
// depths and the positions. The watch holds every choice to the rules.
func TestQueueMatchesModel(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			runModel(t, seed, 1500)
		})
	}
}

// mq pairs the Queue with the model and the watch.
type mq struct {
	t      *testing.T
	clk    *backendtest.FakeClock
	q      *fairqueue.Queue
	m      *model
	w      *watch
	ws     map[uint64]*fairqueue.Waiter
	ends   map[uint64]time.Time // claim ends, for the model
	ttl    time.Duration
	freed  []string // labels of claims that came back to no one
	lapsed map[uint64]bool
}

func newMQ(t *testing.T, share int) *mq {
	x := &mq{t: t, clk: backendtest.NewFakeClock(epoch), m: newModel(share), w: newWatch(t, share),
		ws: map[uint64]*fairqueue.Waiter{}, ends: map[uint64]time.Time{}, ttl: time.Second, lapsed: map[uint64]bool{}}
	x.q = fairqueue.New(fairqueue.Config{Share: share, ClaimTTL: x.ttl}, x.clk, &sync.Mutex{}, func(l string) { x.freed = append(x.freed, l) })
	return x
}

// modelLapse lets the model's claims lapse as the Queue's do.
func (x *mq) modelLapse() {
	now := x.clk.Now()
	for len(x.m.claims) > 0 && !now.Before(x.ends[x.m.claims[0]]) {
		id := x.m.claims[0]
		x.m.claims = x.m.claims[1:]
		x.lapsed[id] = true
		x.modelHand(x.m.label[id])
	}
}

// modelHand hands a unit in the model and the watch; "" when no one.
func (x *mq) modelHand(label string) uint64 {
	fromFront := len(x.m.front) > 0
	id := x.m.hand(label)
	if id == 0 {
		return 0
	}
	if !fromFront {
		x.w.choose(id)
	}
	x.ends[id] = x.clk.Now().Add(x.ttl)
	return id
}

func runModel(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 99))
	share := 1 + rng.IntN(5)
	x := newMQ(t, share)
	tenants := []string{"a", "a", "a", "a", "b", "b", "c", "d", "e"}
	for step := range steps {
		where := fmt.Sprintf("seed %d step %d", seed, step)
		op := rng.IntN(100)
		switch {
		case op < 40:
			c := rng.IntN(core.NumPriorities)
			name := tenants[rng.IntN(len(tenants))]
			x.modelLapse()
			wantAhead := x.m.ahead(c, name)
			gotAhead, _ := x.q.Estimate(core.PriorityOfRank(c), name)
			if gotAhead != wantAhead {
				t.Fatalf("%s: estimate for rank %d/%s: ahead %d, model %d", where, c, name, gotAhead, wantAhead)
			}
			w, err := x.q.Enqueue(core.PriorityOfRank(c), name, time.Time{}, fairqueue.NoRetry)
			if err != nil {
				t.Fatal(err)
			}
			x.ws[w.ID()] = w
			x.m.enqueue(w.ID(), c, name)
			x.w.arrive(w.ID(), c, name)
		case op < 65:
			label := []string{"s0", "s1"}[rng.IntN(2)]
			x.modelLapse()
			want := x.modelHand(label)
			got := x.q.Hand(label)
			if (got == nil) != (want == 0) || got != nil && got.ID() != want {
				t.Fatalf("%s: hand went to %v, model %d", where, got, want)
			}
		case op < 78 && len(x.m.claims) > 0:
			// A claim is taken, or refused and returned to the front.
			x.modelLapse()
			if len(x.m.claims) == 0 {
				break
			}
			id := x.m.claims[rng.IntN(len(x.m.claims))]
			w := x.ws[id]
			if l, ok := x.q.Claim(w); !ok || l != x.m.label[id] {
				t.Fatalf("%s: waiter %d holds claim %q %v, model %q", where, id, l, ok, x.m.label[id])
			}
			if rng.IntN(3) == 0 {
				x.q.Requeue(w, 0)
				x.m.requeue(id)
			} else {
				x.q.Admitted(w)
				x.m.admitted(id)
			}
		case op < 84:
			// The head is admitted.
			x.modelLapse()
			id := x.m.head()
			h := x.q.Head()
			if (h == nil) != (id == 0) || h != nil && h.ID() != id {
				t.Fatalf("%s: head %v, model %d", where, h, id)
			}
			if h == nil {
				break
			}
			if x.m.inLine(id) {
				x.w.choose(id)
			}
			x.q.Admitted(h)
			x.m.admitted(id)
		case op < 94 && len(x.ws) > 0:
			// Someone leaves: in line, in front, or holding a claim.
			x.modelLapse()
			ids := make([]uint64, 0, len(x.ws))
			for id := range x.ws {
				ids = append(ids, id)
			}
			slices.Sort(ids)
			id := ids[rng.IntN(len(ids))]
			w := x.ws[id]
			if slices.Contains(x.m.claims, id) {
				x.m.claims = slices.DeleteFunc(x.m.claims, func(v uint64) bool { return v == id })
				x.modelHand(x.m.label[id])
			} else {
				x.m.leave(id)
			}
			x.w.leave(id)
			x.q.Leave(w)
			delete(x.ws, id)
		default:
			x.clk.Advance(time.Duration(rng.IntN(700)) * time.Millisecond)
		}
		x.check(where)
	}
}

// check compares what can be read of the Queue with the model.
func (x *mq) check(where string) {
	t := x.t
	x.modelLapse()
	x.q.Lapse()
	id := x.m.head()
	if h := x.q.Head(); (h == nil) != (id == 0) || h != nil && h.ID() != id {
		t.Fatalf("%s: head %v, model %d", where, h, id)
	}
	d := x.q.Depth()
	for c := range d {
		if d[c] != x.m.waiting(c) {
			t.Fatalf("%s: depth of %d is %d, model %d", where, c, d[c], x.m.waiting(c))
		}
	}
	if x.q.Claims() != len(x.m.claims) || x.q.Busy() != x.m.busy() {
		t.Fatalf("%s: claims %d busy %v, model %d %v", where, x.q.Claims(), x.q.Busy(), len(x.m.claims), x.m.busy())
	}
	for id, w := range x.ws {
		if x.lapsed[id] {
			if x.q.Queued(w) {
				t.Fatalf("%s: waiter %d lapsed in the model but is queued", where, id)
			}
			delete(x.ws, id)
			x.w.leave(id)
		}
	}
}
