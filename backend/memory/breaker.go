package memory

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
)

// windowBuckets is the number of time buckets of the failure-rate window.
const windowBuckets = 10

// floatSlack absorbs rounding when fractional weights are summed.
const floatSlack = 1e-9

// Breaker is the in-process core.Breaker, with its switch and pushback:
// one circuit per (scope, source) in this process's memory.
//
// Semantics:
//
//   - Consecutive channel: a success resets the consecutive failure weight;
//     OutcomeFailure adds 1 and OutcomeTimeout adds cfg.TimeoutWeight. The
//     circuit opens when the weight reaches cfg.FailThreshold (off when the
//     threshold is not positive).
//   - Rate channel: successes, failures and timeouts are samples of a window
//     of cfg.Window split into 10 buckets of Window/10; a sample stays in the
//     window while its bucket is the current one or one of the 9 before, so
//     the window reaches back between 0.9×Window and Window. A timeout is one
//     sample weighing TimeoutWeight of a failure. When a failure or timeout
//     is recorded and the window holds at least cfg.MinCalls samples whose
//     failure rate is at least cfg.FailRate, the circuit opens. The channel
//     is off when Window or FailRate is not positive.
//   - Suppression: the consecutive channel does not open the circuit while
//     the rate channel is on and the window holds at least MinCalls samples
//     with a failure rate below FailRate/2: plenty of recent evidence that
//     the source is healthy outweighs a short run of failures.
//   - OutcomeRateLimited changes nothing. OutcomeDead opens at once.
//   - Opening clears the consecutive weight and the window, increments the
//     epoch and Opens, and lasts cfg.Cooldown; a failed probe (failure,
//     timeout or dead, whatever TimeoutWeight) re-opens for twice the last
//     open period, at most max(cfg.MaxCooldown, cfg.Cooldown). Closing
//     resets the doubling.
//   - An open circuit whose cooldown has passed is half-open: Allow grants
//     the probe to one caller at a time, for a lease of cfg.ProbeTTL (no
//     expiry when it is not positive), and increments the epoch so that a
//     holder whose lease expired and was taken over is fenced. A probe
//     success counts toward cfg.HalfOpenSuccesses (at least 1) and closes
//     the circuit once reached, else returns the probe; OutcomeAbandoned and
//     OutcomeRateLimited return the probe with no verdict. A verdict that
//     arrives after the lease expired still applies if nobody took the probe
//     since.
//   - Record applies an outcome only for an admitted call (Allowed) of the
//     current epoch: a closed-state admission while closed, the probe while
//     half-open. Reset increments the epoch, closes the circuit and clears
//     its consecutive weight, window, probe and doubling; Opens counts for
//     the Breaker's lifetime.
//   - A refused Allow and Snapshot report RetryAfter as the remaining
//     cooldown while open and the remaining probe lease while half-open with
//     the probe out (0 for a lease that does not expire).
//   - The operator's switch (core.Breaker.SetEnabled): while SetEnabled has
//     switched a source off, Allow refuses it with Disabled, the circuit's
//     state as of now and RetryAfter 0, and grants no probe; Snapshot
//     reports Disabled. The circuit underneath keeps its state, epoch and
//     history and goes on by time (an open circuit still turns half-open),
//     and calls admitted before the switch still report through Record.
//     Reset leaves the switch as it is; only SetEnabled turns it back on.
//   - The upstream's pushback (core.Breaker.PushBack): after PushBack(d),
//     Allow refuses the source until d has passed on the Breaker's clock,
//     with PushedBack, the circuit's state as of now and RetryAfter the
//     longer of the pushback's time left and the circuit's own (the
//     remaining cooldown while open, the remaining probe lease while the
//     probe is out); it grants no probe, and changes nothing of the circuit
//     (state, epoch, consecutive weight, window). A pushback never shortens
//     one that ends later; d <= 0 records nothing. A switched-off source is
//     refused as Disabled instead. Reset leaves a pushback as it is: it is
//     the upstream's word, not the circuit's history, and ends by itself.
//
// Precedence in Allow: switched off (Disabled), then pushed back
// (PushedBack), then the circuit (closed admits; open refuses; half-open
// grants the probe when it is free).
//
// State is computed lazily from the clock: an open circuit becomes half-open
// by time alone. A Breaker is safe for concurrent use; each circuit has its
// own lock and the circuit lookup is lock-free. Circuits are kept for the
// Breaker's lifetime. Create one with NewBreaker; the zero value is not usable.
type Breaker struct {
	clk elapsed // times are kept as nanoseconds since its base

	mu       sync.Mutex // serialises adding circuits
	circuits atomic.Pointer[map[sourceKey]*circuit]
}

