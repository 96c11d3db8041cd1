package middleware

import (
	"context"

	"github.com/polygateway/polygateway/internal/core"
)

// FallbackFunc is a last-resort answer for a call no source could answer.
type FallbackFunc = func(ctx context.Context, msgs []core.Message, cause error) (*core.LLMResponse, error)

// Fallback returns the last layer of the degradation chain, outside the
// cache (whose stale entries come first): when the call fails and no source
// produced an answer — not a rejected request, not an invalid result, not a
// cancellation — it asks the call's Fallback, else def. Their answer is
// returned marked Degraded; an error from them is ignored and the original
// error returned. With neither set the layer passes calls through.
func Fallback(def FallbackFunc) core.Middleware {
	return func(next core.Handler) core.Handler {
		return func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			resp, err := next(ctx, call)
			if err == nil || ctx.Err() != nil || !unavailable(err) {
				return resp, err
			}
			fb := call.Fallback
			if fb == nil {
				fb = def
			}
			if fb == nil {
				return resp, err
			}
			alt, ferr := fb(ctx, call.Messages, err)
			if ferr != nil || alt == nil {
				return resp, err
			}
			alt.Degraded = true
			return alt, nil
		}
	}
}
