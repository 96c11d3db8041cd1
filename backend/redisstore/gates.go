package redisstore

import (
	"time"

	"github.com/polygateway/polygateway/core"
)

// rateWindow is the sliding window of the RPM and TPM gates.
const rateWindow = 60 * time.Second

// The gate kinds the scripts know (lua/lib/gates.lua).
const (
	// kindConc holds at most limit slots at once: the level's slots.
	kindConc = "conc"
	// kindRate grants at most limit requests per window: the level's log.
	kindRate = "rate"
	// kindSum grants while the amounts reserved in the window stay within
	// limit: the level's log and book; the amount is reserved at the
	// acquire and settled on release.
	kindSum = "sum"
)

// The levels of gates: where a permit's state lives. Each has its own
// three keys (slots, log, tok) and its own member (see keys.go).
const (
	levelSource = iota
	levelGlobal
	numLevels
)

// gateDef describes one gate to the scripts.
type gateDef struct {
	gate   core.Gate
	kind   string
	level  int
	window time.Duration // rate and sum gates
	// limit returns the gate's limit for req (0 = off) and, for a sum
	// gate, the amount req reserves.
	limit func(req *core.PermitRequest) (limit, amount int)
	// settle returns, for a sum gate, the amount a release settles to
	// under s (SettleActual; the scripts apply estimate and refund).
	settle func(s core.Settlement) int
}

// gateDefs are the gates, in the order the scripts check them (the order
// of the core.Gate constants). A new gate is one entry here; a new kind of
// gate is one more branch in lua/lib/gates.lua; a new level one more
// constant above, with its keys in keys.go. A spend budget, for example,
// is a sum gate on a level of its own (its own window; the amount micro-USD
// reserved at admission and settled to the actual cost).
var gateDefs = [...]gateDef{
	{gate: core.GateSourceConcurrency, kind: kindConc, level: levelSource,
		limit: func(r *core.PermitRequest) (int, int) { return r.SourceLimits.MaxConcurrency, 0 }},
	{gate: core.GateSourceRPM, kind: kindRate, level: levelSource, window: rateWindow,
		limit: func(r *core.PermitRequest) (int, int) { return r.SourceLimits.RPM, 0 }},
	{gate: core.GateSourceTPM, kind: kindSum, level: levelSource, window: rateWindow,
		limit:  func(r *core.PermitRequest) (int, int) { return r.SourceLimits.TPM, max(r.Tokens, 0) },
		settle: settleTokens},
	{gate: core.GateGlobalConcurrency, kind: kindConc, level: levelGlobal,
		limit: func(r *core.PermitRequest) (int, int) { return r.GlobalLimits.MaxConcurrency, 0 }},
	{gate: core.GateGlobalRPM, kind: kindRate, level: levelGlobal, window: rateWindow,
		limit: func(r *core.PermitRequest) (int, int) { return r.GlobalLimits.RPM, 0 }},
	{gate: core.GateGlobalTPM, kind: kindSum, level: levelGlobal, window: rateWindow,
		limit:  func(r *core.PermitRequest) (int, int) { return r.GlobalLimits.TPM, max(r.Tokens, 0) },
		settle: settleTokens},
}

func settleTokens(s core.Settlement) int { return max(s.Tokens, 0) }

// levelWindow is each level's log window, and levelSettle the settle
// function of its sum gate, derived from gateDefs.
var (
	levelWindow [numLevels]time.Duration
	levelSettle [numLevels]func(core.Settlement) int
)

func init() {
	for _, d := range gateDefs {
		if d.window > 0 {
			levelWindow[d.level] = d.window
		}
		if d.settle != nil {
			levelSettle[d.level] = d.settle
		}
	}
}

// The low bits of a lease say where the acquire stored the permit and how
// long its lease runs, so that Release (and a reclaim after a lost reply)
// touch only those keys and know when to give up:
//
//	bits 2i, 2i+1  level i's slots, level i's log hold the permit
//	bit 8          the permit's keys are its pool's
//	bits 9-14      c: the lease runs less than 2^c ms (0 = no expiry)
//	bits 15-63     random
const (
	leaseLevels   = 0xff
	leasePooled   = 1 << 8
	leaseTTLShift = 9
	leaseTTLMask  = 0x3f << leaseTTLShift
	leaseMeta     = 1<<15 - 1
)

// slotsBit and logBit are level i's bits of a lease.
func slotsBit(i int) uint64 { return 1 << (2 * i) }
func logBit(i int) uint64   { return 2 << (2 * i) }

// leaseEnd returns an upper bound of when the lease of a permit acquired at
// t ends, and false when it never does.
func leaseEnd(lease uint64, t time.Time) (time.Time, bool) {
	c := (lease & leaseTTLMask) >> leaseTTLShift
	if c == 0 || c > 40 { // 2^40 ms is 35 years: as good as never
		return time.Time{}, false
	}
	return t.Add(time.Duration(1<<c) * time.Millisecond), true
}
