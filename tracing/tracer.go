package tracing

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

// InstrumentationName names the tracer this package obtains from its
// TracerProvider (the instrumentation scope of every span it starts).
const InstrumentationName = "github.com/polygateway/polygateway/tracing"

// The library's own span attributes; the gen_ai.* and error.type ones are
// those of the OpenTelemetry semantic conventions (semconv v1.41.0).
const (
	// ScopeKey is the scope of the call (e.g. "LLM").
	ScopeKey = attribute.Key("polygateway.scope")
	// CallIDKey is the call's id (LLMResponse.CallID, the telemetry key).
	CallIDKey = attribute.Key("polygateway.call_id")
	// ParentCallIDKey is the call's ParentCallID, when set.
	ParentCallIDKey = attribute.Key("polygateway.parent_call_id")
	// SourceKey is the source of an attempt, or the source that answered
	// the call.
	SourceKey = attribute.Key("polygateway.source")
	// AttemptKey is the attempt's number in its call (1 = first).
	AttemptKey = attribute.Key("polygateway.attempt")
	// AttemptsKey is how many attempts the call made, however it ended (a
	// degraded answer or an error included).
	AttemptsKey = attribute.Key("polygateway.attempts")
	// BreakerStateKey is the state of the source's circuit when it admitted
	// the attempt: closed, half_open (the attempt is the probe) or open.
	BreakerStateKey = attribute.Key("polygateway.breaker.state")
	// OutcomeKey is how the attempt ended: success, transient, timeout,
	// rate_limited, source_dead, rejected, invalid or cancelled.
	OutcomeKey = attribute.Key("polygateway.outcome")
	// ReasonKey is the failure's reason (timeout, rate_limited,
	// circuit_open, …), when it has one.
	ReasonKey = attribute.Key("polygateway.reason")
	// CacheHitKey is true when the response cache answered the call.
	CacheHitKey = attribute.Key("polygateway.cache_hit")
	// DegradedKey is true when a stale cache entry or the caller's fallback
	// answered; DegradedByKey names which.
	DegradedKey   = attribute.Key("polygateway.degraded")
	DegradedByKey = attribute.Key("polygateway.degraded_by")
	// CostKey is the call's cost in the pricing table's currency, when the
	// model is priced.
	CostKey = attribute.Key("polygateway.cost")
	// TTFTKey and MaxInterTokenKey are a streamed attempt's time to first
	// token and longest gap between tokens, in seconds.
	TTFTKey          = attribute.Key("polygateway.ttft_s")
	MaxInterTokenKey = attribute.Key("polygateway.max_inter_token_s")
)

// Bounds of the strings put into spans: names and ids from configuration
// and callers, models from upstream answers, error messages.
const (
	maxValueLen   = 256
	maxMessageLen = 1024
)

// Option configures New.
type Option func(*config)

type config struct {
	provider   trace.TracerProvider
	propagator propagation.TextMapPropagator
	attrs      []attribute.KeyValue
}

// WithTracerProvider sets where spans go. Default (or nil): the global
// provider, otel.GetTracerProvider(), which follows a later
// otel.SetTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.provider = tp }
}

// WithPropagator sets how trace context is written into upstream requests
// (Inject) and read from incoming ones (Extract, Handler). Default (or
// nil): the global propagator, otel.GetTextMapPropagator(), as set when
// New is called; when none is set, W3C Trace Context (traceparent).
func WithPropagator(p propagation.TextMapPropagator) Option {
	return func(c *config) { c.propagator = p }
}

// WithAttributes adds attributes to every span the Tracer starts (for
// example a deployment name). The slice is copied.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(c *config) { c.attrs = append(c.attrs, kv...) }
}

// Tracer puts governed calls and their upstream attempts in OpenTelemetry
// spans; it implements core.Tracer. Create it with New and pass it
// to polygateway.WithTracer (and to embed or ocr clients through the same
// option). It is safe for concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	attrs  []attribute.KeyValue
}

var _ core.Tracer = (*Tracer)(nil)

// New returns a Tracer configured by opts.
func New(opts ...Option) *Tracer {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if c.provider == nil {
		c.provider = otel.GetTracerProvider()
	}
	if c.propagator == nil {
		c.propagator = otel.GetTextMapPropagator()
		if len(c.propagator.Fields()) == 0 { // the global one is unset
			c.propagator = propagation.TraceContext{}
		}
	}
	return &Tracer{
		tracer: c.provider.Tracer(InstrumentationName),
		prop:   c.propagator,
		attrs:  c.attrs,
	}
}

