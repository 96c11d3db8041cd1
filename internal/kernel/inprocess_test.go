package kernel

import (
	"testing"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// remoteBreaker wraps a memory breaker, as a breaker reached over a network
// would stand in for one: the kernel cannot know it never waits.
type remoteBreaker struct{ core.Breaker }

// TestInProcessIsTheMemoryBackendsComposed shows the engine finishes a
// call on the memory backends without a deadline of its own, and that any
// other limiter, breaker or admitter takes that away.
func TestInProcessIsTheMemoryBackendsComposed(t *testing.T) {
	t.Parallel()
	l, b := memory.NewLimiter(), memory.NewBreaker()
	for _, tc := range []struct {
		name string
		b    backends
		want bool
	}{
		{"memory limiter and breaker", backends{limiter: l, breaker: b}, true},
		{"a breaker of another package", backends{limiter: l, breaker: remoteBreaker{b}}, false},
		{"a native admitter", backends{limiter: l, breaker: b, admitter: core.ComposeAdmitter(l, b)}, false},
	} {
		if got := inProcess(tc.b); got != tc.want {
			t.Errorf("%s: inProcess = %v; want %v", tc.name, got, tc.want)
		}
	}
}
