package middleware

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
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
	// Content is what a row keeps of the messages, the answer and its
	// thinking: core.TelemetryContentFull (default, ""), Redacted (with
	// Secrets removed by the redaction rule) or None (empty).
	Content core.TelemetryContent
	// Secrets are removed from the row's content under
	// TelemetryContentRedacted: the scope's API keys and backend URLs.
	Secrets []string
}

// recorder writes telemetry rows. Safe for concurrent use.
type recorder struct {
	cfg    TelemetryConfig
	redact *redact.Redactor // under TelemetryContentRedacted
	warned atomic.Bool
}

// record writes the row of one finished call: exactly one per call, none for
// a cancelled call, nothing when the sink is nil. The messages are rendered
// into the row (core.MessagesJSON) before it goes to the sink, so that no
// row refers to them after the call returns. A sink that refuses a row is
// logged once; the call is never affected.
func (r *recorder) record(ctx context.Context, call *core.Call, start time.Time, latency time.Duration, resp *core.LLMResponse, err error) {
	if r.cfg.Sink == nil {
		return
	}
	var ce *core.CanceledError
	if errors.As(err, &ce) || (err != nil && ctx.Err() != nil) {
		return
	}
	rec := core.TelemetryRecord{
		CallID:       call.ID,
		ParentCallID: call.ParentCallID,
		SessionID:    call.SessionID,
		RawMessages:  call.Messages,
		LatencyMS:    float64(latency) / 1e6,
		Scope:        r.cfg.Scope,
		CreatedAt:    start,
		QueueWaitMS:  float64(call.QueueWait) / 1e6,
	}
	if resp != nil {
		rec.Model, rec.Provider, rec.SourceName = resp.Model, resp.Provider, resp.SourceName
		rec.Response, rec.Thinking = resp.Content, resp.Thinking
		rec.PromptTokens, rec.CompletionTokens = resp.PromptTokens, resp.CompletionTokens
		rec.UsageSource, rec.CacheHit, rec.Cost = resp.UsageSource, resp.CacheHit, resp.Cost
		rec.Degraded = string(resp.DegradedBy)
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
		rec.SourceName = core.Classify(err).Source
	}
	// The call's messages may be the caller's own (the library hands them
	// down without a copy), free to be reused once the call returns: the
	// row holds their rendering, made now, never the messages.
	r.keepContent(&rec)
	if werr := r.cfg.Sink.Write(ctx, rec); werr != nil && r.warned.CompareAndSwap(false, true) {
		r.cfg.Logger.Warn("polygateway: telemetry sink refused a record", "err", werr)
	}
}

// keepContent reduces the row's messages, response and thinking to what
// the Content setting keeps.
func (r *recorder) keepContent(rec *core.TelemetryRecord) {
	if r.cfg.Content == core.TelemetryContentNone {
		rec.Messages, rec.RawMessages, rec.Response, rec.Thinking = "", nil, "", ""
		return
	}
	rec.Render()
	if r.cfg.Content == core.TelemetryContentRedacted {
		rec.Messages = r.redact.String(rec.Messages)
		rec.Response, rec.Thinking = r.redact.String(rec.Response), r.redact.String(rec.Thinking)
	}
}

// Telemetry returns the telemetry layer: it stamps the response's Latency
// over everything inside it and records one row per call — what the caller
// got: a source's answer, a cache hit (the call's Served answer), a
// degraded answer with its strategy, or the failure.
func Telemetry(cfg TelemetryConfig) core.Middleware {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &recorder{cfg: cfg}
	if cfg.Content == core.TelemetryContentRedacted {
		r.redact = redact.New(cfg.Secrets...)
	}
	return func(next core.Handler) core.Handler {
		return func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			start := r.cfg.Clock.Now()
			resp, err := next(ctx, call)
			latency := core.Since(r.cfg.Clock, start)
			if resp != nil {
				resp.Latency = latency
			}
			r.record(ctx, call, start, latency, resp, err)
			return resp, err
		}
	}
}
