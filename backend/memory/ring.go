package memory

import "time"

// minRing is the capacity a ring starts with.
const minRing = 16

// maxIdleRing is the largest capacity an empty ring keeps: a burst that grew
// it further (1.5 MiB of entries) gives the memory back once its window has
// drained. Below it a ring keeps its buffer, so a source that idles for a
// minute does not allocate when its traffic resumes; RPM limits up to 65,536
// never reach it.
const maxIdleRing = 1 << 16

// entry is one grant in a sliding-window log.
type entry struct {
	at     int64  // time of the acquire
	lease  uint64 // the permit's lease; increases along the ring
	amount int64  // tokens counted for TPM
}

// ring is a sliding-window log: a growable circular buffer of entries in
// acquire order, with the running sum of their amounts. Leases increase
// along it (they are drawn under the scope lock that appends), so an entry
// is found by binary search. It allocates only to grow.
type ring struct {
	buf    []entry // len is zero or a power of two
	head   int
	n      int
	tokens int64
}

// at returns the i-th oldest entry, 0 ≤ i < n.
func (r *ring) at(i int) *entry { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

func (r *ring) push(e entry) {
	if r.n == len(r.buf) {
		r.grow()
	}
	r.buf[(r.head+r.n)&(len(r.buf)-1)] = e
	r.n++
	r.tokens += e.amount
}

func (r *ring) grow() {
	buf := make([]entry, max(minRing, 2*len(r.buf)))
	if r.n > 0 {
		k := copy(buf, r.buf[r.head:])
		if k < r.n {
			copy(buf[k:], r.buf[:r.n-k])
		}
	}
	r.buf, r.head = buf, 0
}

// expire drops the entries made at or before cutoff.
func (r *ring) expire(cutoff int64) {
	for r.n > 0 {
		e := &r.buf[r.head]
		if e.at > cutoff {
			return
		}
		r.tokens -= e.amount
		r.head = (r.head + 1) & (len(r.buf) - 1)
		r.n--
	}
	r.head, r.tokens = 0, 0
	if len(r.buf) > maxIdleRing {
		r.buf = nil
	}
}

// find returns the index of lease's entry, or -1. The lease looked for is
// nearly always among the newest (a permit is released soon after its
// acquire), so the search gallops back from the newest entry and then
// bisects: O(log d) probes for an entry d from the end, where a bisection
// of the whole window would touch O(log n) entries across it.
func (r *ring) find(lease uint64) int {
	lo, hi := 0, r.n // the first entry with a lease ≥ lease is in [lo, hi]
	for step := 1; hi-step > lo; step <<= 1 {
		i := hi - step
		if r.at(i).lease < lease {
			lo = i + 1
			break
		}
		hi = i
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if r.at(mid).lease < lease {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo < r.n && r.at(lo).lease == lease {
		return lo
	}
	return -1
}

// settle sets the amount of lease's entry, if it is still in the window.
func (r *ring) settle(lease uint64, amount int64) {
	if i := r.find(lease); i >= 0 {
		e := r.at(i)
		r.tokens += amount - e.amount
		e.amount = amount
	}
}

// tpmRetry returns how long until tokens more fit under limit, as the
// oldest entries leave the window; 0 when they never can.
func (r *ring) tpmRetry(limit, tokens, now int64) time.Duration {
	if tokens > limit {
		return 0
	}
	left := r.tokens
	for i := range r.n {
		e := r.at(i)
		left -= e.amount
		if left+tokens <= limit {
			return time.Duration(e.at + rateWindow - now)
		}
	}
	return 0
}
