package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

// recordingAdmitter composes the memory backends and records what every
// Finish reports.
type recordingAdmitter struct {
	core.Admitter
	mu       sync.Mutex
	outcomes []core.Outcome
	settles  []core.Settlement
}

func (a *recordingAdmitter) Finish(ctx context.Context, t core.Ticket, s core.Settlement, o core.Outcome) (bool, error) {
	a.mu.Lock()
	a.outcomes = append(a.outcomes, o)
	a.settles = append(a.settles, s)
	a.mu.Unlock()
	return a.Admitter.Finish(ctx, t, s, o)
}

// recordingObserver keeps the attempt events.
type recordingObserver struct {
	mu       sync.Mutex
	started  int
	finished []core.AttemptEvent
}

func (o *recordingObserver) AttemptStarted(core.AttemptEvent) {
	o.mu.Lock()
	o.started++
	o.mu.Unlock()
}
func (o *recordingObserver) Attempt(ev core.AttemptEvent) {
	o.mu.Lock()
	o.finished = append(o.finished, ev)
	o.mu.Unlock()
}
func (o *recordingObserver) Refused(string, string, core.Reason)              {}
func (o *recordingObserver) Waited(string, time.Duration)                     {}
func (o *recordingObserver) BreakerState(string, string, core.BreakerState)   {}
func (o *recordingObserver) Admitted(string, core.Place)                      {}
func (o *recordingObserver) QueueWaited(string, core.Priority, time.Duration) {}

