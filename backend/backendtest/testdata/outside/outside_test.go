package outside_test

import (
	"testing"

	"example.com/outside"
	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

func TestLimiterSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunLimiterSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Limiter {
		return outside.NewLimiter(memory.WithClock(clk))
	})
}

func TestBreakerSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunBreakerSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Breaker {
		return outside.NewBreaker(memory.WithClock(clk))
	})
}

func TestCacheSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunCacheSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) core.Cache {
		return outside.NewCache(memory.WithClock(clk))
	})
}

func TestAdmitterSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunAdmitterSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l, b := outside.NewLimiter(memory.WithClock(clk)), outside.NewBreaker(memory.WithClock(clk))
		return backendtest.AdmitterBackend{Admitter: outside.NewAdmitter(l, b), Limiter: l, Breaker: b}
	})
}

func TestAdmitterQueueSuite(t *testing.T) {
	t.Parallel()
	backendtest.RunAdmitterQueueSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l := outside.NewLimiter(memory.WithClock(clk), memory.WithQueue(memory.QueueConfig{Share: backendtest.SuiteQueueShare, ClaimTTL: backendtest.SuiteClaimTTL}))
		b := outside.NewBreaker(memory.WithClock(clk))
		return backendtest.AdmitterBackend{Admitter: outside.NewAdmitter(l, b), Limiter: l, Breaker: b}
	})
}
