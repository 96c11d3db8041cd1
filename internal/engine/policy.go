package engine

import (
	"errors"

	"github.com/polygateway/polygateway/core"
)

// This file is the one place that says what the end of an attempt means.
// Every part of the engine that reacts to an attempt — the breaker, the
// limiter's settlement, the health score, the hold, adaptive
// concurrency, the retry budget, whether the call ends, whether it waits in
// its tier, whether a cut answer may be continued, which answer it keeps,
// what the observer and PerSource see — reads the effect of the attempt's
// class and reason from the table below, and nowhere else. No other file
// of the engine compares error classes or reasons (a test reads the source
// and holds it to that).

// verdict is what an attempt says about its source's health.
type verdict uint8

const (
	healthNeutral verdict = iota // nothing learned about the service
	healthGood                   // the service answered
	healthBad                    // the service failed
)

// holdRule says how an attempt sets its source's local hold.
type holdRule uint8

const (
	// holdClear removes a soft hold (the source just worked).
	holdClear holdRule = iota
	// holdKeep leaves the hold as it is.
	holdKeep
	// holdBackoff: a soft hold for one backoff (the source just failed;
	// used again only when nothing else is eligible).
	holdBackoff
	// holdCooldown: a soft hold for the breaker's cooldown (timeouts: a
	// slow source is not asked again soon).
	holdCooldown
	// holdPushback: a hard hold for max(Retry-After, backoff of the
	// source's consecutive 429s).
	holdPushback
	// holdDead: a hard hold for the breaker's cooldown (the source's
	// account is unusable; its breaker opened).
	holdDead
)

// aimdRule says how an attempt moves its source's adaptive concurrency.
type aimdRule uint8

const (
	aimdHold  aimdRule = iota // no change
	aimdGrow                  // a success: grow
	aimdHalve                 // a 429: halve
)

// endRule says whether an attempt ends the call.
type endRule uint8

const (
	// endNo: the call goes on (to another attempt, while the budget lasts).
	endNo endRule = iota
	// endAnswer: the call ends with the attempt's answer.
	endAnswer
	// endAnswerError: the call ends with the answer and the error together
	// (a result that failed its check: billed, recorded, re-asked outside).
	endAnswerError
	// endError: the call ends with the attempt's error as it is.
	endError
	// endOtherModel: the request does not fit this model; the call goes on
	// only on a source with another MODEL (every source of this model is
	// excluded for the call) and ends with the error when there is none.
	endOtherModel
)

// patienceRule says whether a failure is a blip the call may wait out in
// its PRIORITY tier (TIER_PATIENCE_S) before a lower tier is used, and how
// long the source that blipped is waited for. It applies only to a source
// that was answering; see run.stick.
type patienceRule uint8

const (
	// patienceNone: fail over to a lower tier at once (timeouts, stalls,
	// dead sources, refusals: an outage or a bad request, not a blip).
	patienceNone patienceRule = iota
	// patienceBackoff: the source is asked again after one backoff, or a
	// sibling of its tier at once (a 5xx, a reset).
	patienceBackoff
	// patiencePushback: the source is asked again once its pushback hold
	// (max of Retry-After, backoff and floor) has passed, or a sibling at
	// once (a 429).
	patiencePushback
)

// cutRule says what an attempt means for an answer part of which already
// reached the caller (a committed stream).
type cutRule uint8

const (
	// cutEnds: no source can complete the answer honestly after this; the
	// call ends with the error that cut it (or this attempt's error, when
	// nothing was continued yet).
	cutEnds cutRule = iota
	// cutContinues: the call may go on as a continuation on a source with
	// CONTINUE=prefill (a reset, a 5xx, a stall mid-stream).
	cutContinues
	// cutStands: the attempt's own end stands even while continuing (the
	// answer completed; the caller went away).
	cutStands
)

// effect is everything the end of one attempt means.
type effect struct {
	// breaker is the outcome recorded on the source's circuit.
	breaker core.Outcome
	// settle is how the permit's pre-deducted tokens are settled, and its
	// reserved cost on the spend budgets (SettleActual: the answer's priced
	// usage).
	settle core.SettleKind
	// unbilled is true when the attempt cost nothing although its tokens
	// stay counted (a 5xx answer generated nothing): the budgets' reserved
	// cost is given back while TPM keeps the estimate. effectOf clears it
	// for an error that arrived inside an answer that had begun (a 5xx
	// error event in a 200 stream: a cut, whose tokens were generated).
	unbilled bool
	// health is fed into the source's health score.
	health verdict
	// hold sets the source's hold.
	hold holdRule
	// aimd moves the source's adaptive concurrency limit.
	aimd aimdRule
	// spends is true when the attempt consumes one of MAX_ATTEMPTS.
	spends bool
	// end says whether the call ends here.
	end endRule
	// progress is true when the scope made progress (the stall rule).
	progress bool
	// observe is the outcome the observer and the logs see.
	observe core.AttemptOutcome
	// perSource is the reason recorded for the source in a
	// GatewayUnavailableError; every row whose call may go on names one.
	perSource core.Reason
	// patience says whether the call waits for the source in its tier.
	patience patienceRule
	// cut says what the attempt means for a committed, cut answer.
	cut cutRule
	// keepsAnswer is true when the attempt's answer, though refused, is
	// kept: returned with the error when the retry budget runs out.
	keepsAnswer bool
}