// TestEveryPolicyRowHasItsEffects drives one attempt that ends as each row
// of the policy table says, on source a (another source b, of another
// model, is there to fail over to), and checks every effect the row names:
// the breaker outcome and settlement reported to the admission port, the
// health verdict, the hold, adaptive concurrency, the retry budget, whether
// the call ends, what the observer sees and the PerSource reason.
func TestEveryPolicyRowHasItsEffects(t *testing.T) {
	t.Parallel()
	answer := &core.LLMResponse{Content: "an answer", PromptTokens: 7, CompletionTokens: 3, FinishReason: "stop"}
	tests := []struct {
		name string
		// err is the attempt's error (nil: it answered); withAnswer makes
		// the attempt return the answer beside the error.
		err        error
		withAnswer bool

		breaker   core.Outcome
		settle    core.SettleKind
		tokens    int // settled tokens (SettleActual)
		health    verdict
		hold      holdKind // a's hold after the attempt
		aimd      aimdRule
		ends      bool // the call ends with the attempt (b is never tried)
		spends    bool // the retry budget is charged (visible with MAX_ATTEMPTS=1)
		observe   core.AttemptOutcome
		perSource core.Reason // in GatewayUnavailableError.PerSource once the budget is spent
	}{
		{name: "success", breaker: core.OutcomeSuccess, settle: core.SettleActual, tokens: 10, health: healthGood,
			hold: holdNone, aimd: aimdGrow, ends: true, observe: core.AttemptSuccess},
		{name: "429", err: testkit.RateLimitedErr("a", 5*time.Second), breaker: core.OutcomeRateLimited, settle: core.SettleRefund,
			health: healthBad, hold: holdPushedBack, aimd: aimdHalve, observe: core.AttemptRateLimited, perSource: core.ReasonRateLimited},
		{name: "timeout", err: testkit.TimeoutErr("a"), breaker: core.OutcomeTimeout, settle: core.SettleEstimate,
			health: healthBad, hold: holdTimeout, spends: true, observe: core.AttemptTimeout, perSource: core.ReasonTimeout},
		{name: "stall", err: testkit.StalledErr("a"), breaker: core.OutcomeTimeout, settle: core.SettleEstimate,
			health: healthBad, hold: holdTimeout, spends: true, observe: core.AttemptTimeout, perSource: core.ReasonTimeout},
		{name: "5xx", err: &core.TransientError{Source: "a", Reason: core.ReasonServerError, StatusCode: 503},
			breaker: core.OutcomeFailure, settle: core.SettleEstimate, health: healthBad, hold: holdFailed, spends: true,
			observe: core.AttemptTransient, perSource: core.ReasonServerError},
		{name: "task failed", err: &core.TransientError{Source: "a", Reason: core.ReasonTaskFailed, StatusCode: 200, Message: "OCR task failed: CUDA out of memory"},
			breaker: core.OutcomeSuccess, settle: core.SettleEstimate, health: healthBad, hold: holdFailed, spends: true,
			observe: core.AttemptTransient, perSource: core.ReasonTaskFailed},
		{name: "network error", err: testkit.TransientErr("a"), breaker: core.OutcomeFailure, settle: core.SettleEstimate,
			health: healthBad, hold: holdFailed, spends: true, observe: core.AttemptTransient, perSource: core.ReasonNetworkError},
		{name: "transient of another reason", err: &core.TransientError{Source: "a", Reason: core.ReasonCircuitOpen, Message: "an upstream gateway's circuit is open"},
			breaker: core.OutcomeFailure, settle: core.SettleEstimate, health: healthBad, hold: holdFailed, spends: true,
			observe: core.AttemptTransient, perSource: core.ReasonNetworkError},
		{name: "source dead", err: testkit.DeadErr("a"), breaker: core.OutcomeDead, settle: core.SettleRefund,
			health: healthBad, hold: holdCircuitOpen, spends: true, observe: core.AttemptDead, perSource: core.ReasonSourceDead},
		{name: "rejected", err: &core.RequestRejectedError{Source: "a", StatusCode: 400, Code: "invalid_request_error"},
			breaker: core.OutcomeSuccess, settle: core.SettleRefund, health: healthNeutral, hold: holdNone, ends: true,
			observe: core.AttemptRejected},
		{name: "content filter", err: &core.RequestRejectedError{Source: "a", StatusCode: 400, Reason: core.ReasonContentFilter},
			breaker: core.OutcomeSuccess, settle: core.SettleRefund, health: healthNeutral, hold: holdNone, ends: true,
			observe: core.AttemptRejected},
		{name: "consumer failed", err: &core.RequestRejectedError{Source: "a", StatusCode: 200, Code: "stream_consumer_failed", Reason: core.ReasonConsumerFailed},
			breaker: core.OutcomeSuccess, settle: core.SettleEstimate, health: healthNeutral, hold: holdNone, ends: true,
			observe: core.AttemptRejected},
		{name: "context length", err: &core.RequestRejectedError{Source: "a", StatusCode: 400, Code: "context_length_exceeded", Reason: core.ReasonContextLength},
			breaker: core.OutcomeSuccess, settle: core.SettleRefund, health: healthNeutral, hold: holdNone, spends: true,
			observe: core.AttemptRejected, perSource: core.ReasonContextLength},
		{name: "check failed", err: &core.ResultInvalidError{Source: "a", Message: "not JSON"}, withAnswer: true,
			breaker: core.OutcomeSuccess, settle: core.SettleActual, tokens: 10, health: healthNeutral, hold: holdNone,
			aimd: aimdGrow, ends: true, observe: core.AttemptInvalid},
		{name: "low quality", err: &core.ResultInvalidError{Source: "a", Reason: core.ReasonLowQuality, Message: "empty"}, withAnswer: true,
			breaker: core.OutcomeSuccess, settle: core.SettleActual, tokens: 10, health: healthNeutral, hold: holdFailed,
			aimd: aimdGrow, spends: true, observe: core.AttemptInvalid, perSource: core.ReasonLowQuality},
		{name: "foreign error", err: errors.New("something else"), breaker: core.OutcomeFailure, settle: core.SettleEstimate,
			health: healthBad, hold: holdFailed, spends: true, observe: core.AttemptTransient, perSource: core.ReasonNetworkError},
		{name: "cancelled", err: &core.CanceledError{Err: context.Canceled}, breaker: core.OutcomeAbandoned, settle: core.SettleEstimate,
			health: healthNeutral, hold: holdNone, ends: true, observe: core.AttemptCancelled},
		{name: "memory budget", err: fmt.Errorf("transport: the answer does not fit: %w", core.ErrMemoryBudget), breaker: core.OutcomeAbandoned,
			settle: core.SettleEstimate, health: healthNeutral, hold: holdNone, ends: true, observe: core.AttemptCancelled},
	}
	// Every row of the table has a case.
	covered := map[policyKey]bool{}
	for _, tc := range tests {
		covered[rowOf(tc.err)] = true
	}
	for k := range policy {
		if !covered[k] {
			t.Errorf("the policy row %v/%q has no case here", k.class, k.reason)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, budget := range []int{3, 1} {
				// In a bubble: the hold an attempt sets (1 ms with these backoffs)
				// is read at the time it was set, however loaded the machine.
				inBubble(t, func(t *testing.T) {
					set := testSettings(src("a", 0), src("b", 1))
					set.Retry.MaxAttempts = budget
					obs := &recordingObserver{}
					f := newFixture(t, set, func(c *Config) { c.Observer = obs })
					adm := &recordingAdmitter{Admitter: core.ComposeAdmitter(f.lim, f.br)}
					f.g.admitter = adm
					step := step{err: tc.err}
					if tc.err == nil || tc.withAnswer {
						step.resp = answer
					}
					f.up.script("a", step)
					a := f.g.sourceNamed("a")
					aimdBefore := a.aimdLimit()
					now := time.Now()
					resp, err := f.g.Handle(context.Background(), newCall())

					if len(adm.outcomes) == 0 || adm.outcomes[0] != tc.breaker {
						t.Fatalf("budget %d: breaker outcomes %v, want %v first", budget, adm.outcomes, tc.breaker)
					}
					if s := adm.settles[0]; s.Kind != tc.settle || s.Tokens != tc.tokens {
						t.Errorf("budget %d: settlement %+v, want kind %v tokens %d", budget, s, tc.settle, tc.tokens)
					}
					h := a.health(now)
					switch tc.health {
					case healthGood, healthNeutral:
						if h != 1 {
							t.Errorf("budget %d: health %.3f, want 1 (untouched or improved)", budget, h)
						}
					case healthBad:
						if h >= 1 {
							t.Errorf("budget %d: health %.3f, want lowered", budget, h)
						}
					}
					if kind, _ := a.hold(time.Now()); kind != tc.hold {
						t.Errorf("budget %d: hold %v, want %v", budget, kind, tc.hold)
					}
					switch after := a.aimdLimit(); tc.aimd {
					case aimdGrow:
						if after <= aimdBefore {
							t.Errorf("budget %d: adaptive limit %.2f → %.2f, want it grown", budget, aimdBefore, after)
						}
					case aimdHalve:
						if after != aimdBefore/2 {
							t.Errorf("budget %d: adaptive limit %.2f → %.2f, want it halved", budget, aimdBefore, after)
						}
					default:
						if after != aimdBefore {
							t.Errorf("budget %d: adaptive limit %.2f → %.2f, want it unchanged", budget, aimdBefore, after)
						}
					}
					if len(obs.finished) == 0 || obs.finished[0].Outcome != tc.observe || obs.started != len(obs.finished) {
						t.Errorf("budget %d: observer saw %+v (%d started), want %q first", budget, obs.finished, obs.started, tc.observe)
					}
					calls := f.up.callLog()
					switch {
					case tc.ends:
						if len(calls) != 1 {
							t.Errorf("budget %d: upstream calls %v, want the call to end after a's attempt", budget, calls)
						}
						if tc.err == nil && (err != nil || resp == nil) || tc.withAnswer && (resp == nil || err == nil) ||
							tc.err != nil && !tc.withAnswer && (resp != nil || !errors.Is(err, tc.err)) {
							t.Errorf("budget %d: = (%v, %v), want the attempt's own end", budget, resp, err)
						}
					case budget == 1 && tc.spends:
						// The only attempt is spent: the call ends with it.
						if len(calls) != 1 || err == nil {
							t.Errorf("budget %d: calls %v err %v, want one attempt and its failure", budget, calls, err)
						}
					default:
						// The call goes on to b (a 429 is free: even a budget of one reaches b).
						if len(calls) != 2 || calls[1] != "b" || err != nil {
							t.Errorf("budget %d: calls %v err %v, want a failover to b", budget, calls, err)
						}
					}
				})
			}
		})
	}
}

