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

// TestFakeClockAfterFuncRunsOnTheMoveThatReachesIt: an AfterFunc function
// runs within the Advance that reaches its time, not before, and never
// once Stop reported true; a function that arms another is not held up.
func TestFakeClockAfterFuncRunsOnTheMoveThatReachesIt(t *testing.T) {
	t.Parallel()
	c := NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var ran, stopped, again int
	c.AfterFunc(time.Second, func() {
		ran++
		c.AfterFunc(time.Second, func() { again++ })
	})
	st := c.AfterFunc(time.Second, func() { stopped++ })
	if st.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	c.Advance(999 * time.Millisecond)
	if ran != 0 {
		t.Fatal("the function ran before its time")
	}
	if !st.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	c.Advance(time.Millisecond)
	if ran != 1 || stopped != 0 || again != 0 {
		t.Fatalf("after reaching 1s: ran %d, stopped ran %d, re-armed ran %d; want 1, 0, 0", ran, stopped, again)
	}
	c.Advance(time.Second)
	if again != 1 || c.Timers() != 0 {
		t.Fatalf("after 2s: re-armed ran %d, %d timers left; want 1, 0", again, c.Timers())
	}
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
}
