package core

import (
	"context"
	"time"
)

// Clock tells the time and waits. Implementations must be safe for
// concurrent use. Backends and state machines read time only through it,
// and the engine waits (backoffs, pushback, holds, slot waits)
// only on its timers, so tests can run cooldowns, windows and waits without
// sleeping: with a fake clock, or with SystemClock inside a
// testing/synctest bubble.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d after now on this clock.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that calls f once, d after now on this
	// clock (at once when d <= 0), in its own goroutine: f must not
	// assume the goroutine that armed it, nor that any lock is held.
	// Nothing waits for the call until the timer fires, so a pending
	// AfterFunc costs no goroutine. Stop prevents the call when it
	// reports true; when it reports false, f has been started (or is
	// about to be). The timer's C is nil: it never delivers a time.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a one-shot timer of a Clock.
type Timer interface {
	// C delivers the time once when the timer fires; it is nil for a
	// timer made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
}

// SystemClock is the wall clock.
type SystemClock struct{}

var _ Clock = SystemClock{}

// Now returns time.Now().
func (SystemClock) Now() time.Time { return time.Now() }

// NewTimer returns a time.Timer.
func (SystemClock) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

// AfterFunc returns a time.AfterFunc timer.
func (SystemClock) AfterFunc(d time.Duration, f func()) Timer {
	return sysTimer{time.AfterFunc(d, f)}
}

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time { return t.t.C }
func (t sysTimer) Stop() bool          { return t.t.Stop() }

// Since returns the time elapsed on c since t, a reading of c. On
// SystemClock it reads the monotonic clock alone (time.Since), which costs
// about half a full Now.
func Since(c Clock, t time.Time) time.Duration {
	if _, ok := c.(SystemClock); ok {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// Sleep waits d on c, or until ctx ends; it returns a *CanceledError then.
// A d <= 0 returns at once (nil unless ctx has already ended).
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		if err := ctx.Err(); err != nil {
			return &CanceledError{Err: err}
		}
		return nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return &CanceledError{Err: ctx.Err()}
	case <-t.C():
		return nil
	}
}

// Gate names one of the six rate-limit gates.
type Gate uint8

// The six gates, {concurrency, RPM, TPM} × {source, global}.
const (
	GateNone Gate = iota
	GateSourceConcurrency
	GateSourceRPM
	GateSourceTPM
	GateGlobalConcurrency
	GateGlobalRPM
	GateGlobalTPM
	// GateBudget is a spend budget (PermitRequest.Budgets); the refusing
	// budget's key is in Grant.Budget.
	GateBudget
)

var gateNames = [...]string{"none", "source_concurrency", "source_rpm", "source_tpm", "global_concurrency", "global_rpm", "global_tpm", "budget"}

// String returns the gate's name.
func (g Gate) String() string {
	if int(g) < len(gateNames) {
		return gateNames[g]
	}
	return "unknown"
}

// PermitRequest asks the Limiter for one call's permits on one source.
type PermitRequest struct {
	Scope, Source string
	// SourceLimits and GlobalLimits are the gates to check; zero fields are off.
	SourceLimits, GlobalLimits Limits
	// Tokens is pre-deducted from both TPM gates (EST_TOKENS).
	Tokens int
	// LeaseTTL bounds how long a concurrency slot lives without release.
	LeaseTTL time.Duration
	// Pool names the global gates: scopes naming the same pool share
	// GlobalLimits (their counts live under the pool's name). "" = the
	// scope's own global gates.
	Pool string
	// Budgets are the spend budgets this attempt is checked against, in
	// the same atomic step as the gates: each must have room for Cost in
	// its current window, and Cost is reserved on every one. Nil = none.
	// The slice is shared with the Permit: callers never modify it.
	Budgets []Budget
	// Cost is the attempt's estimated cost in micro-USD, reserved on every
	// budget at the acquire and settled on release (Settlement.Cost).
	Cost int64
	// Place is the call's class and tenant in the admission queue of a
	// limiter that queues (see Limiter); other limiters ignore it.
	Place Place
	// Waiter is the call's place in that queue when it was woken: Wait
	// returned WaitClaimed (ask then on the claim's source,
	// WaitEvent.Source) or WaitTurn. Nil for a new attempt.
	Waiter Waiter
}

// Budget is one spend budget: at most Limit micro-USD per Window, counted
// in fixed windows aligned to the Unix epoch (a window of 86400 s resets at
// 00:00 UTC), so that every process sharing a backend agrees on the window.
// A reservation stays in the window it was made in; settlement moves that
// window's spend from the estimate to the actual cost.
type Budget struct {
	// Key names the budget's spend: "scope:LLM", "client:team-a". Budgets
	// with one key share one spend, whichever scope checks them.
	Key string
	// Limit is the spend allowed per window, in micro-USD (> 0).
	Limit int64
	// Window is the window's length (>= 1s; a whole number of seconds).
	Window time.Duration
}