// policyKey selects a row: the class of the attempt's error and its reason.
type policyKey struct {
	class  core.Class
	reason core.Reason
}

// anyReason is the row of a class used when its reason has no row of its own.
const anyReason core.Reason = "*"

// classSuccess is the pseudo-class of an attempt that answered.
const classSuccess = core.ClassOther + 100

// classMemory is the pseudo-class of an attempt whose answer did not fit
// the call's memory budget (an error matching core.ErrMemoryBudget).
const classMemory = core.ClassOther + 101

// policy is the table. Read a row as: "an attempt that ends like this
// records <breaker> on the circuit, settles <settle>, ...".
var policy = map[policyKey]effect{
	// The source answered.
	{classSuccess, anyReason}: {breaker: core.OutcomeSuccess, settle: core.SettleActual, health: healthGood,
		hold: holdClear, aimd: aimdGrow, end: endAnswer, progress: true, observe: core.AttemptSuccess, cut: cutStands},

	// 429: pushback. Not a breaker failure, no budget spent, tokens
	// refunded; the source waits out Retry-After (hard hold) and another
	// source is preferred meanwhile. A call may wait for it in its tier;
	// a cut answer is not continued (the sources are pushing back).
	{core.ClassTransient, core.ReasonRateLimited}: {breaker: core.OutcomeRateLimited, settle: core.SettleRefund, health: healthBad,
		hold: holdPushback, aimd: aimdHalve, observe: core.AttemptRateLimited, perSource: core.ReasonRateLimited,
		patience: patiencePushback},
	// Timeouts and stalls: a failure weighted by TIMEOUT_WEIGHT; the slow
	// source is avoided for a cooldown, not waited for in its tier. A cut
	// answer may be continued elsewhere.
	{core.ClassTransient, core.ReasonTimeout}: {breaker: core.OutcomeTimeout, settle: core.SettleEstimate, health: healthBad,
		hold: holdCooldown, spends: true, observe: core.AttemptTimeout, perSource: core.ReasonTimeout, cut: cutContinues},
	{core.ClassTransient, core.ReasonStalled}: {breaker: core.OutcomeTimeout, settle: core.SettleEstimate, health: healthBad,
		hold: holdCooldown, spends: true, observe: core.AttemptTimeout, perSource: core.ReasonTimeout, cut: cutContinues},
	// 5xx, resets, cut or malformed streams. A 5xx answer is not billed.
	// A 5xx or a network error of a source that was answering is a blip
	// the call may wait out in its tier.
	{core.ClassTransient, core.ReasonServerError}: {breaker: core.OutcomeFailure, settle: core.SettleEstimate, unbilled: true, health: healthBad,
		hold: holdBackoff, spends: true, observe: core.AttemptTransient, perSource: core.ReasonServerError,
		patience: patienceBackoff, cut: cutContinues},
	{core.ClassTransient, core.ReasonNetworkError}: {breaker: core.OutcomeFailure, settle: core.SettleEstimate, health: healthBad,
		hold: holdBackoff, spends: true, observe: core.AttemptTransient, perSource: core.ReasonNetworkError,
		patience: patienceBackoff, cut: cutContinues},
	{core.ClassTransient, anyReason}: {breaker: core.OutcomeFailure, settle: core.SettleEstimate, health: healthBad,
		hold: holdBackoff, spends: true, observe: core.AttemptTransient, perSource: core.ReasonNetworkError, cut: cutContinues},
	// The source answered that it could not do the task (an OCR server's
	// "success": false): the answer proves it alive, so the breaker records
	// a success; the failure is the source's, not the request's, so the call
	// fails over like after a 5xx, and the health score drops, steering the
	// selector away from a server that keeps failing tasks without opening
	// its circuit.
	{core.ClassTransient, core.ReasonTaskFailed}: {breaker: core.OutcomeSuccess, settle: core.SettleEstimate, health: healthBad,
		hold: holdBackoff, spends: true, observe: core.AttemptTransient, perSource: core.ReasonTaskFailed, cut: cutContinues},

	// 401/403/402, insufficient quota: the breaker opens at once.
	{core.ClassSourceDead, anyReason}: {breaker: core.OutcomeDead, settle: core.SettleRefund, health: healthBad,
		hold: holdDead, spends: true, observe: core.AttemptDead, perSource: core.ReasonSourceDead},

	// The request itself was refused: the service answered (alive for the
	// breaker), nothing learned about its health, the call ends.
	{core.ClassRejected, anyReason}: {breaker: core.OutcomeSuccess, settle: core.SettleRefund, health: healthNeutral,
		hold: holdKeep, end: endError, observe: core.AttemptRejected},
	// ...or the caller's side refused the stream (its sink failed): the
	// source answered and generated until then, so the estimate is kept,
	// as for a cut; the call ends.
	{core.ClassRejected, core.ReasonConsumerFailed}: {breaker: core.OutcomeSuccess, settle: core.SettleEstimate, health: healthNeutral,
		hold: holdKeep, end: endError, observe: core.AttemptRejected},
	// ...unless it is too long for this model: another model may take it.
	{core.ClassRejected, core.ReasonContextLength}: {breaker: core.OutcomeSuccess, settle: core.SettleRefund, health: healthNeutral,
		hold: holdKeep, spends: true, end: endOtherModel, observe: core.AttemptRejected, perSource: core.ReasonContextLength},

	// A result that failed its check: billed and alive, not a bad service;
	// the call ends with the answer and the error (structured output
	// re-asks outside the engine).
	{core.ClassInvalid, anyReason}: {breaker: core.OutcomeSuccess, settle: core.SettleActual, health: healthNeutral,
		hold: holdClear, aimd: aimdGrow, end: endAnswerError, progress: true, observe: core.AttemptInvalid, keepsAnswer: true},
	// The quality guard refused the answer: a bad answer, not a bad
	// service; try another source while the budget lasts, and keep the
	// answer to return with the error when the budget runs out.
	{core.ClassInvalid, core.ReasonLowQuality}: {breaker: core.OutcomeSuccess, settle: core.SettleActual, health: healthNeutral,
		hold: holdBackoff, aimd: aimdGrow, spends: true, progress: true, observe: core.AttemptInvalid, perSource: core.ReasonLowQuality,
		keepsAnswer: true},

	// The answer did not fit this process's memory budget for buffered
	// bytes: no fault of the source and nothing learned about it (a held
	// probe is given back); the call ends at once with the error, which
	// another source's answer would not fit either.
	{classMemory, anyReason}: {breaker: core.OutcomeAbandoned, settle: core.SettleEstimate, health: healthNeutral,
		hold: holdKeep, end: endError, observe: core.AttemptCancelled},

	// The caller went away: no verdict, a held probe is given back; the
	// call ends with the cancellation, even while continuing a cut answer.
	{core.ClassCanceled, anyReason}: {breaker: core.OutcomeAbandoned, settle: core.SettleEstimate, health: healthNeutral,
		hold: holdKeep, end: endError, observe: core.AttemptCancelled, cut: cutStands},

	// An error of no known class (a foreign upstream's): a failure.
	{core.ClassOther, anyReason}: {breaker: core.OutcomeFailure, settle: core.SettleEstimate, health: healthBad,
		hold: holdBackoff, spends: true, observe: core.AttemptTransient, perSource: core.ReasonNetworkError},
}

