package middleware

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

func telemetryFixture(sink core.TelemetrySink, inner *stubHandler) (core.Handler, *backendtest.FakeClock) {
	clk := backendtest.NewFakeClock(testkit.Epoch)
	inner.during = func() { clk.Advance(1500 * time.Millisecond) }
	mw := Telemetry(TelemetryConfig{Sink: sink, Scope: testScope, Clock: clk})
	return core.Chain(inner.handle, mw), clk
}

func TestTelemetryWritesOneRowForASuccessfulCall(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	resp := answer()
	resp.MaxInterToken = 30 * time.Millisecond
	h, _ := telemetryFixture(sink, &stubHandler{resp: resp})
	call := callWithID("call-42")
	call.SessionID, call.ParentCallID = "sess-1", "parent-7"
	got, err := h(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if got.Latency != 1500*time.Millisecond {
		t.Errorf("Latency = %v, want 1.5s stamped by the layer", got.Latency)
	}
	recs := sink.records()
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	r := recs[0]
	checks := []struct {
		field     string
		got, want any
	}{
		{"CallID", r.CallID, "call-42"},
		{"ParentCallID", r.ParentCallID, "parent-7"},
		{"SessionID", r.SessionID, "sess-1"},
		{"Model", r.Model, "m1"},
		{"Provider", r.Provider, "prov"},
		{"SourceName", r.SourceName, "prov_1"},
		{"Messages", r.Messages, core.MessagesJSON(call.Messages)},
		{"Response", r.Response, "the answer"},
		{"Thinking", r.Thinking, "thoughts"},
		{"PromptTokens", r.PromptTokens, 100},
		{"CompletionTokens", r.CompletionTokens, 20},
		{"UsageSource", r.UsageSource, core.UsageMeasured},
		{"LatencyMS", r.LatencyMS, 1500.0},
		{"CacheHit", r.CacheHit, false},
		{"Error", r.Error, ""},
		{"Scope", r.Scope, testScope},
		{"CreatedAt", r.CreatedAt, testkit.Epoch},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.field, c.got, c.want)
		}
	}
	if r.TTFTMS == nil || *r.TTFTMS != 50 || r.MaxInterTokenMS == nil || *r.MaxInterTokenMS != 30 {
		t.Errorf("TTFTMS, MaxInterTokenMS = %v, %v; want 50 and 30", r.TTFTMS, r.MaxInterTokenMS)
	}
	if r.Cost == nil || *r.Cost != 0.25 {
		t.Errorf("Cost = %v, want 0.25", r.Cost)
	}
}

func TestTelemetryLeavesStreamTimingsNullWhenNotStreamed(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	resp := answer()
	resp.TTFT, resp.MaxInterToken, resp.Cost = 0, 0, nil
	h, _ := telemetryFixture(sink, &stubHandler{resp: resp})
	if _, err := h(context.Background(), callWithID("c")); err != nil {
		t.Fatal(err)
	}
	r := sink.records()[0]
	if r.TTFTMS != nil || r.MaxInterTokenMS != nil || r.Cost != nil {
		t.Errorf("TTFTMS=%v MaxInterTokenMS=%v Cost=%v, want all nil", r.TTFTMS, r.MaxInterTokenMS, r.Cost)
	}
}

func TestTelemetryWritesOneRowForAFailedCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		err        error
		prefix     string
		sourceName string
	}{
		{"transient", testkit.TransientErr("b_1"), "TransientError: ", "b_1"},
		{"source dead", testkit.DeadErr("b_1"), "SourceDeadError: ", "b_1"},
		{"rejected", testkit.RejectedErr("b_1"), "RequestRejectedError: ", "b_1"},
		{"invalid", testkit.InvalidErr("b_1"), "ResultInvalidError: ", "b_1"},
		{"unavailable", &core.GatewayUnavailableError{Scope: testScope, Reason: core.ReasonRetryExhausted, Err: testkit.TimeoutErr("c_1")}, "GatewayUnavailableError: ", "c_1"},
		{"backend", &core.GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: errors.New("down")}, "GovernanceBackendError: ", ""},
		{"foreign", errors.New("boom"), "Error: ", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{}
			h, _ := telemetryFixture(sink, &stubHandler{err: tc.err})
			resp, err := h(context.Background(), callWithID("c9"))
			if err != tc.err || resp != nil { //nolint:errorlint // the inner error must come back unchanged, not wrapped
				t.Fatalf("= (%v, %v), want the inner error unchanged", resp, err)
			}
			recs := sink.records()
			if len(recs) != 1 {
				t.Fatalf("%d records, want 1", len(recs))
			}
			r := recs[0]
			if r.Error != tc.prefix+tc.err.Error() {
				t.Errorf("Error = %q, want %q", r.Error, tc.prefix+tc.err.Error())
			}
			if r.SourceName != tc.sourceName || r.CallID != "c9" || r.LatencyMS != 1500 || r.Response != "" || r.PromptTokens != 0 {
				t.Errorf("record = %+v", r)
			}
		})
	}
}