var _ core.Breaker = (*Breaker)(nil)

// circuit is one (scope, source) circuit.
type circuit struct {
	mu sync.Mutex

	off bool // switched off by SetEnabled

	pushed    bool  // a pushback was recorded and may not have ended
	pushUntil int64 // its end

	open      bool  // open or half-open; half-open once now ≥ openUntil
	openUntil int64 // end of the cooldown
	cooldown  time.Duration
	epoch     uint64
	opens     int

	consecutive float64
	win         failWindow

	probeHeld    bool
	probeExpires int64
	halfOpenWins int
}

// failWindow is the failure-rate window: a ring of time buckets.
type failWindow struct {
	width   int64 // bucket width in nanoseconds; 0 until first used
	buckets [windowBuckets]bucket
}

// bucket holds the samples of one Window/10 slice of time.
type bucket struct {
	index    int64 // which slice: floor(time / width)
	samples  int64
	failures float64
}

// NewBreaker returns a Breaker with every circuit closed. Only WithClock applies.
func NewBreaker(opts ...Option) *Breaker {
	o := buildOptions(opts)
	b := &Breaker{clk: newElapsed(o.clock)}
	b.circuits.Store(&map[sourceKey]*circuit{})
	return b
}

// Allow admits a call when the circuit is closed, grants the single probe
// when it is half-open and the probe is free, and refuses otherwise; a
// source switched off is refused with Disabled, and one pushed back with
// PushedBack. It never fails; ctx is not used.
func (b *Breaker) Allow(_ context.Context, scope, source string, cfg core.BreakerConfig) (core.Admission, error) {
	c := b.circuit(scope, source)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.off {
		return core.Admission{Epoch: c.epoch, State: c.state(b.now()), Disabled: true}, nil
	}
	if c.pushed {
		now := b.now()
		if now < c.pushUntil {
			return c.pushedBack(now), nil
		}
		c.pushed = false // ended: the common path reads no clock again
	}
	if !c.open {
		return core.Admission{Allowed: true, Epoch: c.epoch, State: core.StateClosed}, nil
	}
	now := b.now()
	switch {
	case now < c.openUntil:
		return core.Admission{Epoch: c.epoch, State: core.StateOpen, RetryAfter: time.Duration(c.openUntil - now)}, nil
	case c.probeHeld && now < c.probeExpires:
		return core.Admission{Epoch: c.epoch, State: core.StateHalfOpen, RetryAfter: leaseLeft(c.probeExpires, now)}, nil
	}
	c.epoch++
	c.probeHeld = true
	c.probeExpires = addSat(now, cfg.ProbeTTL)
	return core.Admission{Allowed: true, Probe: true, Epoch: c.epoch, State: core.StateHalfOpen}, nil
}