// WindowStart returns the start of b's window that holds t.
func (b Budget) WindowStart(t time.Time) time.Time {
	w := int64(b.Window / time.Second)
	if w <= 0 {
		w = 1
	}
	s := t.Unix()
	start := s - s%w
	if s < 0 && s%w != 0 {
		start -= w
	}
	return time.Unix(start, 0)
}

// BudgetUsage is a read-only view of one budget's current window.
type BudgetUsage struct {
	Budget
	// Spent is the spend counted in the current window (settled costs plus
	// the reservations of calls in flight), in micro-USD.
	Spent int64
	// WindowStart and WindowEnd bound the current window.
	WindowStart, WindowEnd time.Time
}

// Remaining returns Limit-Spent, never below zero.
func (u BudgetUsage) Remaining() int64 { return max(u.Limit-u.Spent, 0) }

// Permit is what a granted acquire holds. It is a value: release it exactly once.
type Permit struct {
	Scope, Source string
	// Lease identifies the permit's concurrency slots and TPM entries.
	Lease uint64
	// Tokens is the amount pre-deducted.
	Tokens int
	// AcquiredAt is the limiter's time of the acquire; settlement lands in its window.
	AcquiredAt time.Time
	// Budgets and Cost are the request's: Cost micro-USD is reserved on
	// each budget's window holding AcquiredAt.
	Budgets []Budget
	Cost    int64
}

// Grant is the answer to TryAcquire. When OK is false nothing was counted,
// Gate names the first refusing gate and RetryAfter estimates when it frees
// (0 = unknown; poll).
type Grant struct {
	OK         bool
	Permit     Permit
	Gate       Gate
	RetryAfter time.Duration
	// Budget is the refusing budget's key when Gate is GateBudget.
	Budget string
	// Queued is the call's place in the admission queue when a limiter
	// that queues refused and the call waits (OK is false and nothing was
	// counted): the caller waits on it and asks again with it in
	// PermitRequest.Waiter, or leaves it. Nil otherwise.
	Queued Waiter
}

// SettleKind says how a released permit's pre-deducted tokens are settled.
type SettleKind uint8

// Settlement kinds.
const (
	// SettleActual settles TPM to Settlement.Tokens (the measured usage).
	SettleActual SettleKind = iota
	// SettleEstimate keeps the pre-deducted estimate (transient failure).
	SettleEstimate
	// SettleRefund returns all tokens and the RPM count is kept (4xx, source dead).
	SettleRefund
)

// Settlement is passed to Release.
type Settlement struct {
	Kind   SettleKind
	Tokens int
	// Cost is the actual cost in micro-USD, settled on the permit's
	// budgets under SettleActual.
	Cost int64
}

// LimiterUsage is a read-only view of one source's or the scope's gates.
type LimiterUsage struct {
	InFlight int
	Requests int // in the current RPM window
	Tokens   int // in the current TPM window
}

