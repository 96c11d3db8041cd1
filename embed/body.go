package embed

import (
	"errors"
	"fmt"
	"io"

	"github.com/polygateway/polygateway/core"
)

// errTooLarge is returned by bodyReader past its limit.
var errTooLarge = errors.New("response body too large")

// reserveStep is how much of a memory budget a bodyReader of unknown
// length takes at a time.
const reserveStep = 64 << 10

// bodyReader bounds an upstream answer: past limit bytes it fails with
// errTooLarge. With a budget it reserves, before reading into them, the
// bytes it reads (the whole Content-Length at once when reserve is
// called with it, else reserveStep at a time); a refused reservation
// fails the read with an error wrapping core.ErrMemoryBudget. release
// gives back what was reserved. A bodyReader is used by one goroutine.
type bodyReader struct {
	r     io.Reader
	n     int64
	limit int64

	budget   core.MemoryBudget
	reserved int64
	// sized is set once the whole Content-Length is reserved: the body
	// ends there (net/http ends it there too).
	sized bool
}

// errBudget is the read error of a refused reservation.
var errBudget = fmt.Errorf("embed: no room to read the answer: %w", core.ErrMemoryBudget)

func (b *bodyReader) Read(p []byte) (int, error) {
	if b.n >= b.limit {
		return 0, errTooLarge
	}
	if rem := b.limit - b.n; int64(len(p)) > rem {
		p = p[:rem]
	}
	if b.budget != nil && len(p) > 0 {
		if b.sized && b.n >= b.reserved {
			return 0, io.EOF
		}
		if b.n >= b.reserved {
			if !b.budget.Reserve(reserveStep) {
				return 0, errBudget
			}
			b.reserved += reserveStep
		}
		if room := b.reserved - b.n; int64(len(p)) > room {
			p = p[:room]
		}
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}

// reserve takes size bytes of the budget at once (a known Content-Length
// beyond what is reserved); false when the budget refuses them.
func (b *bodyReader) reserve(size int64) bool {
	if b.budget == nil || size <= b.reserved {
		return true
	}
	if !b.budget.Reserve(size - b.reserved) {
		return false
	}
	b.reserved, b.sized = size, true
	return true
}

// release gives back the reservation.
func (b *bodyReader) release() {
	if b.budget != nil && b.reserved > 0 {
		b.budget.Release(b.reserved)
	}
	b.reserved = 0
}

// take hands the reservation over to the caller, who releases it.
func (b *bodyReader) take() int64 {
	n := b.reserved
	b.reserved = 0
	return n
}
