package middleware

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/polygateway/polygateway/internal/core"
)

// TelemetryConfig configures the telemetry layer.
type TelemetryConfig struct {
	// Sink receives one record per call; nil only stamps latency (the
	// "none" telemetry backend).
	Sink core.TelemetrySink
	// Scope is written into every row.
	Scope string
	// Clock defaults to the wall clock; Logger to a discarding logger.
	Clock  core.Clock
	Logger *slog.Logger
}

// Telemetry returns the telemetry layer: exactly one record per call —
// success, failure or cache hit — and none for a cancelled call. It also
// stamps the response's Latency over everything inside it. A sink that
// refuses a record is logged once; the call is never affected.
func Telemetry(cfg TelemetryConfig) core.Middleware {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var warned atomic.Bool
	return func(next core.Handler) core.Handler {
		return func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			start := cfg.Clock.Now()
			resp, err := next(ctx, call)
			latency := cfg.Clock.Now().Sub(start)
			if resp != nil && !resp.CacheHit {
				resp.Latency = latency
			}
			if cfg.Sink == nil {
				return resp, err
			}
			var ce *core.CanceledError
			if errors.As(err, &ce) || (err != nil && ctx.Err() != nil) {
				return resp, err
			}
			rec := core.TelemetryRecord{
				CallID:       call.ID,
				ParentCallID: call.ParentCallID,
				SessionID:    call.SessionID,
				Messages:     MessagesJSON(call.Messages),
				LatencyMS:    float64(latency) / 1e6,
				Scope:        cfg.Scope,
				CreatedAt:    start,
			}
			if resp != nil {
				rec.Model, rec.Provider, rec.SourceName = resp.Model, resp.Provider, resp.SourceName
				rec.Response, rec.Thinking = resp.Content, resp.Thinking
				rec.PromptTokens, rec.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
				rec.UsageSource, rec.CacheHit, rec.Cost = resp.UsageSource, resp.CacheHit, resp.Cost
				if resp.TTFT > 0 {
					v := float64(resp.TTFT) / 1e6
					rec.TTFTMS = &v
				}
				if resp.MaxInterToken > 0 {
					v := float64(resp.MaxInterToken) / 1e6
					rec.MaxInterTokenMS = &v
				}
			}
			if err != nil {
				rec.Error = core.ErrorClass(err) + ": " + err.Error()
				rec.SourceName = sourceOf(err)
			}
			if werr := cfg.Sink.Write(ctx, rec); werr != nil && warned.CompareAndSwap(false, true) {
				cfg.Logger.Warn("polygateway: telemetry sink refused a record", "err", werr)
			}
			return resp, err
		}
	}
}

// sourceOf returns the source named by a classified error, if any.
func sourceOf(err error) string {
	var (
		te *core.TransientError
		de *core.SourceDeadError
		re *core.RequestRejectedError
		ie *core.ResultInvalidError
	)
	switch {
	case errors.As(err, &te):
		return te.Source
	case errors.As(err, &de):
		return de.Source
	case errors.As(err, &re):
		return re.Source
	case errors.As(err, &ie):
		return ie.Source
	}
	return ""
}
