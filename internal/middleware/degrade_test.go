package middleware

import (
	"context"
	"errors"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// committedSink is a core.DeltaSink whose caller already has content and
// thinking: a stream committed before the call failed.
type committedSink struct{ content, thinking string }

func (s committedSink) Delta(string, string) error            { return nil }
func (s committedSink) Committed() bool                       { return s.content != "" || s.thinking != "" }
func (s committedSink) Reset()                                {}
func (s committedSink) Delivered() (content, thinking string) { return s.content, s.thinking }

// TestADegradedAnswerNeverStandsInForAStreamItCannotContinue: a stream cut
// after part of it reached the caller cannot be completed by a stale entry
// or a fallback answer that does not go on from what was delivered; the
// call ends with the error that cut it (its reason intact), and the
// telemetry row records that failure, not an answer the caller never got.
// An answer that does continue the delivered text still stands in.
func TestADegradedAnswerNeverStandsInForAStreamItCannotContinue(t *testing.T) {
	t.Parallel()
	cut := &core.TransientError{Source: "openai_1", Reason: core.ReasonStalled, Message: "stream stalled"}
	for _, tc := range []struct {
		name     string
		sink     committedSink
		stale    string // "" = no stale entry: the fallback answers
		answer   string
		standsIn bool
	}{
		{"fallback after a committed cut", committedSink{content: "The capital of"}, "", "canned", false},
		{"stale entry after a committed cut", committedSink{content: "The capital of"}, "Paris.", "", false},
		{"fallback after committed thinking", committedSink{thinking: "let me see"}, "", "canned", false},
		{"fallback that continues the delivered text", committedSink{content: "The capital of"}, "", "The capital of France is Paris.", true},
		{"nothing delivered", committedSink{}, "", "canned", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{}
			fb := func(context.Context, []core.Message, error) (*core.LLMResponse, error) {
				return &core.LLMResponse{Content: tc.answer, FinishReason: "stop"}, nil
			}
			h := Telemetry(TelemetryConfig{Sink: sink, Scope: testScope})(Degrade(DegradeConfig{Fallback: fb})(
				func(context.Context, *core.Call) (*core.LLMResponse, error) { return nil, cut }))
			call := &core.Call{ID: "c1", Scope: testScope, Messages: []core.Message{core.User("hi")}, Deltas: tc.sink}
			if tc.stale != "" {
				call.Stale = &core.LLMResponse{Content: tc.stale, FinishReason: "stop", CacheHit: true}
			}
			resp, err := h(context.Background(), call)
			rows := sink.records()
			if len(rows) != 1 {
				t.Fatalf("%d rows, want 1", len(rows))
			}
			if tc.standsIn {
				if err != nil || resp == nil || !resp.Degraded || rows[0].Degraded == "" {
					t.Fatalf("= (%+v, %v), row %+v: want the degraded answer", resp, err, rows[0])
				}
				return
			}
			var te *core.TransientError
			if resp != nil || !errors.As(err, &te) || te.Reason != core.ReasonStalled {
				t.Fatalf("= (%+v, %v), want the cut (reason stalled)", resp, err)
			}
			if rows[0].Degraded != "" || rows[0].Error == "" || rows[0].Response != "" {
				t.Errorf("row = %+v, want the failure the caller got", rows[0])
			}
		})
	}
}
