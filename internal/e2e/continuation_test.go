package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// continuer is a streaming upstream that continues a prefill: asked to
// continue the first k of n tokens (the request's trailing assistant
// message, with vLLM's continue_final_message), it streams the rest. With
// refuse it answers a continuation with 400, as servers that cannot
// continue do. With cuts > 0 its first cuts continuations end after
// cutAfter tokens, without a finish: cut as a dropped connection is. With
// restart it ignores the prefill and answers from the first token, as a
// server that does not continue but accepts the request does.
type continuer struct {
	*httptest.Server
	n        int
	refuse   bool
	restart  bool
	cuts     int
	cutAfter int

	mu     sync.Mutex
	bodies []map[string]any
}

func newContinuer(t *testing.T, n int, refuse bool) *continuer {
	c := &continuer{n: n, refuse: refuse}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *continuer) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	c.mu.Lock()
	c.bodies = append(c.bodies, body)
	c.mu.Unlock()
	msgs, _ := body["messages"].([]any)
	last, _ := msgs[len(msgs)-1].(map[string]any)
	from := 0
	if last["role"] == "assistant" && body["continue_final_message"] == true {
		if c.refuse {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"continuing a message is not supported","type":"invalid_request_error","code":"unsupported"}}`)
			return
		}
		prefix, _ := last["content"].(string)
		if !c.restart {
			from = len(strings.Fields(prefix))
		}
	}
	to := c.n
	c.mu.Lock()
	if last["role"] == "assistant" && c.cuts > 0 {
		c.cuts--
		to = min(c.n, from+c.cutAfter)
	}
	c.mu.Unlock()
	w.Header().Set("Content-Type", "text/event-stream")
	for i := from; i < to; i++ {
		tok := fmt.Sprintf("tok%d", i)
		if i > 0 {
			tok = " " + tok
		}
		b, _ := json.Marshal(tok)
		fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%s}}]}\n\n", b)
	}
	if to < c.n {
		return
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

func (c *continuer) requests() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.bodies...)
}

// continuationClient is a scope of a primary that cuts its stream after
// 40 of 60 tokens and a lower-tier vLLM source (which continues a prefill
// by default).
func continuationClient(t *testing.T, fallback *continuer) *polygateway.GatewayClient {
	primary := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(40).WithTokens(60)))
	e := testenv.Base().Source("openai", 1, primary.URL()).Set("LLM__RETRY__TIER_PATIENCE_S", "0",
		"LLM__VLLM__1__BASE_URL", fallback.URL+"/v1", "LLM__VLLM__1__API_KEY", "none", "LLM__VLLM__1__MODEL", "local",
		"LLM__VLLM__1__TIMEOUT_S", "5", "LLM__VLLM__1__PRIORITY", "1")
	return e.Client(t)
}

func TestACutStreamContinuesSeamlesslyOnASourceThatContinuesAPrefill(t *testing.T) {
	t.Parallel()
	fallback := newContinuer(t, 60, false)
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
	reqs := fallback.requests()
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
		fallback := newContinuer(t, 60, tt.refuse)
		fallback.restart = tt.restart
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
		if n := len(fallback.requests()); n != 1 {
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

// asErr is errors.As for the tests above.
func asErr[T error](err error, target *T) bool { return errors.As(err, target) }
