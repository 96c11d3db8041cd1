package backendtest

import (
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// FakeClock is a core.Clock that moves only when told to; its timers fire
// when Advance or Set moves it past their deadline. It is safe for
// concurrent use. Times it returns carry no monotonic reading. The
// functions of its AfterFunc timers run in the goroutine of the Advance or
// Set that fired them, after the clock's lock is released, so that
// Advance returns once they have run.
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
	fns := c.fireLocked()
	c.mu.Unlock()
	runAll(fns)
}

// Set moves the clock to t and fires the timers whose deadline it reached.
func (c *FakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t.Round(0)
	fns := c.fireLocked()
	c.mu.Unlock()
	runAll(fns)
}

// NewTimer returns a timer that fires once the clock reaches now + d (at
// once when d <= 0).
func (c *FakeClock) NewTimer(d time.Duration) core.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	c.fireLocked() // no AfterFunc timer is due: Advance and Set fired them
	return t
}

// AfterFunc returns a timer that calls f once the clock reaches now + d,
// in the goroutine of the Advance or Set that moves it there; when d <= 0,
// f starts at once in a goroutine of its own.
func (c *FakeClock) AfterFunc(d time.Duration, f func()) core.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.timers = append(c.timers, t)
	return t
}

// Timers reports how many timers are waiting to fire (tests use it to know
// that a waiter is parked before they advance the clock).
func (c *FakeClock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fireLocked fires the timers that are due: it sends on the channels of
// NewTimer timers and returns the functions of AfterFunc timers, which the
// caller runs once it has released mu.
func (c *FakeClock) fireLocked() []func() {
	var fns []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		switch {
		case c.now.Before(t.at):
			kept = append(kept, t)
		case t.f != nil:
			fns = append(fns, t.f)
		default:
			t.ch <- c.now
		}
	}
	clear(c.timers[len(kept):])
	c.timers = kept
	return fns
}

// runAll calls the functions of the AfterFunc timers a move fired.
func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

type fakeTimer struct {
	c  *FakeClock
	at time.Time
	ch chan time.Time // nil for an AfterFunc timer
	f  func()         // the function of an AfterFunc timer
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
