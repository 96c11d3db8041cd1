// Package tracing puts a gateway's governed calls and their upstream
// attempts in OpenTelemetry spans and carries the W3C trace context
// (traceparent) into every upstream request. It is opt-in: programs that do
// not import it do not link OpenTelemetry.
//
//	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
//	defer tp.Shutdown(context.Background())
//	gc, err := polygateway.FromEnv("LLM",
//		polygateway.WithTracer(tracing.New(tracing.WithTracerProvider(tp))))
//
// Without WithTracerProvider the global provider (otel.GetTracerProvider)
// is used; without WithPropagator the global propagator, or W3C Trace
// Context when none is set. The same option traces embeddings
// (embed.FromEnv) and OCR (ocr.FromEnv) clients. A client built without
// WithTracer does no tracing work at all.
//
// # Spans
//
// Every governed call is one span of kind internal, named
// "{operation} {scope}" ("chat LLM", "embeddings EMBED", "ocr_text OCR"),
// a child of the span in the call's context. Every upstream attempt of the
// call is a child span of kind client, named "{operation} {model}" after the
// GenAI semantic conventions ("chat gpt-4o-mini"): a call that fails over
// from one source to another is one call span with two attempt spans. A
// call the response cache answers has no attempt span. The upstream
// requests of an attempt carry its trace context, so an instrumented
// upstream's spans are children of the attempt's.
//
// Attributes (GenAI conventions of semconv v1.41.0, plus the library's own):
//
//	attribute                           call  attempt
//	----------------------------------  ----  -------
//	gen_ai.operation.name               yes   yes      chat, embeddings, ocr_text, ocr_layout
//	gen_ai.provider.name                yes   yes      the source's provider (openai, deepseek, …)
//	gen_ai.request.model                      yes      the source's MODEL
//	gen_ai.response.model               yes   yes      the model the answer names
//	gen_ai.request.stream               yes   yes
//	gen_ai.usage.input_tokens           yes            usage of the answering attempt (not on cache hits)
//	gen_ai.usage.output_tokens          yes
//	gen_ai.usage.cache_read.input_tokens yes           provider prompt-cache tokens, when reported
//	gen_ai.response.finish_reasons      yes
//	gen_ai.conversation.id              yes            the call's SessionID, when set
//	error.type                          yes   yes      the error's class: TransientError, SourceDeadError,
//	                                                   RequestRejectedError, ResultInvalidError,
//	                                                   GatewayUnavailableError, GovernanceBackendError,
//	                                                   CanceledError; _OTHER for other errors
//	polygateway.scope                   yes   yes
//	polygateway.call_id                 yes   yes      LLMResponse.CallID, the telemetry key
//	polygateway.parent_call_id          yes            when set
//	polygateway.source                  yes   yes      the attempt's source; the call's answering source
//	polygateway.attempt                       yes      1 = first
//	polygateway.attempts                yes            attempts the call made
//	polygateway.breaker.state                 yes      closed, half_open (the probe) or open, at admission
//	polygateway.outcome                       yes      success, transient, timeout, rate_limited,
//	                                                   source_dead, rejected, invalid, cancelled
//	polygateway.reason                  yes   yes      the failure's reason (timeout, rate_limited, …)
//	polygateway.cache_hit               yes
//	polygateway.degraded                yes            a stale cache entry or the fallback answered
//	polygateway.degraded_by             yes            stale_cache or fallback
//	polygateway.cost                    yes            in the pricing table's currency, priced models only
//	polygateway.ttft_s                        yes      streamed attempts: time to first token, seconds
//	polygateway.max_inter_token_s             yes      streamed attempts: longest gap between tokens
//
// A failed call or attempt has status Error with the error's message (the
// library's errors are redacted: they never carry keys). Prompts, answers
// and request bodies never become attributes. String values are cut to 256
// bytes, messages to 1024.
//
// # Incoming trace context
//
// A server that makes governed calls from its handlers can wrap them in
// Tracer.Handler (or call Tracer.Extract) so that the call spans are
// children of its clients' spans; the gateway (cmd/polygateway) does so.
//
// # Cost
//
// A Tracer starts two spans per call with one attempt; with a
// non-recording provider (the default before the program installs an SDK)
// the end of each span returns at once. See the package benchmarks.
package tracing
