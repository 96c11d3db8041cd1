package middleware

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"github.com/polygateway/polygateway/core"
)

// DegradeConfig configures the degradation step.
type DegradeConfig struct {
	// Fallback is the scope's last resort; a call's own Fallback wins.
	// Optional.
	Fallback core.FallbackFunc
	// Logger receives one WARN record per degraded answer. Nil: discard.
	Logger *slog.Logger
}

// Degrade returns the degradation step, just inside the telemetry layer:
// when no source produced an answer — not a rejected request, not an
// invalid result, not a cancellation — it serves, in order, the call's
// Stale answer (an expired cache entry the cache layer found), then the
// call's Fallback or the scope's. The answer is marked Degraded with the
// strategy that served it, so that telemetry records what the caller got.
// After a stream committed part of another answer to the caller, only an
// answer that begins with what was delivered may stand in.
// An error from a fallback is ignored and the original error returned.
func Degrade(cfg DegradeConfig) core.Middleware {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(next core.Handler) core.Handler {
		return func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			resp, err := next(ctx, call)
			if err == nil || ctx.Err() != nil || !Unavailable(err) {
				return resp, err
			}
			var alt *core.LLMResponse
			var how core.Degradation
			if call.Stale != nil {
				alt, how = call.Stale, core.DegradedStaleCache
			} else {
				fb := call.Fallback
				if fb == nil {
					fb = cfg.Fallback
				}
				if fb == nil {
					return resp, err
				}
				a, ferr := fb(ctx, call.Messages, err)
				if ferr != nil || a == nil {
					return resp, err
				}
				// The answer is marked, and later given the call's id, on a
				// copy: a fallback may return one canned answer to every call.
				own := *a
				alt, how = &own, core.DegradedFallback
			}
			if !continues(call.Deltas, alt) {
				// Part of another answer already reached the caller: an
				// answer that does not go on from it cannot complete the
				// stream, and the call ends with what cut it.
				return resp, err
			}
			alt.Degraded, alt.DegradedBy = true, how
			log.LogAttrs(ctx, slog.LevelWarn, "polygateway: degraded answer",
				slog.String("call_id", call.ID), slog.String("scope", call.Scope),
				slog.String("strategy", string(how)), slog.String("cause", err.Error()))
			return alt, nil
		}
	}
}

// continues reports whether alt can follow what sink (nil: none) already
// delivered to the caller: nothing was, or alt's content and thinking begin
// with it.
func continues(sink core.DeltaSink, alt *core.LLMResponse) bool {
	if sink == nil || !sink.Committed() {
		return true
	}
	content, thinking := sink.Delivered()
	return strings.HasPrefix(alt.Content, content) && strings.HasPrefix(alt.Thinking, thinking)
}

// Unavailable reports whether err means no source produced an answer — the
// cases a degraded answer may stand in for: not a rejected request, not an
// invalid result, not a cancellation.
func Unavailable(err error) bool {
	var (
		re *core.RequestRejectedError
		ie *core.ResultInvalidError
		ce *core.CanceledError
	)
	return !errors.As(err, &re) && !errors.As(err, &ie) && !errors.As(err, &ce)
}
