package engine

import (
	"context"
	"log/slog"

	"github.com/polygateway/polygateway/core"
)

// The engine's events go to three places: the Observer (metrics), the
// call's AttemptListener (the gateway) and the logger. Every log record
// about a call carries call_id and scope; attempts are logged at DEBUG,
// failovers and breaker transitions at INFO (an opening at WARN).

// started reports an attempt about to be sent.
func (e *Engine) started(ctx context.Context, call *core.Call, ev core.AttemptEvent) {
	if e.obs != nil {
		e.obs.AttemptStarted(ev)
	}
	if call.Events != nil {
		call.Events.AttemptStarted(ev)
	}
}

// finished reports an attempt's end.
func (e *Engine) finished(ctx context.Context, call *core.Call, ev core.AttemptEvent, err error) {
	if e.obs != nil {
		e.obs.Attempt(ev)
	}
	if call.Events != nil {
		call.Events.AttemptFinished(ev)
	}
	if e.log.Enabled(ctx, slog.LevelDebug) {
		attrs := attemptAttrs(ev)
		if err != nil {
			attrs = append(attrs, slog.String("class", core.ErrorClass(err)), slog.String("err", err.Error()))
		}
		e.log.LogAttrs(ctx, slog.LevelDebug, "polygateway: attempt", attrs...)
	}
}

// failover reports that the call, after a failed attempt, makes another:
// logged when that attempt is about to be sent, so that an attempt after
// which the call gave up is never logged as one that is tried again.
func (e *Engine) failover(ctx context.Context, f *failedAttempt) {
	if !e.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := append(attemptAttrs(f.ev), slog.String("class", core.ErrorClass(f.err)), slog.String("err", f.err.Error()))
	e.log.LogAttrs(ctx, slog.LevelInfo, "polygateway: attempt failed, trying again", attrs...)
}

// gaveUp reports that the call ended after a failed attempt without
// another one: end is the error the call ends with.
func (e *Engine) gaveUp(ctx context.Context, f *failedAttempt, end error) {
	if !e.log.Enabled(ctx, slog.LevelInfo) {
		return
	}
	attrs := append(attemptAttrs(f.ev), slog.String("class", core.ErrorClass(f.err)), slog.String("err", f.err.Error()),
		slog.Bool("last", true), slog.String("ended_with", core.ErrorClass(end)))
	if c := core.Classify(end); c.Reason != "" {
		attrs = append(attrs, slog.String("ended_reason", string(c.Reason)))
	}
	e.log.LogAttrs(ctx, slog.LevelInfo, "polygateway: attempt failed, the call ends", attrs...)
}

// failedAttempt is an attempt that failed while the call went on.
type failedAttempt struct {
	ev  core.AttemptEvent
	err error
}

func attemptAttrs(ev core.AttemptEvent) []slog.Attr {
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs,
		slog.String("call_id", ev.CallID), slog.String("scope", ev.Scope), slog.String("source", ev.Source),
		slog.Int("attempt", ev.Attempt), slog.String("outcome", string(ev.Outcome)),
		slog.Float64("latency_ms", float64(ev.Latency.Microseconds())/1000))
	if ev.Reason != "" {
		attrs = append(attrs, slog.String("reason", string(ev.Reason)))
	}
	return attrs
}

// refused reports a source refused before an attempt.
func (e *Engine) refused(source string, reason core.Reason) {
	if e.obs != nil {
		e.obs.Refused(e.settings.Scope, source, reason)
	}
}

// observeState reports a breaker state to the observer and the logs when it
// differs from the last one seen for s (a transition).
func (e *Engine) observeState(ctx context.Context, callID string, s *sourceState, state core.BreakerState) {
	prev := core.BreakerState(s.lastState.Swap(uint32(state)))
	if prev == state {
		return
	}
	if e.obs != nil {
		e.obs.BreakerState(e.settings.Scope, s.cfg.Name, state)
	}
	level := slog.LevelInfo
	if state == core.StateOpen {
		level = slog.LevelWarn
	}
	e.log.LogAttrs(ctx, level, "polygateway: breaker "+state.String(),
		slog.String("call_id", callID), slog.String("scope", e.settings.Scope), slog.String("source", s.cfg.Name),
		slog.String("from", prev.String()), slog.String("to", state.String()))
}

// readState reads s's circuit (bounded by snapshotTimeout, not cancelled
// with the call), observes its state and returns it; ok is false when the
// read failed (the failure is otherwise ignored).
func (e *Engine) readState(ctx context.Context, callID string, s *sourceState) (snap core.BreakerSnapshot, ok bool) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), snapshotTimeout)
	defer cancel()
	snap, err := e.breaker.Snapshot(sctx, e.settings.Scope, s.cfg.Name, s.breaker)
	if err != nil {
		return snap, false
	}
	e.observeState(ctx, callID, s, snap.State)
	return snap, true
}
