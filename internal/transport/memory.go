package transport

import (
	"context"
	"errors"

	"github.com/polygateway/polygateway/core"
)

// An attempt holds in memory what it reads of an answer: a non-streamed
// body, and a stream's accumulated text. When the call's context carries a
// core.MemoryBudget (a gateway's, shared by every call it serves), the
// attempt reserves those bytes from it before it reads them — a body's
// declared length at once (else each window of its buffer), a stream's
// text in steps that double — and gives them back when the attempt ends.
// A reservation that does not fit ends the attempt at once with an error
// matching core.ErrMemoryBudget: the bytes are never read. Without a
// budget nothing is reserved. Error bodies, bounded by
// Config.MaxErrorBodyBytes, are not counted.

// minReserveStep is the smallest step in which a stream's text is reserved.
const minReserveStep = 4 << 10

// memReserve is an attempt's share of its call's memory budget.
type memReserve struct {
	b        core.MemoryBudget
	reserved int64
	used     int64
}

// init binds m to the budget of ctx, if any.
func (m *memReserve) init(ctx context.Context) {
	*m = memReserve{b: core.MemoryBudgetFrom(ctx)}
}

// errMemoryBudget is returned by grow when the budget has no room.
var errMemoryBudget = errors.New("memory budget full")

// grow counts n more bytes held, reserving ahead in steps that double. A
// nil m holds nothing.
func (m *memReserve) grow(n int64) error {
	if m == nil {
		return nil
	}
	m.used += n
	if m.b == nil || m.used <= m.reserved {
		return nil
	}
	step := max(m.reserved, m.used-m.reserved, minReserveStep)
	if !m.b.Reserve(step) {
		m.used -= n
		return errMemoryBudget
	}
	m.reserved += step
	return nil
}

// release gives back everything reserved.
func (m *memReserve) release() {
	if m.b != nil && m.reserved > 0 {
		m.b.Release(m.reserved)
	}
	*m = memReserve{}
}

// memoryError is the error of an attempt whose answer did not fit its
// call's memory budget. It matches core.ErrMemoryBudget and
// core.ErrGateway; it names no class of the source's failure: the source is
// not at fault.
type memoryError struct {
	source string
	held   int64
}

func (e *memoryError) Error() string {
	return "polygateway: transport: the answer of source " + e.source +
		" does not fit the memory budget for buffered bytes (" + formatBytes(e.held) + " held)"
}

// Unwrap returns core.ErrMemoryBudget.
func (e *memoryError) Unwrap() error { return core.ErrMemoryBudget }

// Is matches core.ErrGateway.
func (e *memoryError) Is(target error) bool { return target == core.ErrGateway }