// The span kinds, made once.
var (
	callKind    = trace.WithSpanKind(trace.SpanKindInternal)
	attemptKind = trace.WithSpanKind(trace.SpanKindClient)
)

// callKey carries the *callSpan of a call in its context, so that its
// attempts know the operation.
type callKey struct{}

// callSpan is one call's span and what its attempts inherit; attempts
// counts the attempt spans started under it.
type callSpan struct {
	span     trace.Span
	op       string
	stream   bool
	attempts atomic.Int64
}

// StartCall starts the span of a governed call, named
// "{operation} {scope}" (e.g. "chat LLM"), of kind internal; it is a child
// of the span in ctx (in the gateway, the client's). The returned end
// function records the answer (models, usage, cache, degradation, attempts)
// or the error and ends the span.
func (t *Tracer) StartCall(ctx context.Context, call core.CallInfo) (context.Context, func(*polygateway.LLMResponse, error)) {
	op := call.Operation
	if op == "" {
		op = "chat"
	}
	// The operation and the scope are given at creation, for samplers; the
	// rest only to a span that records.
	ctx, span := t.tracer.Start(ctx, spanName(op, call.Scope), callKind,
		trace.WithAttributes(t.startAttrs(semconv.GenAIOperationNameKey.String(op), ScopeKey.String(redact.CutRunes(call.Scope, maxValueLen)))...))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 4)
		attrs = append(attrs, CallIDKey.String(redact.CutRunes(call.CallID, maxValueLen)), semconv.GenAIRequestStream(call.Stream))
		if call.SessionID != "" {
			attrs = append(attrs, semconv.GenAIConversationID(redact.CutRunes(call.SessionID, maxValueLen)))
		}
		if call.ParentCallID != "" {
			attrs = append(attrs, ParentCallIDKey.String(redact.CutRunes(call.ParentCallID, maxValueLen)))
		}
		span.SetAttributes(attrs...)
	}
	cs := &callSpan{span: span, op: op, stream: call.Stream}
	return context.WithValue(ctx, callKey{}, cs), cs.end
}

// startAttrs returns kv followed by the WithAttributes ones.
func (t *Tracer) startAttrs(kv ...attribute.KeyValue) []attribute.KeyValue {
	if len(t.attrs) == 0 {
		return kv
	}
	return append(kv, t.attrs...)
}

func (cs *callSpan) end(resp *polygateway.LLMResponse, err error) {
	span := cs.span
	if !span.IsRecording() {
		span.End()
		return
	}
	var attrs []attribute.KeyValue
	if resp != nil {
		attrs = make([]attribute.KeyValue, 0, 12)
		if resp.Provider != "" {
			attrs = append(attrs, semconv.GenAIProviderNameKey.String(redact.CutRunes(resp.Provider, maxValueLen)))
		}
		if resp.Model != "" {
			attrs = append(attrs, semconv.GenAIResponseModel(redact.CutRunes(resp.Model, maxValueLen)))
		}
		if resp.SourceName != "" {
			attrs = append(attrs, SourceKey.String(redact.CutRunes(resp.SourceName, maxValueLen)))
		}
		if !resp.CacheHit {
			// A cached answer used no tokens: usage is the answering attempt's.
			attrs = append(attrs, semconv.GenAIUsageInputTokens(resp.PromptTokens),
				semconv.GenAIUsageOutputTokens(resp.CompletionTokens))
			if resp.CachedPromptTokens > 0 {
				attrs = append(attrs, semconv.GenAIUsageCacheReadInputTokens(resp.CachedPromptTokens))
			}
		}
		if resp.FinishReason != "" {
			attrs = append(attrs, semconv.GenAIResponseFinishReasons(redact.CutRunes(resp.FinishReason, maxValueLen)))
		}
		attrs = append(attrs, CacheHitKey.Bool(resp.CacheHit), DegradedKey.Bool(resp.Degraded))
		if resp.DegradedBy != core.DegradedNone {
			attrs = append(attrs, DegradedByKey.String(string(resp.DegradedBy)))
		}
		if resp.Cost != nil {
			attrs = append(attrs, CostKey.Float64(*resp.Cost))
		}
	}
	if err != nil {
		cl := polygateway.Classify(err)
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(cl.Class)))
		if cl.Reason != "" {
			attrs = append(attrs, ReasonKey.String(string(cl.Reason)))
		}
		if resp == nil && cl.Source != "" {
			attrs = append(attrs, SourceKey.String(redact.CutRunes(cl.Source, maxValueLen)))
		}
		span.SetStatus(codes.Error, redact.CutRunes(err.Error(), maxMessageLen))
	}
	// Counted as they start: a degraded answer's LLMResponse.Attempts does
	// not list the attempts that failed before it, nor is there one on error.
	attrs = append(attrs, AttemptsKey.Int64(cs.attempts.Load()))
	span.SetAttributes(attrs...)
	span.End()
}

