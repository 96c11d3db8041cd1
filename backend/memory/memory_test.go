package memory_test

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestLimiterSuite(t *testing.T) {
	backendtest.RunLimiterSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Limiter {
		return memory.NewLimiter(memory.WithClock(clk))
	})
}

func TestBreakerSuite(t *testing.T) {
	backendtest.RunBreakerSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Breaker {
		return memory.NewBreaker(memory.WithClock(clk))
	})
}

func TestCacheSuite(t *testing.T) {
	backendtest.RunCacheSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Cache {
		return memory.NewCache(memory.WithClock(clk))
	})
}

// switchClock reads the clock of the subtest running now, the way a shared
// backend's test-only time source would.
type switchClock struct {
	cur atomic.Pointer[backendtest.FakeClock]
}

func (s *switchClock) Now() time.Time { return s.cur.Load().Now() }

// NewTimer is never used by the backends.
func (*switchClock) NewTimer(d time.Duration) core.Timer { return core.SystemClock{}.NewTimer(d) }
func (*switchClock) AfterFunc(d time.Duration, f func()) core.Timer {
	return core.SystemClock{}.AfterFunc(d, f)
}

func newSwitchClock(t *testing.T) *switchClock {
	t.Helper()
	s := &switchClock{}
	s.cur.Store(backendtest.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)))
	return s
}

// TestSuitesShareOneBackend runs every suite against a single instance, as
// a shared (Redis) backend runs them: the subtests must not see each other.
func TestSuitesShareOneBackend(t *testing.T) {
	clk := newSwitchClock(t)
	l := memory.NewLimiter(memory.WithClock(clk))
	b := memory.NewBreaker(memory.WithClock(clk))
	c := memory.NewCache(memory.WithClock(clk))
	backendtest.RunLimiterSuite(t, func(_ *testing.T, sub *backendtest.FakeClock) core.Limiter {
		clk.cur.Store(sub)
		return l
	})
	backendtest.RunBreakerSuite(t, func(_ *testing.T, sub *backendtest.FakeClock) core.Breaker {
		clk.cur.Store(sub)
		return b
	})
	backendtest.RunCacheSuite(t, func(_ *testing.T, sub *backendtest.FakeClock) core.Cache {
		clk.cur.Store(sub)
		return c
	})
}

func TestAdmitterSuite(t *testing.T) {
	backendtest.RunAdmitterSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l, b := memory.NewLimiter(memory.WithClock(clk)), memory.NewBreaker(memory.WithClock(clk))
		return backendtest.AdmitterBackend{Admitter: core.ComposeAdmitter(l, b), Limiter: l, Breaker: b}
	})
}
