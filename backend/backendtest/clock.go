package backendtest

import (
	"sync"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// FakeClock is a core.Clock that moves only when told to. It is safe for
// concurrent use. Times it returns carry no monotonic reading.
type FakeClock struct {
	mu  sync.Mutex
	now time.Time
}

var _ core.Clock = (*FakeClock)(nil)

// NewFakeClock returns a clock standing at t.
func NewFakeClock(t time.Time) *FakeClock {
	return &FakeClock{now: t.Round(0)}
}

// Now returns the clock's current time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d is negative).
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// Set moves the clock to t.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.Round(0)
	c.mu.Unlock()
}