// Record applies the outcome of an admitted call if adm is of the circuit's
// current epoch, and reports whether it did. It never fails; ctx is not used.
func (b *Breaker) Record(_ context.Context, scope, source string, adm core.Admission, o core.Outcome, cfg core.BreakerConfig) (bool, error) {
	if !adm.Allowed {
		return false, nil
	}
	c := b.lookup(scope, source)
	if c == nil {
		return false, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if adm.Epoch != c.epoch || adm.Probe != c.open {
		return false, nil
	}
	now := b.now()
	if c.open {
		c.recordProbe(now, o, cfg)
	} else {
		c.recordClosed(now, o, cfg)
	}
	return true, nil
}

// Snapshot reports the circuit's state as of now. An unknown circuit is
// closed. It never fails; ctx and cfg are not used.
func (b *Breaker) Snapshot(_ context.Context, scope, source string, _ core.BreakerConfig) (core.BreakerSnapshot, error) {
	c := b.lookup(scope, source)
	if c == nil {
		return core.BreakerSnapshot{}, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := b.now()
	s := core.BreakerSnapshot{Epoch: c.epoch, ConsecutiveFailures: c.consecutive, Opens: c.opens, Disabled: c.off}
	switch {
	case !c.open:
		s.State = core.StateClosed
	case now < c.openUntil:
		s.State, s.RetryAfter = core.StateOpen, time.Duration(c.openUntil-now)
	default:
		s.State = core.StateHalfOpen
		if c.probeHeld && now < c.probeExpires {
			s.ProbeHeld, s.RetryAfter = true, leaseLeft(c.probeExpires, now)
		}
	}
	return s, nil
}

// Reset closes the circuit, clears its history and increments its epoch so
// that calls admitted before it are fenced; a source switched off stays
// off. It never fails; ctx is not used.
func (b *Breaker) Reset(_ context.Context, scope, source string, _ core.BreakerConfig) error {
	c := b.lookup(scope, source)
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.close()
	return nil
}

// SetEnabled switches the source on or off (see the switch above); the
// circuit keeps its state either way. It never fails; ctx and cfg are not
// used.
func (b *Breaker) SetEnabled(_ context.Context, scope, source string, _ core.BreakerConfig, enabled bool) error {
	var c *circuit
	if enabled {
		if c = b.lookup(scope, source); c == nil {
			return nil // never switched off
		}
	} else {
		c = b.circuit(scope, source)
	}
	c.mu.Lock()
	c.off = !enabled
	c.mu.Unlock()
	return nil
}

// PushBack records that the source is not to be asked before d has passed
// on the Breaker's clock (see the pushback above); a pushback that ends
// later stands. d <= 0 records nothing. It never fails; ctx and cfg are not
// used.
func (b *Breaker) PushBack(_ context.Context, scope, source string, _ core.BreakerConfig, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	c := b.circuit(scope, source)
	c.mu.Lock()
	defer c.mu.Unlock()
	until := addSat(b.now(), d)
	if !c.pushed || until > c.pushUntil {
		c.pushed, c.pushUntil = true, until
	}
	return nil
}

// pushedBack is Allow's refusal of a source pushed back until after now:
// the circuit's state, and the longer of the pushback's time left and the
// circuit's own RetryAfter when it would refuse too.
func (c *circuit) pushedBack(now int64) core.Admission {
	a := core.Admission{Epoch: c.epoch, State: c.state(now), PushedBack: true, RetryAfter: time.Duration(c.pushUntil - now)}
	var own time.Duration
	switch {
	case a.State == core.StateOpen:
		own = time.Duration(c.openUntil - now)
	case a.State == core.StateHalfOpen && c.probeHeld && now < c.probeExpires:
		own = leaseLeft(c.probeExpires, now)
	}
	a.RetryAfter = max(a.RetryAfter, own)
	return a
}

// state returns the circuit's state as of now.
func (c *circuit) state(now int64) core.BreakerState {
	switch {
	case !c.open:
		return core.StateClosed
	case now < c.openUntil:
		return core.StateOpen
	}
	return core.StateHalfOpen
}

func (b *Breaker) now() int64 { return b.clk.now() }

func (b *Breaker) lookup(scope, source string) *circuit {
	return (*b.circuits.Load())[sourceKey{scope, source}]
}

// circuit returns the circuit, adding a closed one on first use.
func (b *Breaker) circuit(scope, source string) *circuit {
	if c := b.lookup(scope, source); c != nil {
		return c
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	key := sourceKey{scope, source}
	if c := (*b.circuits.Load())[key]; c != nil {
		return c
	}
	c := &circuit{}
	next := maps.Clone(*b.circuits.Load())
	next[key] = c
	b.circuits.Store(&next)
	return c
}

// recordClosed applies an outcome in the closed state.
func (c *circuit) recordClosed(now int64, o core.Outcome, cfg core.BreakerConfig) {
	switch o {
	case core.OutcomeSuccess:
		c.consecutive = 0
		c.win.add(now, 0, cfg)
	case core.OutcomeFailure:
		c.fail(now, 1, cfg)
	case core.OutcomeTimeout:
		c.fail(now, max(cfg.TimeoutWeight, 0), cfg)
	case core.OutcomeDead:
		c.trip(now, cfg.Cooldown)
	}
}

// fail counts a failure of weight w and opens the circuit if a channel says so.
func (c *circuit) fail(now int64, w float64, cfg core.BreakerConfig) {
	c.consecutive += w
	rateOn := cfg.Window > 0 && cfg.FailRate > 0
	var samples int64
	var rate float64
	if rateOn {
		c.win.add(now, w, cfg)
		var failures float64
		samples, failures = c.win.sum(now)
		if samples > 0 {
			rate = failures / float64(samples)
		}
		if samples >= int64(max(cfg.MinCalls, 1)) && rate >= cfg.FailRate-floatSlack {
			c.trip(now, cfg.Cooldown)
			return
		}
	}
	if cfg.FailThreshold > 0 && c.consecutive >= float64(cfg.FailThreshold)-floatSlack {
		suppressed := rateOn && samples >= int64(max(cfg.MinCalls, 1)) && rate < cfg.FailRate/2-floatSlack
		if !suppressed {
			c.trip(now, cfg.Cooldown)
		}
	}
}

// recordProbe applies the probe holder's outcome in the half-open state.
func (c *circuit) recordProbe(now int64, o core.Outcome, cfg core.BreakerConfig) {
	switch o {
	case core.OutcomeSuccess:
		c.halfOpenWins++
		if c.halfOpenWins >= max(cfg.HalfOpenSuccesses, 1) {
			c.close()
			return
		}
		c.probeHeld = false
	case core.OutcomeFailure, core.OutcomeTimeout, core.OutcomeDead:
		next := max(2*c.cooldown, cfg.Cooldown)
		if limit := max(cfg.MaxCooldown, cfg.Cooldown); next > limit || c.cooldown > limit/2 {
			next = limit
		}
		c.trip(now, next)
	default: // rate limited, abandoned: no verdict
		c.probeHeld = false
	}
}

// trip opens the circuit for cooldown.
func (c *circuit) trip(now int64, cooldown time.Duration) {
	cooldown = max(cooldown, 0)
	c.open = true
	c.openUntil = now
	if cooldown > 0 {
		c.openUntil = addSat(now, cooldown)
	}
	c.cooldown = cooldown
	c.epoch++
	c.opens++
	c.consecutive = 0
	c.win.clear()
	c.probeHeld = false
	c.halfOpenWins = 0
}

// close closes the circuit and clears its history; the epoch stays.
func (c *circuit) close() {
	c.open = false
	c.openUntil = 0
	c.cooldown = 0
	c.consecutive = 0
	c.win.clear()
	c.probeHeld = false
	c.probeExpires = 0
	c.halfOpenWins = 0
}

// leaseLeft is the time until expires, or 0 for a lease that never expires.
func leaseLeft(expires, now int64) time.Duration {
	if expires == never {
		return 0
	}
	return time.Duration(expires - now)
}

// add counts one sample weighing w of a failure at now.
func (w *failWindow) add(now int64, failure float64, cfg core.BreakerConfig) {
	if cfg.Window <= 0 || cfg.FailRate <= 0 {
		return
	}
	if width := max(int64(cfg.Window)/windowBuckets, 1); width != w.width {
		w.clear()
		w.width = width
	}
	idx := floorDiv(now, w.width)
	bk := &w.buckets[mod(idx, windowBuckets)]
	if bk.index != idx || bk.samples == 0 {
		*bk = bucket{index: idx}
	}
	bk.samples++
	bk.failures += failure
}

// sum returns the samples and failure weight in the window as of now.
func (w *failWindow) sum(now int64) (samples int64, failures float64) {
	if w.width == 0 {
		return 0, 0
	}
	cur := floorDiv(now, w.width)
	for i := range w.buckets {
		bk := &w.buckets[i]
		if bk.samples > 0 && bk.index <= cur && bk.index > cur-windowBuckets {
			samples += bk.samples
			failures += bk.failures
		}
	}
	return samples, failures
}

func (w *failWindow) clear() { w.buckets = [windowBuckets]bucket{} }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}
