package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/polygateway/polygateway/tracing"
)

// tracingHook is the server's OpenTelemetry wiring: one Tracer for every
// client it builds, the extraction of the clients' trace context around
// the proxy handler, and the provider to flush at exit.
type tracingHook struct {
	tr       *tracing.Tracer
	shutdown func(context.Context) error
}

// newTracingHook traces onto tp; incoming and outgoing requests carry W3C
// Trace Context (traceparent). Baggage is neither read from clients nor
// sent upstream.
func newTracingHook(tp trace.TracerProvider, shutdown func(context.Context) error) *tracingHook {
	return &tracingHook{
		tr:       tracing.New(tracing.WithTracerProvider(tp), tracing.WithPropagator(propagation.TraceContext{})),
		shutdown: shutdown,
	}
}

// tracingEnabled reports whether env asks for OTLP trace export: an OTLP
// endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT), the SDK is not disabled
// (OTEL_SDK_DISABLED) and OTEL_TRACES_EXPORTER is unset, otlp or none. It
// is an error to ask for another exporter or protocol.
func tracingEnabled(env map[string]string) (bool, error) {
	get := func(k string) string { return strings.TrimSpace(env[k]) }
	if strings.EqualFold(get("OTEL_SDK_DISABLED"), "true") {
		return false, nil
	}
	switch exp := strings.ToLower(get("OTEL_TRACES_EXPORTER")); exp {
	case "", "otlp":
	case "none":
		return false, nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported: otlp or none", exp)
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if p := get(k); p != "" && p != "http/protobuf" {
			return false, fmt.Errorf("%s: %q is not supported: http/protobuf", k, p)
		}
	}
	if get("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return false, nil
	}
	if err := checkHeaders(env); err != nil {
		return false, err
	}
	return true, nil
}

// checkHeaders refuses OTEL_EXPORTER_OTLP_HEADERS and
// OTEL_EXPORTER_OTLP_TRACES_HEADERS values with an entry the exporter
// cannot read (not name=value, a name that is not an HTTP token, a value
// with a bad percent-escape): its SDK would print the entry as is, a
// credential included, and export without it. An entry is never shown,
// only its position; empty entries are skipped, as the SDK skips them.
func checkHeaders(env map[string]string) error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for i, h := range strings.Split(env[k], ",") {
			if strings.TrimSpace(h) == "" {
				continue
			}
			name, v, ok := strings.Cut(h, "=")
			_, uerr := url.PathUnescape(v)
			switch {
			case !ok:
				return fmt.Errorf("%s: entry %d is not name=value (not shown)", k, i+1)
			case !isHeaderName(strings.TrimSpace(name)):
				return fmt.Errorf("%s: entry %d: the name is not an HTTP header name (not shown)", k, i+1)
			case uerr != nil:
				return fmt.Errorf("%s: entry %d: the value has an invalid percent-escape (not shown; write %%25 for a %%)", k, i+1)
			}
		}
	}
	return nil
}

// isHeaderName reports whether s is an HTTP token (RFC 9110), as the
// exporter requires of a header name.
func isHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c > unicode.MaxASCII || !unicode.IsLetter(c) && !unicode.IsDigit(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", c) {
			return false
		}
	}
	return true
}

// newTracing builds the OTLP/HTTP exporter and the SDK provider from the
// standard OTEL_* variables (endpoint, headers, timeout, compression,
// certificates, sampler, batch settings, service name and resource
// attributes). The exporter and the SDK read them from the process
// environment, so OTEL_* keys that only the .env file sets are copied into
// it first (the process environment wins). The SDK's errors (a collector
// that cannot be reached, …) are logged through log.
func newTracing(ctx context.Context, env map[string]string, log *slog.Logger) (*tracingHook, error) {
	for k, v := range env {
		if strings.HasPrefix(k, "OTEL_") {
			if _, set := os.LookupEnv(k); !set {
				if err := os.Setenv(k, v); err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
			}
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp exporter: %w", err)
	}
	// Later detectors win: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
	// override the default service name.
	res, err := sdkresource.New(ctx, sdkresource.WithAttributes(semconv.ServiceName("polygateway")),
		sdkresource.WithTelemetrySDK(), sdkresource.WithFromEnv())
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("otel resource: %w", err)
	}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing", slog.String("error", err.Error()))
	}))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return newTracingHook(tp, tp.Shutdown), nil
}

// flushTraces exports the spans still buffered and stops the provider,
// for at most flushTimeout; a collector that cannot take them is logged.
func (a *app) flushTraces() {
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := a.tracing.shutdown(ctx); err != nil {
		a.log.Warn("tracing: flushing spans failed", slog.String("error", err.Error()))
	}
}

// flushTimeout bounds the export of the last spans at exit.
const flushTimeout = 10 * time.Second