func TestTelemetryWritesNoRowForACancelledCall(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		cancel bool
	}{
		{"CanceledError", &core.CanceledError{Err: context.Canceled}, false},
		{"deadline CanceledError", &core.CanceledError{Err: context.DeadlineExceeded}, false},
		{"wrapped CanceledError", errors.Join(errors.New("x"), &core.CanceledError{Err: context.Canceled}), false},
		{"any failure once the context ended", testkit.TransientErr("a"), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{}
			h, _ := telemetryFixture(sink, &stubHandler{err: tc.err})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				cancel()
			}
			if _, err := h(ctx, callWithID("c")); err != tc.err { //nolint:errorlint // the inner error must come back unchanged, not wrapped
				t.Fatalf("err = %v, want the inner error", err)
			}
			if sink.tries != 0 {
				t.Errorf("%d rows written for a cancelled call", sink.tries)
			}
		})
	}
}

func TestTelemetryWithoutSinkOnlyStampsLatency(t *testing.T) {
	t.Parallel()
	clk := backendtest.NewFakeClock(testkit.Epoch)
	inner := &stubHandler{resp: answer(), during: func() { clk.Advance(time.Second) }}
	h := core.Chain(inner.handle, Telemetry(TelemetryConfig{Clock: clk}))
	resp, err := h(context.Background(), callWithID("c"))
	if err != nil || resp.Latency != time.Second {
		t.Errorf("= (%+v, %v), want Latency 1s", resp, err)
	}
}

func TestTelemetrySinkFailureIsLoggedOnceAndNeverAffectsTheCall(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{err: errors.New("disk full")}
	logs := &testkit.Logs{}
	inner := &stubHandler{resp: answer()}
	h := core.Chain(inner.handle, Telemetry(TelemetryConfig{Sink: sink, Logger: slog.New(logs)}))
	for i := range 3 {
		resp, err := h(context.Background(), callWithID("c"))
		if err != nil || resp.Content != "the answer" {
			t.Fatalf("call %d = (%+v, %v)", i, resp, err)
		}
	}
	failing := &stubHandler{err: testkit.TransientErr("a")}
	hf := core.Chain(failing.handle, Telemetry(TelemetryConfig{Sink: sink, Logger: slog.New(logs)}))
	if _, err := hf(context.Background(), callWithID("c")); err == nil || !errors.Is(err, core.ErrGateway) {
		t.Errorf("err = %v, want the inner failure", err)
	}
	if sink.tries != 4 {
		t.Errorf("sink tried %d times, want 4", sink.tries)
	}
	if n := logs.Count(); n != 2 { // once per recorder
		t.Errorf("logged %d times for two recorders, want 2", n)
	}
}

func TestTelemetryRowStoresImagesAsDigests(t *testing.T) {
	t.Parallel()
	sink := &recordingSink{}
	h, _ := telemetryFixture(sink, &stubHandler{resp: answer()})
	data := []byte(strings.Repeat("pixels", 50))
	call := callWithID("c", core.UserParts(core.ImageBytesPart("image/jpeg", data)))
	if _, err := h(context.Background(), call); err != nil {
		t.Fatal(err)
	}
	r := sink.records()[0]
	if strings.Contains(r.Messages, "data:") || !strings.Contains(r.Messages, "sha256:") {
		t.Errorf("Messages = %s, want a digest instead of the image", r.Messages)
	}
}

// TestTelemetryRecordsTheQueueWait: the time the engine says a call waited
// in the admission queue (Call.QueueWait) is the row's queue_wait_ms, for
// an answered call and a failed one alike.
func TestTelemetryRecordsTheQueueWait(t *testing.T) {
	t.Parallel()
	for _, inner := range []*stubHandler{{resp: answer()}, {err: testkit.TransientErr("b_1")}} {
		sink := &recordingSink{}
		h := core.Chain(func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			call.QueueWait = 750 * time.Millisecond
			return inner.handle(ctx, call)
		}, Telemetry(TelemetryConfig{Sink: sink, Scope: testScope, Clock: backendtest.NewFakeClock(testkit.Epoch)}))
		_, _ = h(context.Background(), callWithID("q"))
		if recs := sink.records(); len(recs) != 1 || recs[0].QueueWaitMS != 750 {
			t.Errorf("records %+v, want one with QueueWaitMS 750", recs)
		}
	}
}