// StartAttempt starts the span of one upstream attempt, named
// "{operation} {model}" (e.g. "chat gpt-4o-mini"), of kind client, as a
// child of the call's span in ctx. The attempt's upstream requests carry
// its trace context (Inject). The returned end function records the
// outcome and ends the span.
func (t *Tracer) StartAttempt(ctx context.Context, ev core.AttemptEvent) (context.Context, func(core.AttemptEvent, error)) {
	op := "chat"
	cs, _ := ctx.Value(callKey{}).(*callSpan)
	if cs != nil {
		op = cs.op
		cs.attempts.Add(1)
	}
	// The GenAI conventions' sampling attributes at creation, the rest only
	// to a span that records.
	ctx, span := t.tracer.Start(ctx, spanName(op, ev.Model), attemptKind,
		trace.WithAttributes(t.startAttrs(semconv.GenAIOperationNameKey.String(op),
			semconv.GenAIProviderNameKey.String(redact.CutRunes(ev.Provider, maxValueLen)),
			semconv.GenAIRequestModel(redact.CutRunes(ev.Model, maxValueLen)))...))
	if span.IsRecording() {
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs,
			ScopeKey.String(redact.CutRunes(ev.Scope, maxValueLen)),
			SourceKey.String(redact.CutRunes(ev.Source, maxValueLen)),
			CallIDKey.String(redact.CutRunes(ev.CallID, maxValueLen)),
			AttemptKey.Int(ev.Attempt),
			BreakerStateKey.String(ev.Breaker.String()),
		)
		if cs != nil {
			attrs = append(attrs, semconv.GenAIRequestStream(cs.stream))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, func(ev core.AttemptEvent, err error) { endAttempt(span, ev, err) }
}

func endAttempt(span trace.Span, ev core.AttemptEvent, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	attrs := make([]attribute.KeyValue, 0, 6)
	if ev.Outcome != "" {
		attrs = append(attrs, OutcomeKey.String(string(ev.Outcome)))
	}
	if err == nil && ev.Model != "" {
		// On success the engine reports the model the answer names.
		attrs = append(attrs, semconv.GenAIResponseModel(redact.CutRunes(ev.Model, maxValueLen)))
	}
	if ev.TTFT > 0 {
		attrs = append(attrs, TTFTKey.Float64(ev.TTFT.Seconds()))
	}
	if ev.MaxInterToken > 0 {
		attrs = append(attrs, MaxInterTokenKey.Float64(ev.MaxInterToken.Seconds()))
	}
	if err != nil {
		attrs = append(attrs, semconv.ErrorTypeKey.String(errorType(polygateway.Classify(err).Class)))
		if ev.Reason != "" {
			attrs = append(attrs, ReasonKey.String(string(ev.Reason)))
		}
		span.SetStatus(codes.Error, redact.CutRunes(err.Error(), maxMessageLen))
	}
	span.SetAttributes(attrs...)
	span.End()
}

// Inject writes the trace context of ctx into h (by default the W3C
// traceparent header); the library calls it on every upstream request.
func (t *Tracer) Inject(ctx context.Context, h http.Header) {
	t.prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// Extract returns ctx with the trace context that h carries (an incoming
// request's headers), so that spans started under it are children of the
// caller's span. Without trace headers it returns ctx.
func (t *Tracer) Extract(ctx context.Context, h http.Header) context.Context {
	return t.prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// Handler returns next wrapped so that every request runs with the trace
// context its headers carry (Extract): a server that makes governed calls
// from its handlers puts them under its clients' spans.
func (t *Tracer) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ctx := t.Extract(r.Context(), r.Header); ctx != r.Context() {
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}

// errorType is the error.type of a class: its type name, or _OTHER for an
// error that is not one of the library's.
func errorType(c core.Class) string {
	if c == foreignClass {
		return "_OTHER"
	}
	return c.String()
}

// foreignClass is the class of errors that are not the library's.
var foreignClass = polygateway.Classify(errors.New("foreign")).Class

// spanName joins the operation and what it acts on ("chat LLM").
func spanName(op, target string) string {
	if target == "" {
		return op
	}
	return op + " " + redact.CutRunes(target, maxValueLen)
}