// effectOf returns the row for an attempt's end: err == nil is a success.
func effectOf(err error) (effect, core.Classified) {
	if err == nil {
		return policy[policyKey{classSuccess, anyReason}], core.Classified{}
	}
	c := core.Classify(err)
	// A cancellation stays one whatever it wraps.
	if c.Class != core.ClassCanceled && errors.Is(err, core.ErrMemoryBudget) {
		return policy[policyKey{classMemory, anyReason}], c
	}
	if e, ok := policy[policyKey{c.Class, c.Reason}]; ok {
		if e.unbilled && !beforeAnswer(err) {
			e.unbilled = false
		}
		return e, c
	}
	if e, ok := policy[policyKey{c.Class, anyReason}]; ok {
		return e, c
	}
	// Scope-level classes (an upstream that returned one) fail the attempt.
	return policy[policyKey{core.ClassOther, anyReason}], c
}

// beforeAnswer reports whether err came instead of an answer: its HTTP
// status is the failure (a 5xx), or no status arrived. An error event
// inside a 2xx answer (a stream that had begun) is not.
func beforeAnswer(err error) bool {
	var te *core.TransientError
	return !errors.As(err, &te) || te.StatusCode == 0 || te.StatusCode >= 500
}

// scopeRule is what the reason of a scope-level failure means for the
// GatewayUnavailableError that reports it.
type scopeRule struct {
	// breakerRetryAfter: the error's RetryAfter is no later than the
	// earliest RetryAfter a breaker gave in the call's last round.
	breakerRetryAfter bool
	// queueEstimate: the error's RetryAfter is the admission queue's
	// estimate of when the call would have been admitted (the sources'
	// holds say nothing about the line ahead of it).
	queueEstimate bool
}

// scopePolicy holds the scope-level reasons with a rule; any other reason
// has the zero rule.
var scopePolicy = map[core.Reason]scopeRule{
	core.ReasonCircuitOpen: {breakerRetryAfter: true},
	// The call's deadline cannot be met behind the calls waiting ahead.
	core.ReasonQueueDeadline: {queueEstimate: true},
}
