package backendtest

import (
	"sync"
	"testing"
	"time"
)

func TestFakeClock(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFakeClock(start)
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Advance(90 * time.Second)
	if got := c.Now().Sub(start); got != 90*time.Second {
		t.Fatalf("after Advance: %v past start, want 90s", got)
	}
	c.Set(start.Add(time.Hour))
	if got := c.Now().Sub(start); got != time.Hour {
		t.Fatalf("after Set: %v past start, want 1h", got)
	}
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 100 {
				c.Advance(time.Millisecond)
				_ = c.Now()
			}
		})
	}
	wg.Wait()
	if got := c.Now().Sub(start); got != time.Hour+1600*time.Millisecond {
		t.Fatalf("after concurrent Advance: %v past start, want 1h1.6s", got)
	}
}

func TestFakeClockDropsMonotonicReading(t *testing.T) {
	now := time.Now()
	c := NewFakeClock(now)
	c.Advance(time.Second)
	if got, want := c.Now().String(), now.Round(0).Add(time.Second).String(); got != want {
		t.Fatalf("Now = %s, want %s", got, want)
	}
}
