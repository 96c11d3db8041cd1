package fairqueue

import "github.com/polygateway/polygateway/core"

// order is the discipline's state: per class, the ring of tenants that
// have waiters (the first is the tenant whose turn is next) and the
// class's skip count; per tenant, its waiters in arrival order. Every
// operation is O(1) but ahead (O(tenants of one class)).
type order struct {
	share   int
	classes [core.NumPriorities]classOrder // by Priority.Rank
}

type classOrder struct {
	first, last *tenant
	tenants     map[string]*tenant
	n           int // waiters
	// skipped counts the choices of a higher class since this class was
	// last chosen, while it had waiters.
	skipped int
}

// tenant is one tenant's waiters of one class, and its place in the
// class's ring.
type tenant struct {
	name       string
	list       // its waiters in arrival order
	prev, next *tenant
}

// len returns the number of waiters of every class.
func (o *order) len() int {
	n := 0
	for i := range o.classes {
		n += o.classes[i].n
	}
	return n
}

// add puts w at the back of its tenant's waiters; a tenant that had none
// joins its class's ring at the back.
func (o *order) add(w *Waiter, name string) {
	co := &o.classes[w.class.Rank()]
	t := co.tenants[name]
	if t == nil {
		if co.tenants == nil {
			co.tenants = make(map[string]*tenant)
		}
		t = &tenant{name: name}
		co.tenants[name] = t
		t.prev = co.last
		if co.last != nil {
			co.last.next = t
		} else {
			co.first = t
		}
		co.last = t
	}
	w.tenant = t
	t.push(w)
	co.n++
}

// remove takes w out of its tenant's waiters; a tenant left with none
// leaves the ring, and a class left with none forgets its skip count.
func (o *order) remove(w *Waiter) {
	co := &o.classes[w.class.Rank()]
	t := w.tenant
	t.remove(w)
	w.tenant = nil
	co.n--
	if t.n == 0 {
		co.unring(t)
		delete(co.tenants, t.name)
	}
	if co.n == 0 {
		co.skipped = 0
	}
}

func (co *classOrder) unring(t *tenant) {
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		co.first = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	} else {
		co.last = t.prev
	}
	t.prev, t.next = nil, nil
}

// choose returns the rank of the class to serve next: the due class
// passed over most (a tie to the higher class), else the highest class
// with waiters.
func (o *order) choose() (int, bool) {
	best := -1
	for c := range o.classes {
		co := &o.classes[c]
		if co.n > 0 && co.skipped >= o.share && (best < 0 || co.skipped > o.classes[best].skipped) {
			best = c
		}
	}
	if best >= 0 {
		return best, true
	}
	for c := range o.classes {
		if o.classes[c].n > 0 {
			return c, true
		}
	}
	return 0, false
}

// next returns the waiter the discipline serves next, or nil.
func (o *order) next() *Waiter {
	c, ok := o.choose()
	if !ok {
		return nil
	}
	return o.classes[c].first.first
}

// serve takes w out as the one chosen: its tenant, if it was first in
// the ring, goes to the back when it still has waiters; the lower
// classes with waiters count one more pass, and w's class starts again.
func (o *order) serve(w *Waiter) {
	c := w.class.Rank()
	co := &o.classes[c]
	t := w.tenant
	o.remove(w)
	if t.n > 0 && co.first == t && co.last != t {
		co.unring(t)
		t.prev = co.last
		co.last.next = t
		co.last = t
	}
	co.skipped = 0
	for d := c + 1; d < core.NumPriorities; d++ {
		if o.classes[d].n > 0 {
			o.classes[d].skipped++
		}
	}
}

// ahead returns how many waiters the discipline serves, among those of
// class c, before the waiter with index r in the waiters of tenant name
// (r = that tenant's count for a waiter not yet added): in turn, every
// tenant before it in the ring gives min(its count, r+1), every tenant
// after it min(its count, r). Choices of other classes are not counted.
func (o *order) ahead(c core.Priority, name string, r int) int {
	co := &o.classes[c.Rank()]
	n, after := r, false
	for t := co.first; t != nil; t = t.next {
		switch {
		case t.name == name:
			after = true
		case after:
			n += min(t.n, r)
		default:
			n += min(t.n, r+1)
		}
	}
	return n
}
