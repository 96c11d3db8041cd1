package redisstore_test

import (
	"testing"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// The conformance suites run unchanged against Redis, the single node and
// a Redis Cluster of three masters: the FakeClock reaches the scripts
// through WithClock, so windows and cooldowns pass without sleeping. Every
// subtest uses names of its own under the test's prefix. On the cluster a
// budget is counted per scope (per pool): its keys carry the scope's hash
// tag, so that one script touches one slot.

// suiteOptions are the suites' options for tg.
func suiteOptions(tg target) []backendtest.SuiteOption {
	if tg.name == "cluster" {
		return []backendtest.SuiteOption{backendtest.BudgetsPerScope()}
	}
	return nil
}

func TestLimiterConformance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		backendtest.RunLimiterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) core.Limiter {
			return redisstore.NewLimiter(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
		}, suiteOptions(tg)...)
	})
}

func TestBreakerConformance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		backendtest.RunBreakerSuite(t, func(t *testing.T, clk *backendtest.FakeClock) core.Breaker {
			return redisstore.NewBreaker(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
		})
	})
}

func TestCacheConformance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		backendtest.RunCacheSuite(t, func(t *testing.T, clk *backendtest.FakeClock) core.Cache {
			return redisstore.NewCache(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
		})
	})
}

// TestAdmitterConformance holds the native Admitter, and the default
// composition over the Redis Limiter and Breaker, to the Admitter suite.
func TestAdmitterConformance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		t.Run("native", func(t *testing.T) {
			backendtest.RunAdmitterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
				l := redisstore.NewLimiter(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
				b := redisstore.NewBreaker(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
				a := redisstore.NewAdmitter(l, b)
				t.Cleanup(func() { _ = a.Close() })
				return backendtest.AdmitterBackend{Admitter: a, Limiter: l, Breaker: b}
			}, suiteOptions(tg)...)
		})
		t.Run("composed", func(t *testing.T) {
			backendtest.RunAdmitterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
				l := redisstore.NewLimiter(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
				b := redisstore.NewBreaker(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
				return backendtest.AdmitterBackend{Admitter: core.ComposeAdmitter(l, b), Limiter: l, Breaker: b}
			}, suiteOptions(tg)...)
		})
	})
}

// TestAdmitterQueueConformance holds the native Admitter with its queue
// to the queue suite, on the single node and on the cluster: the fake
// clock drives the scripts' time and the queue's timers.
func TestAdmitterQueueConformance(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		prefix := freshPrefix(t, tg.client)
		backendtest.RunAdmitterQueueSuite(t, func(t *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
			l := redisstore.NewLimiter(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
			b := redisstore.NewBreaker(tg.client, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
			a := redisstore.NewAdmitter(l, b, redisstore.WithQueue(redisstore.QueueConfig{
				Share: backendtest.SuiteQueueShare, ClaimTTL: backendtest.SuiteClaimTTL}))
			t.Cleanup(func() { _ = a.Close() })
			return backendtest.AdmitterBackend{Admitter: a, Limiter: l, Breaker: b}
		})
	})
}
