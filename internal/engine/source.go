package engine

import (
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Health model constants. The EWMA success score lives in [0, 1]; a source
// below healthyScore is "weak" and picked only when no healthy source is
// available. An idle weak source recovers toward 1 with time constant
// recoveryTau, computed lazily on read.
const (
	ewmaAlpha    = 0.2
	healthyScore = 0.5
	recoveryTau  = 30 * time.Second
)

// Adaptive concurrency constants: per source the limit starts at aimdStart
// in slow start, growing by slowStartGrowth per success (tripling every
// round trip) until the first 429 or latency signal (an attempt slower than
// slowStartLatency times the fastest seen); then AIMD: +1/limit per
// success, halved on 429. It is capped at max(aimdCap, MAX_CONCURRENCY).
// The start is small so that a burst of calls at a source nobody has heard
// from (it may be throttling) sends it at most four requests; the growth
// is steep so that a source that answers reaches the demanded concurrency
// in a few round trips all the same. Library constants, not settings.
const (
	aimdStart        = 4.0
	aimdCap          = 64.0
	aimdFloor        = 1.0
	slowStartGrowth  = 2.0
	slowStartLatency = 2.0
)

// hold kinds: why a source is in the local hold.
type holdKind uint8

const (
	holdNone holdKind = iota
	// holdFailed: the source just failed; soft (used when nothing else is eligible).
	holdFailed
	// holdTimeout: the source just timed out or stalled; soft.
	holdTimeout
	// holdRateLimited: a gate of the limiter is full; hard until expiry.
	holdRateLimited
	// holdPushedBack: the source's upstream answered 429 (here, or in
	// another process sharing the breaker); hard until the pushback ends.
	holdPushedBack
	// holdCircuitOpen: the breaker refused; hard until expiry.
	holdCircuitOpen
	// holdDisabled: an operator switched the source off; hard until
	// expiry (disabledRecheck), when the switch is read again.
	holdDisabled
)

// disabledRecheck is how long a switched-off source is skipped before its
// switch is read again: a source switched back on takes at most this long
// to receive calls from a process.
const disabledRecheck = time.Second

func (k holdKind) hard() bool {
	return k == holdRateLimited || k == holdPushedBack || k == holdCircuitOpen || k == holdDisabled
}

// sourceState is the engine's process-local view of one source. Its fields
// are safe for concurrent use.
type sourceState struct {
	cfg core.SourceConfig
	// breaker is the source's circuit configuration: the scope's, with the
	// source's overrides and its effective threshold (see newSourceState).
	breaker core.BreakerConfig
	// price is the blended price per token used by cost_aware (NaN = unpriced).
	price float64
	// modelPrice is the model's price when priced is true (budget reservations).
	modelPrice core.ModelPrice
	priced     bool

	// group is the source's place in the order of regions and tiers
	// (Engine.group), fixed when the engine is made.
	group int

	inflight atomic.Int64
	// lastState is the breaker state last reported to the observer.
	lastState atomic.Uint32

	mu        sync.Mutex
	score     float64
	scoreAt   time.Time
	aimd      float64
	aimdCap   float64
	slowStart bool
	// fastest is the shortest successful attempt seen (the latency signal's
	// reference).
	fastest   time.Duration
	holdUntil time.Time
	holdKind  holdKind
	pushbacks int
	// failures counts the failed attempts since the last answer (the hold
	// of a source that keeps failing grows with it).
	failures int
}

// newSourceState returns the state of source cfg in a scope whose breaker
// configuration is br. The source's circuit runs on br with the source's
// own values (cfg.Breaker) in place of the scope's: a FailThreshold, a
// Cooldown and a MaxCooldown of its own when set; without a MaxCooldown of
// its own, a Cooldown longer than the scope's cap is its cap (no doubling),
// as with the scope's default cap. The effective threshold is then
// max(threshold, 2×MAX_CONCURRENCY), whether the threshold is the scope's
// or the source's: with many calls in flight one outage fails that many
// at once.
func newSourceState(cfg core.SourceConfig, br core.BreakerConfig, pricing core.PricingTable) *sourceState {
	s := &sourceState{cfg: cfg, breaker: br, score: 1, aimd: aimdStart, slowStart: true, price: math.NaN()}
	s.aimdCap = math.Max(aimdCap, float64(cfg.Limits.MaxConcurrency))
	if o := cfg.Breaker; o != (core.BreakerOverride{}) {
		if o.FailThreshold > 0 {
			s.breaker.FailThreshold = o.FailThreshold
		}
		if o.Cooldown > 0 {
			s.breaker.Cooldown = o.Cooldown
			if o.MaxCooldown <= 0 && s.breaker.MaxCooldown > 0 {
				s.breaker.MaxCooldown = max(s.breaker.MaxCooldown, o.Cooldown)
			}
		}
		if o.MaxCooldown > 0 {
			s.breaker.MaxCooldown = o.MaxCooldown
		}
	}
	if th := cfg.Limits.MaxConcurrency * 2; th > s.breaker.FailThreshold {
		s.breaker.FailThreshold = th
	}
	if p, ok := pricing.Price(cfg.Model); ok {
		s.price = p.InputPer1M + p.OutputPer1M
		s.modelPrice, s.priced = p, true
	}
	return s
}

// healthLocked returns the score with idle recovery applied. Caller holds mu.
func (s *sourceState) healthLocked(now time.Time) float64 {
	if s.score >= 1 || s.scoreAt.IsZero() {
		return s.score
	}
	idle := now.Sub(s.scoreAt)
	if idle <= 0 {
		return s.score
	}
	return 1 - (1-s.score)*math.Exp(-float64(idle)/float64(recoveryTau))
}

// health returns the current EWMA success score.
func (s *sourceState) health(now time.Time) float64 {
	s.mu.Lock()
	h := s.healthLocked(now)
	s.mu.Unlock()
	return h
}

// observeLocked feeds one attempt's verdict into the health score. The
// caller holds mu.
func (s *sourceState) observeLocked(now time.Time, good bool) {
	h := s.healthLocked(now)
	if good {
		h = h*(1-ewmaAlpha) + ewmaAlpha
	} else {
		h *= 1 - ewmaAlpha
	}
	s.score, s.scoreAt = h, now
}

// settle carries out the process-local part of an attempt's effect on s
// in one step under one lock: the health verdict (an answer also resets
// the failure count; a failure other than a 429 counts one), the adaptive
// concurrency rule, and clearing a soft hold when clearSoft. It returns
// the count a hold rule scales with: the 429s in a row after a halving,
// else the failures since the last answer (0 when nothing counted one).
func (s *sourceState) settle(now time.Time, health verdict, aimd aimdRule, clearSoft bool, latency time.Duration) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	switch health {
	case healthGood:
		s.observeLocked(now, true)
		s.failures = 0
	case healthBad:
		s.observeLocked(now, false)
		if aimd != aimdHalve {
			s.failures++
			n = s.failures
		}
	}
	switch aimd {
	case aimdGrow:
		s.aimdSuccessLocked(latency)
	case aimdHalve:
		s.aimd = math.Max(aimdFloor, s.aimd/2)
		s.slowStart = false
		s.pushbacks++
		n = max(n, s.pushbacks)
	}
	if clearSoft && !s.holdKind.hard() {
		s.holdKind, s.holdUntil = holdNone, time.Time{}
	}
	return n
}