// Limiter is the rate-limit port: six gates, all-or-nothing.
//
// Contract: TryAcquire never blocks waiting for quota; it checks every
// enabled gate and either takes all of them (OK) or none (refusal). One
// TryAcquire must be implementable as one atomic backend round trip. Release
// frees the concurrency slots and settles TPM into the window of the acquire;
// releasing an expired or unknown permit is a no-op. Usage reads state for
// diagnostics. All methods are safe for concurrent use. An error means the
// backend failed; callers turn it into GovernanceBackendError.
//
// Spend budgets: every limiter enforces them, so that a budget is never
// silently ignored. TryAcquire refuses with Gate=GateBudget and
// Budget=the key (RetryAfter = until that budget's window ends) when a
// budget's spend in its current window plus req.Cost would exceed its
// Limit; otherwise, in the same atomic step as the gates, it adds req.Cost
// to every budget's window. Release settles the reservation in the window
// it was made: SettleActual moves it to Settlement.Cost, SettleEstimate
// keeps it, SettleRefund removes it. Many processes sharing a backend
// therefore never spend past a Limit by more than the difference between
// actual and reserved cost of the calls in flight. Budgets reads the
// current windows as the given scope counts them: a backend that counts a
// budget across every scope naming its key (the memory limiter, a single
// Redis) ignores scope and pool; one that must count it per scope, or per
// pool for the scopes of a pool (a Redis Cluster, where every key of one
// admission lives in the scope's or its pool's slot), reads that scope's
// or pool's count. It fails for a budget that cannot be enforced.
//
// The queue: a limiter may keep a fair admission queue per scope (the
// memory limiter does when built with a queue; see
// docs/explanation-queue.md); one that does not ignores
// PermitRequest.Place and Waiter and never sets Grant.Queued. One that
// does answers TryAcquire so:
//
//   - A new call (no Waiter) tries the gates only when no waiter is in
//     line ("no barging"); otherwise it is queued without trying them. A
//     call refused by a concurrency gate, or by a rate gate that says when
//     it frees (RetryAfter > 0), is queued. A call refused by a budget, or
//     by a rate gate it can never fit, is refused as above, not queued.
//   - Queued means a refused Grant (nothing counted) with Queued set. The
//     caller must Wait on it and then ask again with it in
//     PermitRequest.Waiter (after WaitClaimed or WaitTurn), or Leave it.
//   - A woken waiter (Waiter set) holding a claim takes the unit reserved
//     for it and tries the gates; at the head of the line it tries them;
//     otherwise it stays in line (Queued is the same waiter). Granted, it
//     has left the queue. Refused by a gate it can wait out (a concurrency
//     gate, or a rate gate that says when it frees) it keeps its place,
//     first in line (Queued is the same waiter); refused otherwise (a
//     budget, a rate gate it can never fit) it has left the queue (Queued
//     is nil) and a unit reserved for its claim went to the next waiter.
//     A Waiter the limiter does not know (or that has left its queue)
//     counts as a new call.
//   - A call whose deadline (ctx's) cannot be met given the line ahead of
//     it is refused with a *QueueDeadlineError error and not queued; a
//     Place with an invalid Priority is a *PriorityError, a tenant longer
//     than MaxTenant ErrTenantTooLong. After an error a Waiter passed in
//     has left the queue.
//   - Release hands a unit it frees to the next waiter in line (a claim),
//     so that no unit stays free while waiters wait for one.
type Limiter interface {
	TryAcquire(ctx context.Context, req PermitRequest) (Grant, error)
	Release(ctx context.Context, p Permit, s Settlement) error
	// Usage reports the source's gates; source "" reports the global gates.
	Usage(ctx context.Context, scope, source string) (LimiterUsage, error)
	// Budgets reads the current window of each budget as scope (in pool,
	// "" = none) counts it; see the spend budgets above.
	Budgets(ctx context.Context, scope, pool string, budgets []Budget) ([]BudgetUsage, error)
}

// BreakerState is the state of one source's circuit.
type BreakerState uint8

// Breaker states.
const (
	StateClosed BreakerState = iota
	StateOpen
	StateHalfOpen
)

// String returns "closed", "open" or "half_open".
func (s BreakerState) String() string {
	switch s {
	case StateOpen:
		return "open"
	case StateHalfOpen:
		return "half_open"
	}
	return "closed"
}

// Admission is the breaker's answer to Allow.
type Admission struct {
	// Allowed is true when the call may go upstream.
	Allowed bool
	// Probe is true when this call holds the single half-open probe.
	Probe bool
	// Epoch is the circuit's epoch at admission; Record fences on it.
	Epoch uint64
	// State is the state seen at admission.
	State BreakerState
	// RetryAfter is, when refused, how long until a probe may be admitted.
	RetryAfter time.Duration
	// Disabled is true when refused because the source is switched off
	// (Breaker.SetEnabled).
	Disabled bool
	// PushedBack is true when refused because the source's upstream
	// pushed back (a 429, see Breaker.PushBack): RetryAfter is then how
	// long the pushback has left.
	PushedBack bool
}

// Outcome is what an admitted attempt reports to the breaker.
type Outcome uint8

// Outcomes.
const (
	// OutcomeSuccess: the service answered (any HTTP response that proves it alive,
	// including a business failure or an invalid result).
	OutcomeSuccess Outcome = iota
	// OutcomeFailure: 5xx, network error, cut or malformed stream.
	OutcomeFailure
	// OutcomeTimeout: a timeout; weighted by TimeoutWeight.
	OutcomeTimeout
	// OutcomeRateLimited: 429 pushback; not a failure, never in the window.
	OutcomeRateLimited
	// OutcomeDead: the source is dead; opens at once.
	OutcomeDead
	// OutcomeAbandoned: the attempt was cancelled or never made (refused by
	// the limiter after the breaker admitted it); a held probe is returned
	// with no verdict. (A rejected request is OutcomeSuccess: the service
	// answered.)
	OutcomeAbandoned
)

// BreakerSnapshot is a read-only view of one circuit.
type BreakerSnapshot struct {
	State               BreakerState
	Epoch               uint64
	ConsecutiveFailures float64
	// Opens counts how many times the circuit opened.
	Opens int
	// RetryAfter is how long until a probe may be admitted (0 when closed).
	RetryAfter time.Duration
	// ProbeHeld is true while a half-open probe is out.
	ProbeHeld bool
	// Disabled is true while an operator has switched the source off
	// (Breaker.SetEnabled); the circuit's own state is kept underneath.
	Disabled bool
}

