package memory_test

import (
	"testing"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// queueConfig is the queue the conformance suite expects.
var queueConfig = memory.QueueConfig{Share: backendtest.SuiteQueueShare, ClaimTTL: backendtest.SuiteClaimTTL}

func TestAdmitterQueueSuite(t *testing.T) {
	backendtest.RunAdmitterQueueSuite(t, func(_ *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l := memory.NewLimiter(memory.WithClock(clk), memory.WithQueue(queueConfig))
		b := memory.NewBreaker(memory.WithClock(clk))
		return backendtest.AdmitterBackend{Admitter: core.ComposeAdmitter(l, b), Limiter: l, Breaker: b}
	})
}
