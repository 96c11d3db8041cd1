// Package backendtest is the conformance suite of the governance ports:
// core.Limiter (with its spend budgets), core.Breaker (with its switch and
// pushback), core.Cache and core.Admitter (RunAdmitterSuite,
// given the Admitter with the Limiter and Breaker whose state it changes;
// RunAdmitterQueueSuite for one whose limiter queues the calls that find
// the gates full).
//
// Every backend runs the same suite from its own tests, so the in-process
// backend (backend/memory) and a shared one (Redis) are held to one set of
// semantics:
//
//	func TestLimiter(t *testing.T) {
//		backendtest.RunLimiterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) core.Limiter {
//			return memory.NewLimiter(memory.WithClock(clk))
//		})
//	}
//
// Time only moves through the FakeClock handed to the constructor; the suite
// never sleeps, so a backend must read time only through that clock (a
// shared backend uses a test-only time source that reads it). Each subtest
// uses scope, source and key names derived from its own t.Name(), so one
// shared backend instance can serve every subtest without cleanup.
//
// The suites pin the exact semantics documented on each Run function; where
// the port contract leaves a choice open (the breaker's suppression rule,
// the fencing of a timed-out probe holder, the sliding-window boundary), the
// suite's choice is the one every backend must make.
//
// Every limiter enforces spend budgets and every breaker has the
// operator's switch and shares pushback (the ports require them): the
// Budget*, Switch* and Pushback* subtests fail for a backend without them.
// One choice is the backend's to declare: BudgetsPerScope, for a backend
// that counts a budget per scope or pool rather than across scopes (Redis
// Cluster).
//
// testdata/outside is a backend in a module of its own, written against
// the ports alone (it delegates to backend/memory) and run against every
// suite; this package's tests build and test it with the go command, off
// the network, so that the ports and the suites stay usable from outside
// this module.
package backendtest
