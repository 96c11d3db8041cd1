package backendtest

import (
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// FakeClock is a core.Clock that moves only when told to; its timers fire
// when Advance or Set moves it past their deadline. It is safe for
// concurrent use. Times it returns carry no monotonic reading.
type FakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
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

// Advance moves the clock forward by d (backward when d is negative) and
// fires the timers whose deadline it reached.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.fireLocked()
	c.mu.Unlock()
}

// Set moves the clock to t and fires the timers whose deadline it reached.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.Round(0)
	c.fireLocked()
	c.mu.Unlock()
}

// NewTimer returns a timer that fires once the clock reaches now + d (at
// once when d <= 0).
func (c *FakeClock) NewTimer(d time.Duration) core.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fireLocked()
	return t
}

// Timers reports how many timers are waiting to fire (tests use it to know
// that a waiter is parked before they advance the clock).
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

func (c *FakeClock) fireLocked() {
	kept := c.timers[:0]
	for _, t := range c.timers {
		if c.now.Before(t.at) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

type fakeTimer struct {
	c  *FakeClock
	at time.Time
	ch chan time.Time
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, x := range t.c.timers {
		if x == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}
