package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// continuationClient is a scope of a primary that cuts its stream after
// 40 of 60 tokens and a lower-tier vLLM source (which continues a prefill
// by default).
func continuationClient(t *testing.T, fallback *testkit.Continuer) *polygateway.GatewayClient {
	primary := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(40).WithTokens(60)))
	e := testenv.Base().Source("openai", 1, primary.URL()).Set("LLM__RETRY__TIER_PATIENCE_S", "0",
		"LLM__VLLM__1__BASE_URL", fallback.URL+"/v1", "LLM__VLLM__1__API_KEY", "none", "LLM__VLLM__1__MODEL", "local",
		"LLM__VLLM__1__TIMEOUT_S", "5", "LLM__VLLM__1__PRIORITY", "1")
	return e.Client(t)
}

func TestACutStreamContinuesSeamlesslyOnASourceThatContinuesAPrefill(t *testing.T) {
	t.Parallel()
	fallback := testkit.NewContinuer(t, 60, false)
	c := continuationClient(t, fallback)
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("tell me")})
	defer s.Close()
	var got strings.Builder
	for s.Next() {
		got.WriteString(s.Delta().Content)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream failed: %v", err)
	}
	if got.String() != fu.Tokens(60) {
		t.Fatalf("the caller received %q, want exactly the 60-token answer", got.String())
	}
	if resp := s.Response(); resp.Content != fu.Tokens(60) || resp.SourceName != "vllm_1" ||
		strings.Join(resp.Attempts, ",") != "openai_1,vllm_1" {
		t.Errorf("response %+v: want the whole answer, finished by the continuing source", resp)
	}
	reqs := fallback.Requests()
	if len(reqs) != 1 {
		t.Fatalf("the continuing source got %d requests, want 1", len(reqs))
	}
	msgs := reqs[0]["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	if last["role"] != "assistant" || last["content"] != fu.Tokens(40) || reqs[0]["add_generation_prompt"] != false {
		t.Errorf("continuation request ends with %v (add_generation_prompt %v), want the 40 delivered tokens as the prefill", last, reqs[0]["add_generation_prompt"])
	}
}

// A continuation that cannot go on — refused with a 400, or a source that
// takes the prefill and answers anew from the first word — ends the stream
// with the cut, never with the refusal, and the caller has the relayed
// words once and no answer.
func TestAContinuationRefusedOrAnsweredAnewEndsWithTheCut(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name            string
		refuse, restart bool
	}{{"refused with a 400", true, false}, {"answered anew", false, true}} {
		fallback := testkit.NewContinuer(t, 60, tt.refuse)
		fallback.Restart = tt.restart
		c := continuationClient(t, fallback)
		s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("tell me")})
		var got strings.Builder
		for s.Next() {
			got.WriteString(s.Delta().Content)
		}
		s.Close()
		var te *polygateway.TransientError
		var re *polygateway.RequestRejectedError
		if !asErr(s.Err(), &te) || asErr(s.Err(), &re) || te.Source != "openai_1" {
			t.Fatalf("%s: err = %v, want the cut of openai_1, never the refusal", tt.name, s.Err())
		}
		if s.Response() != nil || got.String() != fu.Tokens(40) {
			t.Errorf("%s: delivered %q (response %v): want the 40 tokens once and no answer", tt.name, got.String(), s.Response())
		}
		if n := len(fallback.Requests()); n != 1 {
			t.Errorf("%s: the continuing source got %d requests, want 1", tt.name, n)
		}
	}
}

func TestWithoutAContinuingSourceACutCommittedStreamEndsAsBefore(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(40).WithTokens(60)))
	other := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, primary.URL()).Source("qwen", 1, other.URL(), "PRIORITY", "1").Client(t)
	s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("tell me")})
	defer s.Close()
	for s.Next() {
	}
	if s.Err() == nil || other.Requests() != 0 {
		t.Fatalf("err %v, other source %d requests: want the cut, no failover", s.Err(), other.Requests())
	}
}

// With the quality guard on, a continuation is judged as the whole answer
// it completes, never as its tail alone: a cut just before the end leaves
// the continuing source a few words (or none) to add, and the answer is
// still the whole one.
func TestTheQualityGuardJudgesAContinuedAnswerWhole(t *testing.T) {
	t.Parallel()
	for _, cutAt := range []int{58, 60} {
		primary := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(cutAt).WithTokens(60)))
		fallback := testkit.NewContinuer(t, 60, false)
		c := testenv.Base().Source("openai", 1, primary.URL()).Set("LLM__RETRY__TIER_PATIENCE_S", "0",
			"LLM__QUALITY__GUARD", "true", "LLM__QUALITY__MIN_CHARS", "20",
			"LLM__VLLM__1__BASE_URL", fallback.URL+"/v1", "LLM__VLLM__1__API_KEY", "none", "LLM__VLLM__1__MODEL", "local",
			"LLM__VLLM__1__TIMEOUT_S", "5", "LLM__VLLM__1__PRIORITY", "1").Client(t)
		s := c.ChatStream(context.Background(), []polygateway.Message{polygateway.User("tell me")})
		var got strings.Builder
		for s.Next() {
			got.WriteString(s.Delta().Content)
		}
		s.Close()
		if err := s.Err(); err != nil {
			t.Fatalf("cut after %d tokens: the continued stream failed (%v), want the whole answer", cutAt, err)
		}
		if resp := s.Response(); got.String() != fu.Tokens(60) || resp.Content != fu.Tokens(60) || resp.SourceName != "vllm_1" {
			t.Errorf("cut after %d tokens: received %q, response %+v: want the whole answer, finished by vllm_1", cutAt, got.String(), resp)
		}
	}
}

// asErr is errors.As for the tests above.
func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
