package fairqueue

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// What the tests read of a Queue and its waiters beyond what the backends
// use.

// Class returns the waiter's class.
func (w *Waiter) Class() core.Priority { return w.class }

// Len returns the number of waiters, holders of claims included.
func (q *Queue) Len() int { return q.ord.len() + q.front.n + q.claims.n }

// Depth returns the number of waiters in line per class, indexed by
// core.Priority.Rank (holders of claims and waiters returned to the front
// not counted).
func (q *Queue) Depth() [core.NumPriorities]int {
	var d [core.NumPriorities]int
	for c := range d {
		d[c] = q.ord.classes[c].n
	}
	return d
}

// Claims returns the number of units reserved for woken waiters.
func (q *Queue) Claims() int { return q.claims.n }

// Estimate returns where a new waiter of class and tenant would stand:
// how many waiters would be admitted before it, and when it would be
// admitted at the recent interval (0 when unknown).
func (q *Queue) Estimate(class core.Priority, name string) (ahead int, wait time.Duration) {
	if !class.Valid() {
		return 0, 0
	}
	ahead = q.front.n + q.higher(class) + q.ord.ahead(class, name, q.count(class, name))
	return ahead, q.est.wait(ahead)
}

// Interval returns the recent interval between admissions: the mean of
// the last few, weighted to the latest (0 before the first).
func (q *Queue) Interval() time.Duration { return time.Duration(q.est.avg) * time.Microsecond }
