package engine

import (
	"errors"
	"strings"
	"testing"
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
		sink := &recordSink{}
		g := newEchoGuard(sink, tt.prefix)
		var err error
		for _, d := range tt.deltas {
			if err = g.Delta(d, "t"); err != nil {
				break
			}
		}
		if err == nil {
			err = g.flush()
		}
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