// rowOf returns the key of the policy row an attempt ending with err reads
// (the lookup of effectOf).
func rowOf(err error) policyKey {
	if err == nil {
		return policyKey{classSuccess, anyReason}
	}
	if errors.Is(err, core.ErrMemoryBudget) {
		return policyKey{classMemory, anyReason}
	}
	c := core.Classify(err)
	for _, k := range []policyKey{{c.Class, c.Reason}, {c.Class, anyReason}} {
		if _, ok := policy[k]; ok {
			return k
		}
	}
	return policyKey{core.ClassOther, anyReason}
}

// TestThePerSourceReasonOfEveryRow spends the budget on a failure of each
// failing class and reads the reason GatewayUnavailableError names.
func TestThePerSourceReasonOfEveryRow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want core.Reason
	}{
		{testkit.TimeoutErr("a"), core.ReasonTimeout},
		{testkit.StalledErr("a"), core.ReasonTimeout},
		{&core.TransientError{Source: "a", Reason: core.ReasonServerError, StatusCode: 500}, core.ReasonServerError},
		{&core.TransientError{Source: "a", Reason: core.ReasonTaskFailed, StatusCode: 200}, core.ReasonTaskFailed},
		{testkit.TransientErr("a"), core.ReasonNetworkError},
		{testkit.DeadErr("a"), core.ReasonSourceDead},
		{&core.ResultInvalidError{Source: "a", Reason: core.ReasonLowQuality}, core.ReasonLowQuality},
		{errors.New("foreign"), core.ReasonNetworkError},
	}
	for _, tc := range tests {
		set := testSettings(src("a", 0), src("b", 0))
		set.Retry.MaxAttempts = 2
		f := newFixture(t, set)
		st := step{err: tc.err}
		if errors.As(tc.err, new(*core.ResultInvalidError)) {
			st.resp = &core.LLMResponse{Content: "x", FinishReason: "stop"}
		}
		f.up.script("a", st)
		f.up.script("b", step{err: testkit.TransientErr("b")})
		_, err := f.g.Handle(context.Background(), newCall())
		var ue *core.GatewayUnavailableError
		if tc.want == core.ReasonLowQuality {
			// The last answer is returned with its error; a's reason is in
			// the run, not in an unavailable error.
			continue
		}
		if !errors.As(err, &ue) || ue.PerSource["a"] != tc.want {
			t.Errorf("%v: err %v, want PerSource a=%s", tc.err, err, tc.want)
		}
	}
}

// TestEveryRowThatLetsTheCallGoOnNamesItsPerSourceReason: a failure after
// which the call goes on is named in GatewayUnavailableError.PerSource by
// its row, so that the row alone says what an unavailable call reports.
func TestEveryRowThatLetsTheCallGoOnNamesItsPerSourceReason(t *testing.T) {
	t.Parallel()
	for k, eff := range policy {
		if (eff.end == endNo || eff.end == endOtherModel) && eff.perSource == "" {
			t.Errorf("the policy row %v/%q lets the call go on but names no PerSource reason", k.class, k.reason)
		}
	}
}
