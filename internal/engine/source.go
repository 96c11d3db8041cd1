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

// memo kinds: why a source is in the local cooldown memo.
type memoKind uint8

const (
	memoNone memoKind = iota
	// memoFailed: the source just failed; soft (used when nothing else is eligible).
	memoFailed
	// memoTimeout: the source just timed out or stalled; soft.
	memoTimeout
	// memoRateLimited: a gate of the limiter is full; hard until expiry.
	memoRateLimited
	// memoPushedBack: the source's upstream answered 429 (here, or in
	// another process sharing the breaker); hard until the pushback ends.
	memoPushedBack
	// memoCircuitOpen: the breaker refused; hard until expiry.
	memoCircuitOpen
	// memoDisabled: an operator switched the source off; hard until
	// expiry (disabledRecheck), when the switch is read again.
	memoDisabled
)

// disabledRecheck is how long a switched-off source is skipped before its
// switch is read again: a source switched back on takes at most this long
// to receive calls from a process.
const disabledRecheck = time.Second

func (k memoKind) hard() bool {
	return k == memoRateLimited || k == memoPushedBack || k == memoCircuitOpen || k == memoDisabled
}

// sourceState is the governor's process-local view of one source. Its fields
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
	memoUntil time.Time
	memoKind  memoKind
	pushbacks int
	// failures counts the failed attempts since the last answer (the memo
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
// concurrency rule, and clearing a soft memo when clearSoft. It returns
// the count a memo rule scales with: the 429s in a row after a halving,
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
	if clearSoft && !s.memoKind.hard() {
		s.memoKind, s.memoUntil = memoNone, time.Time{}
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
// it. The holder gives it back with Engine.freeSlot.
func (s *sourceState) claimSlot() bool {
	limit := s.aimdLimit()
	for {
		cur := s.inflight.Load()
		if float64(cur) >= limit {
			return false
		}
		if s.inflight.CompareAndSwap(cur, cur+1) {
			return true
		}
	}
}

// aimdLimit returns the current adaptive concurrency limit.
func (s *sourceState) aimdLimit() float64 {
	s.mu.Lock()
	l := s.aimd
	s.mu.Unlock()
	return l
}

// setMemo puts the source in the local cooldown memo until until. An active
// hard memo is only ever extended, never replaced by a soft one.
func (s *sourceState) setMemo(now, until time.Time, kind memoKind) {
	s.mu.Lock()
	activeHard := s.memoKind.hard() && now.Before(s.memoUntil)
	switch {
	case activeHard && !kind.hard():
	case activeHard && !until.After(s.memoUntil):
	default:
		s.memoUntil, s.memoKind = until, kind
	}
	s.mu.Unlock()
}

// switchMemo sets (off=true) or clears the memo of a switched-off source,
// whatever memo it had: the operator's word wins.
func (s *sourceState) switchMemo(now time.Time, off bool) {
	s.mu.Lock()
	switch {
	case off:
		s.memoKind, s.memoUntil = memoDisabled, now.Add(disabledRecheck)
	case s.memoKind == memoDisabled:
		s.memoKind, s.memoUntil = memoNone, time.Time{}
	}
	s.mu.Unlock()
}

// clearAllMemo removes any memo, hard ones included.
func (s *sourceState) clearAllMemo() {
	s.mu.Lock()
	s.memoKind, s.memoUntil = memoNone, time.Time{}
	s.mu.Unlock()
}

// memo returns the active memo at now.
func (s *sourceState) memo(now time.Time) (memoKind, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.memoLocked(now)
}

// memoLocked is memo; the caller holds mu.
func (s *sourceState) memoLocked(now time.Time) (memoKind, time.Time) {
	if s.memoKind == memoNone || !now.Before(s.memoUntil) {
		return memoNone, time.Time{}
	}
	return s.memoKind, s.memoUntil
}

// reset clears the memo and the health history (an operator's breaker reset).
func (s *sourceState) reset() {
	s.mu.Lock()
	s.memoKind, s.memoUntil, s.score, s.scoreAt = memoNone, time.Time{}, 1, time.Time{}
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

// view returns the active memo's kind and the health score at now, read
// together (what choosing among the sources needs of each).
func (s *sourceState) view(now time.Time) (memoKind, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kind, _ := s.memoLocked(now)
	return kind, s.healthLocked(now)
}

// reason is the PerSource reason of a source this call did not try, from
// its memo.
func (k memoKind) reason() core.Reason {
	switch k {
	case memoFailed:
		return core.ReasonNetworkError
	case memoTimeout:
		return core.ReasonTimeout
	case memoRateLimited, memoPushedBack:
		return core.ReasonRateLimited
	case memoCircuitOpen:
		return core.ReasonCircuitOpen
	case memoDisabled:
		return core.ReasonDisabled
	}
	return core.ReasonRetryExhausted
}