// blipReady reports whether a failure now would be a blip: the source is
// healthy and has neither failed nor answered 429 since its last answer (a
// source that is throttling is not blipping).
func (s *sourceState) blipReady(now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.healthLocked(now) >= healthyScore && s.failures == 0 && s.pushbacks == 0
}

// aimdSuccessLocked grows the adaptive limit after a success that took latency:
// by slowStartGrowth in slow start (unless latency is the signal that ends
// it), by 1/limit after. The caller holds mu.
func (s *sourceState) aimdSuccessLocked(latency time.Duration) {
	if s.slowStart && s.fastest > 0 && float64(latency) > slowStartLatency*float64(s.fastest) {
		s.slowStart = false
	}
	if latency > 0 && (s.fastest == 0 || latency < s.fastest) {
		s.fastest = latency
	}
	if s.slowStart {
		s.aimd = math.Min(s.aimdCap, s.aimd+slowStartGrowth)
	} else {
		s.aimd = math.Min(s.aimdCap, s.aimd+1/s.aimd)
	}
	s.pushbacks = 0
}

// claimSlot takes one of the source's adaptive-concurrency slots if one is
// free, atomically: of N calls racing for the last slot exactly one gets
// it. A limit that is not a whole number has only its whole slots (2.5
// admits 2 attempts at once). The holder gives it back with
// Engine.freeSlot.
func (s *sourceState) claimSlot() bool {
	limit := s.aimdLimit()
	for {
		cur := s.inflight.Load()
		if !slotFree(cur, limit) {
			return false
		}
		if s.inflight.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// slotFree reports whether one more attempt fits beside inflight under
// the adaptive limit: with it, no more than the limit are in flight.
func slotFree(inflight int64, limit float64) bool {
	return float64(inflight+1) <= limit
}

// aimdLimit returns the current adaptive concurrency limit.
func (s *sourceState) aimdLimit() float64 {
	s.mu.Lock()
	l := s.aimd
	s.mu.Unlock()
	return l
}

// setHold puts the source in the local hold until until. An active
// hard hold is only ever extended, never replaced by a soft one.
func (s *sourceState) setHold(now, until time.Time, kind holdKind) {
	s.mu.Lock()
	activeHard := s.holdKind.hard() && now.Before(s.holdUntil)
	switch {
	case activeHard && !kind.hard():
	case activeHard && !until.After(s.holdUntil):
	default:
		s.holdUntil, s.holdKind = until, kind
	}
	s.mu.Unlock()
}

// switchHold sets (off=true) or clears the hold of a switched-off source,
// whatever hold it had: the operator's word wins.
func (s *sourceState) switchHold(now time.Time, off bool) {
	s.mu.Lock()
	switch {
	case off:
		s.holdKind, s.holdUntil = holdDisabled, now.Add(disabledRecheck)
	case s.holdKind == holdDisabled:
		s.holdKind, s.holdUntil = holdNone, time.Time{}
	}
	s.mu.Unlock()
}

// clearHolds removes any hold, hard ones included.
func (s *sourceState) clearHolds() {
	s.mu.Lock()
	s.holdKind, s.holdUntil = holdNone, time.Time{}
	s.mu.Unlock()
}

// hold returns the active hold at now.
func (s *sourceState) hold(now time.Time) (holdKind, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holdLocked(now)
}

// holdLocked is hold; the caller holds mu.
func (s *sourceState) holdLocked(now time.Time) (holdKind, time.Time) {
	if s.holdKind == holdNone || !now.Before(s.holdUntil) {
		return holdNone, time.Time{}
	}
	return s.holdKind, s.holdUntil
}

// reset clears the hold and the health history (an operator's breaker reset).
func (s *sourceState) reset() {
	s.mu.Lock()
	s.holdKind, s.holdUntil, s.score, s.scoreAt = holdNone, time.Time{}, 1, time.Time{}
	s.mu.Unlock()
}

// candidate describes s for a Selector.
func (s *sourceState) candidate(now time.Time, tried bool) core.Candidate {
	return s.candidateAt(s.health(now), tried)
}

// candidateAt describes s for a Selector, with its health read already.
func (s *sourceState) candidateAt(health float64, tried bool) core.Candidate {
	return core.Candidate{
		Name: s.cfg.Name, Provider: s.cfg.Provider, Model: s.cfg.Model, Region: s.cfg.Region,
		Priority: s.cfg.Priority, Weight: s.cfg.Weight, Health: health,
		InFlight: int(s.inflight.Load()), Price: s.price, Tried: tried,
	}
}

// view returns the active hold's kind and the health score at now, read
// together (what choosing among the sources needs of each).
func (s *sourceState) view(now time.Time) (holdKind, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind, _ := s.holdLocked(now)
	return kind, s.healthLocked(now)
}

// reason is the PerSource reason of a source this call did not try, from
// its hold.
func (k holdKind) reason() core.Reason {
	switch k {
	case holdFailed:
		return core.ReasonNetworkError
	case holdTimeout:
		return core.ReasonTimeout
	case holdRateLimited, holdPushedBack:
		return core.ReasonRateLimited
	case holdCircuitOpen:
		return core.ReasonCircuitOpen
	case holdDisabled:
		return core.ReasonDisabled
	}
	return core.ReasonRetryExhausted
}
