package engine

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// recordSink is a DeltaSink that records what it is given.
type recordSink struct{ content, thinking strings.Builder }

func (s *recordSink) Delta(content, thinking string) error {
	s.content.WriteString(content)
	s.thinking.WriteString(thinking)
	return nil
}
func (s *recordSink) Committed() bool { return true }
func (s *recordSink) Reset()          {}
func (s *recordSink) Delivered() (string, string) {
	return s.content.String(), s.thinking.String()
}

func TestEchoGuardRelaysAContinuationAndStopsAnAnswerAnew(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 20) // 100 bytes: the probe is its first 64
	for _, tt := range []struct {
		name, prefix string
		deltas       []string
		relayed      string
		echo         bool
	}{
		{"a continuation", "alpha beta", []string{" gamma", " delta"}, " gamma delta", false},
		{"a continuation shorter than the prefix", "alpha beta", []string{" g"}, " g", false},
		{"an answer anew", "alpha beta", []string{"alpha", " beta", " gamma"}, "", true},
		{"an answer anew in one delta", "alpha beta", []string{"alpha beta gamma"}, "", true},
		{"a long prefix, probed by its start", long, []string{long[:30], long[30:70]}, "", true},
		{"a long prefix, continued", long, []string{"x", long[:80]}, "x" + long[:80], false},
		{"nothing relayed before", "", []string{"alpha"}, "alpha", false},
		{"a short prefix repeated whole", "ha", []string{"ha", "!"}, "", true},
	} {
		sink, err := guardDeltas(tt.prefix, tt.deltas, "t")
		if got := errors.Is(err, errAnsweredAnew); got != tt.echo || err != nil && !got {
			t.Errorf("%s: err = %v, want echo %v", tt.name, err, tt.echo)
		}
		if got := sink.content.String(); got != tt.relayed {
			t.Errorf("%s: relayed %q, want %q", tt.name, got, tt.relayed)
		}
		if sink.thinking.Len() == 0 {
			t.Errorf("%s: thinking was held back", tt.name)
		}
	}
}

// guardDeltas passes deltas (each with thinking) through an echo guard of
// prefix until one fails, then ends the answer, and returns what reached
// the caller and the guard's error.
func guardDeltas(prefix string, deltas []string, thinking string) (*recordSink, error) {
	sink := &recordSink{}
	g := newEchoGuard(sink, prefix)
	for _, d := range deltas {
		if err := g.Delta(d, thinking); err != nil {
			return sink, err
		}
	}
	return sink, g.flush()
}

// TestAnAnswerAnewThatEndsInsideTheProbeIsAnEcho: a source that answers
// anew with a whole answer shorter than the probe, every byte of which
// repeats the start of the relayed text ("The answer is 42." after "The
// answer is 42. " was relayed and cut), would send the caller those words
// a second time: it is an echo too, never relayed when the answer ends.
func TestAnAnswerAnewThatEndsInsideTheProbeIsAnEcho(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, prefix string
		deltas       []string
		relayed      string
		echo         bool
	}{
		{"the relayed words again, shorter", "The answer is 42. ", []string{"The answer", " is 42."}, "", true},
		{"the start of a long prefix, then the end", strings.Repeat("word ", 20), []string{"word word"}, "", true},
		{"a short continuation of other words", "The answer is 42. ", []string{"Done."}, "Done.", false},
		{"an empty continuation", "The answer is 42. ", nil, "", false},
	} {
		sink, err := guardDeltas(tt.prefix, tt.deltas, "")
		if got := errors.Is(err, errAnsweredAnew); got != tt.echo || err != nil && !got {
			t.Errorf("%s: err = %v, want echo %v", tt.name, err, tt.echo)
		}
		if got := sink.content.String(); got != tt.relayed {
			t.Errorf("%s: relayed %q, want %q", tt.name, got, tt.relayed)
		}
	}
}

// TestAShortAnswerAnewOnAContinuingSourceEndsWithTheCut: the primary's
// stream is cut after "The answer is 42. " reached the caller; the
// continuing source ignores the prefill and answers "The answer is 42."
// anew, all of it inside the probe. The call ends with the cut, the caller
// has the relayed words once, and the continuing source — which answered —
// is not charged a failure.
func TestAShortAnswerAnewOnAContinuingSourceEndsWithTheCut(t *testing.T) {
	t.Parallel()
	cut := &core.TransientError{Source: "a", Reason: core.ReasonNetworkError, Message: "stream cut"}
	b := src("b", 1)
	b.Continue = core.ContinuePrefill
	set := testSettings(src("a", 0), b)
	f := newFixture(t, set, func(cfg *Config) {
		cfg.Upstream = upstreamFunc(func(_ context.Context, s *core.SourceConfig, call *core.Call) (*core.LLMResponse, error) {
			if s.Name == "a" {
				_ = call.Deltas.Delta("The answer is 42. ", "")
				return nil, cut
			}
			if err := call.Deltas.Delta("The answer is 42.", ""); err != nil {
				return nil, err
			}
			return &core.LLMResponse{Content: "The answer is 42.", FinishReason: "stop"}, nil
		})
	})
	sink := &recordSink{}
	call := newCall()
	call.Deltas = sink
	resp, err := f.g.Handle(context.Background(), call)
	if resp != nil || !errors.Is(err, cut) {
		t.Fatalf("= (%+v, %v), want the cut", resp, err)
	}
	if got := sink.content.String(); got != "The answer is 42. " {
		t.Errorf("the caller has %q, want the relayed words once", got)
	}
	if s := f.snapshot(t, "b"); s.ConsecutiveFailures != 0 {
		t.Errorf("the continuing source's breaker = %+v, want no failure", s)
	}
}