// Breaker is the circuit breaker port, keyed by (scope, source).
//
// Contract: Allow admits when closed; when open past its cooldown it admits
// exactly one caller as the probe (Probe=true) holding a lease of
// cfg.ProbeTTL; all others are refused with RetryAfter. Record applies an
// outcome only if adm.Epoch is still the circuit's epoch (otherwise it
// returns applied=false). Reset closes the circuit and clears its history.
// Every method gets the scope's configuration, so that a shared backend
// needs none of its own (cfg.Pool tells where a scope's state lives).
//
// The switch: SetEnabled switches a source off at runtime (the operator's
// is_active) or on again. A switched-off source is refused by Allow
// (Allowed=false, Disabled=true, RetryAfter=0) until it is switched on
// again; the circuit's state and history are kept meanwhile, and Reset
// does not switch a source on. A backend shared across processes shares
// the switch, so that every process sees it.
//
// Pushback: PushBack shares an upstream's pushback — a 429 and how long
// its source must be left alone — with every caller of the backend; a
// backend shared across processes shares it with every process, so that a
// throttling provider is not asked again by one process while another
// waits. It records that source is not to be asked before d has passed on
// the backend's clock (Redis: the server's TIME); a pushback never
// shortens one already recorded for longer. While a pushback lasts, Allow
// refuses with Allowed=false, PushedBack=true, RetryAfter = the longer of
// the pushback's time left and the circuit's own RetryAfter when it would
// refuse too, and State = the circuit's state; no probe is granted. A
// switched-off source reports Disabled instead. A pushback is no outcome:
// the circuit's state, window and epoch are left as they are. d <= 0
// records nothing.
//
// All methods are safe for concurrent use; an error means the backend failed.
type Breaker interface {
	Allow(ctx context.Context, scope, source string, cfg BreakerConfig) (Admission, error)
	Record(ctx context.Context, scope, source string, adm Admission, o Outcome, cfg BreakerConfig) (applied bool, err error)
	Snapshot(ctx context.Context, scope, source string, cfg BreakerConfig) (BreakerSnapshot, error)
	Reset(ctx context.Context, scope, source string, cfg BreakerConfig) error
	// SetEnabled switches source off (enabled=false) or on again.
	SetEnabled(ctx context.Context, scope, source string, cfg BreakerConfig, enabled bool) error
	// PushBack records that source is not to be asked before d has passed.
	PushBack(ctx context.Context, scope, source string, cfg BreakerConfig, d time.Duration) error
}

// Cache is the response cache port.
//
// Contract: Get returns (nil, false, nil) on a miss, including for expired
// entries. Set stores value for ttl. Implementations copy what they keep and
// are safe for concurrent use. An error means the backend failed; callers
// degrade to a miss.
type Cache interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
}

// TelemetryRecord is one row of llm_calls.
type TelemetryRecord struct {
	CallID       string
	ParentCallID string
	SessionID    string
	Model        string
	Provider     string
	SourceName   string
	Messages     string // JSON; multimodal parts as digests
	// RawMessages, when set, are the call's messages not yet rendered into
	// Messages; Render does it (sinks call it off the call path).
	RawMessages      []Message
	Response         string
	Thinking         string
	PromptTokens     int
	CompletionTokens int
	UsageSource      string
	LatencyMS        float64
	TTFTMS           *float64
	MaxInterTokenMS  *float64
	CacheHit         bool
	Error            string // "ClassName: message", empty on success
	Cost             *float64
	// Scope and CreatedAt are the added columns.
	Scope     string
	CreatedAt time.Time
	// Degraded names the strategy that served a degraded answer
	// ("stale_cache", "fallback"); empty otherwise (an added column).
	Degraded string
	// QueueWaitMS is the time the call waited in the admission queue for
	// full gates (Call.QueueWait), 0 when it did not (an added column).
	QueueWaitMS float64
}

// TelemetrySink is the telemetry port.
//
// Contract: Write never blocks the call for I/O (sinks that write to a
// database queue and batch); it returns an error only for a row it could not
// accept. Sinks call rec.Render before storing a record (off the call path
// where they can) so that Messages is filled. Close flushes what is queued and releases resources; it is
// idempotent. Safe for concurrent use.
type TelemetrySink interface {
	Write(ctx context.Context, rec TelemetryRecord) error
	Close(ctx context.Context) error
}

// Upstream performs exactly one attempt of a call against one source and
// classifies any failure into the four error classes. It is the transport
// port the engine calls. Safe for concurrent use.
type Upstream interface {
	Do(ctx context.Context, src *SourceConfig, call *Call) (*LLMResponse, error)
}
