// Package budget holds the arithmetic of spend budgets that every backend
// shares: which budgets a request may name, when a budget refuses, and
// what a settlement leaves spent. Each backend applies it inside its own
// atomic step (backend/memory under its lock; backend/redisstore in its
// scripts, which repeat these rules in Lua and are held to them by the
// differential tests).
package budget

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// MaxAmount bounds every amount, in micro-USD (2^53, about 9 billion USD):
// a Limit above it is refused and costs are clamped to it, so that every
// amount is exact in a Lua number (a double) as well as in an int64.
const MaxAmount int64 = 1 << 53

// Problem returns the index of the first budget of bs that cannot be
// enforced and what is wrong with it, or -1 and "" when every one can. A
// budget needs a key, a Limit in (0, MaxAmount] and a Window of whole
// seconds, at least one; a request names each (Key, Window) once.
func Problem(bs []core.Budget) (int, string) {
	for i, b := range bs {
		switch {
		case b.Key == "":
			return i, "the key is empty"
		case b.Limit <= 0:
			return i, "the limit must be positive"
		case b.Limit > MaxAmount:
			return i, "the limit exceeds 2^53 micro-USD"
		case b.Window < time.Second:
			return i, "the window must be at least 1s"
		case b.Window%time.Second != 0:
			return i, "the window must be a whole number of seconds"
		}
		for _, o := range bs[:i] {
			if o.Key == b.Key && o.Window == b.Window {
				return i, "the request names it twice"
			}
		}
	}
	return -1, ""
}

// Clamp returns an amount as the backends count it: a negative one as 0,
// one above MaxAmount as MaxAmount.
func Clamp(amount int64) int64 { return min(max(amount, 0), MaxAmount) }

// Refuses reports whether a budget with spent counted in its window
// refuses a request of cost (already clamped): when the cost would take
// the spend past limit, or, for a cost of 0, when the spend has reached
// limit already.
func Refuses(spent, limit, cost int64) bool {
	if cost <= 0 {
		return spent >= limit
	}
	return spent > limit-cost
}

// Settled returns a window's spend after the release of a permit that
// reserved reserved in it: SettleActual replaces the reservation with
// s.Cost (clamped; the spend may go past the limit), SettleRefund removes
// it, SettleEstimate and any other kind keep it. It is never below 0.
func Settled(spent, reserved int64, s core.Settlement) int64 {
	switch s.Kind {
	case core.SettleActual:
		spent += Clamp(s.Cost) - reserved
	case core.SettleRefund:
		spent -= reserved
	}
	return max(spent, 0)
}

// Seconds returns b's window in whole seconds (at least 1).
func Seconds(b core.Budget) int64 { return max(int64(b.Window/time.Second), 1) }

// Start returns the start of b's window holding t, in Unix seconds:
// windows are aligned to the Unix epoch (core.Budget.WindowStart).
func Start(b core.Budget, t time.Time) int64 { return b.WindowStart(t).Unix() }
