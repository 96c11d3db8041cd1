package fairqueue_test

import (
	"slices"

	"github.com/polygateway/polygateway/core"
)

// model is the discipline written as plainly as it reads, on slices: the
// obviously-correct reference the Queue is compared with. ids are the
// waiters' numbers; every operation says what the Queue's does.
type model struct {
	share   int
	front   []uint64                                // returned to the front, in order
	claims  []uint64                                // holding a claim, in the order they lapse
	rings   [core.NumPriorities][]string            // tenants with waiters, the first's turn next
	lines   [core.NumPriorities]map[string][]uint64 // per tenant, in arrival order
	skipped [core.NumPriorities]int
	class   map[uint64]int
	tenant  map[uint64]string
	label   map[uint64]string
}

func newModel(share int) *model {
	m := &model{share: share, class: map[uint64]int{}, tenant: map[uint64]string{}, label: map[uint64]string{}}
	for c := range m.lines {
		m.lines[c] = map[string][]uint64{}
	}
	return m
}

func (m *model) waiting(c int) int {
	n := 0
	for _, ids := range m.lines[c] {
		n += len(ids)
	}
	return n
}

func (m *model) busy() bool {
	if len(m.front) > 0 {
		return true
	}
	for c := range m.lines {
		if m.waiting(c) > 0 {
			return true
		}
	}
	return false
}

func (m *model) enqueue(id uint64, c int, t string) {
	m.class[id], m.tenant[id] = c, t
	if len(m.lines[c][t]) == 0 {
		m.rings[c] = append(m.rings[c], t)
	}
	m.lines[c][t] = append(m.lines[c][t], id)
}

// choose: the due class passed over most (ties to the higher), else the
// highest class with waiters; -1 when none waits.
func (m *model) choose() int {
	best := -1
	for c := range m.lines {
		if m.waiting(c) > 0 && m.skipped[c] >= m.share && (best < 0 || m.skipped[c] > m.skipped[best]) {
			best = c
		}
	}
	if best >= 0 {
		return best
	}
	for c := range m.lines {
		if m.waiting(c) > 0 {
			return c
		}
	}
	return -1
}

// head: the first of the front, else the oldest waiter of the tenant
// whose turn it is in the chosen class; 0 when none.
func (m *model) head() uint64 {
	if len(m.front) > 0 {
		return m.front[0]
	}
	c := m.choose()
	if c < 0 {
		return 0
	}
	return m.lines[c][m.rings[c][0]][0]
}

// drop takes id out of its line (not as a choice).
func (m *model) drop(id uint64) {
	c, t := m.class[id], m.tenant[id]
	m.lines[c][t] = slices.DeleteFunc(m.lines[c][t], func(x uint64) bool { return x == id })
	if len(m.lines[c][t]) == 0 {
		delete(m.lines[c], t)
		m.rings[c] = slices.DeleteFunc(m.rings[c], func(x string) bool { return x == t })
	}
	if m.waiting(c) == 0 {
		m.skipped[c] = 0
	}
}

// serve takes id out as the one chosen.
func (m *model) serve(id uint64) {
	c, t := m.class[id], m.tenant[id]
	first := len(m.rings[c]) > 0 && m.rings[c][0] == t
	m.drop(id)
	if first && len(m.lines[c][t]) > 0 {
		m.rings[c] = append(slices.DeleteFunc(m.rings[c], func(x string) bool { return x == t }), t)
	}
	m.skipped[c] = 0
	for d := int(c) + 1; d < len(m.lines); d++ {
		if m.waiting(d) > 0 {
			m.skipped[d]++
		}
	}
}

func (m *model) inLine(id uint64) bool {
	return slices.Contains(m.lines[m.class[id]][m.tenant[id]], id)
}

// hand returns who gets a unit of label (0: no one).
func (m *model) hand(label string) uint64 {
	var id uint64
	if len(m.front) > 0 {
		id, m.front = m.front[0], m.front[1:]
	} else {
		if id = m.head(); id == 0 {
			return 0
		}
		m.serve(id)
	}
	m.claims = append(m.claims, id)
	m.label[id] = label
	return id
}

func (m *model) admitted(id uint64) {
	switch {
	case slices.Contains(m.claims, id):
		m.claims = slices.DeleteFunc(m.claims, func(x uint64) bool { return x == id })
	case slices.Contains(m.front, id):
		m.front = slices.DeleteFunc(m.front, func(x uint64) bool { return x == id })
	case m.inLine(id):
		m.serve(id)
	}
}

func (m *model) requeue(id uint64) {
	if slices.Contains(m.claims, id) {
		m.claims = slices.DeleteFunc(m.claims, func(x uint64) bool { return x == id })
		m.front = append(m.front, id)
	}
}

// leave takes out a waiter in line or in front (a holder of a claim
// leaves by handing its claim on: the caller does that).
func (m *model) leave(id uint64) {
	switch {
	case slices.Contains(m.front, id):
		m.front = slices.DeleteFunc(m.front, func(x uint64) bool { return x == id })
	case m.inLine(id):
		m.drop(id)
	}
}

// ahead is the position of a new waiter of class c and tenant t, as the
// package documentation defines it.
func (m *model) ahead(c int, t string) int {
	n := len(m.front)
	for d := range c {
		n += m.waiting(d)
	}
	r := len(m.lines[c][t])
	n += r
	after := false
	for _, u := range m.rings[c] {
		switch {
		case u == t:
			after = true
		case after:
			n += min(len(m.lines[c][u]), r)
		default:
			n += min(len(m.lines[c][u]), r+1)
		}
	}
	return n
}
