package proxy

import (
	"errors"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// TestTheDeltasHeldForABufferedAnswerCountInTheMemoryBudget: under
// buffer, every held delta has its place kept besides its text; a token
// stream's deltas are a few bytes each, so that bookkeeping (two ints a
// delta, in an array that doubles) would outweigh the text the budget
// counts: 10,000 one-byte deltas held 10 KB of text and 256 KiB of
// places. It is taken from the memory budget before the array grows, a
// delta that does not fit fails the stream as an answer too large, and
// the sink gives it all back when its request is done.
func TestTheDeltasHeldForABufferedAnswerCountInTheMemoryBudget(t *testing.T) {
	t.Parallel()
	budget := &bodyBudget{max: 64 << 10}
	k := &streamSink{buffer: true, mem: budget}
	var err error
	n := 0
	for ; n < 10_000 && err == nil; n++ {
		err = k.Delta("a", "")
	}
	if !errors.Is(err, core.ErrMemoryBudget) {
		t.Fatalf("10,000 held deltas in a 64 KiB budget: %v after %d, want the memory budget's refusal", err, n)
	}
	if used := budget.used.Load(); used > budget.max || used < int64(n)*pieceEndSize/2 {
		t.Errorf("%d bytes reserved for %d held deltas (budget %d)", used, n, budget.max)
	}
	k.release()
	if used := budget.used.Load(); used != 0 {
		t.Errorf("%d bytes still reserved after release", used)
	}
	k.release() // twice is harmless
	if used := budget.used.Load(); used != 0 {
		t.Errorf("%d bytes reserved after a second release", used)
	}
}
