package testkit

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Continuer is a streaming OpenAI-compatible upstream that continues a
// prefill: it answers "tok0 tok1 … tok<N-1>" and, asked to continue the
// first k of them (the request's trailing assistant message, with vLLM's
// continue_final_message), it streams the rest. With Refuse it answers a
// continuation with 400, as servers that cannot continue do. With Cuts > 0
// its first Cuts continuations end after CutAfter tokens, without a
// finish: cut as a dropped connection is. With Restart it ignores the
// prefill and answers from the first token, as a server that does not
// continue but accepts the request does. It keeps the bodies of the
// requests it serves.
type Continuer struct {
	*httptest.Server

	// N is the number of tokens of the whole answer.
	N int
	// Refuse answers a continuation with 400.
	Refuse bool
	// Restart ignores the prefill and answers from the first token.
	Restart bool
	// Cuts is the number of continuations still to be cut.
	Cuts int
	// CutAfter is the number of tokens a cut continuation streams.
	CutAfter int

	mu     sync.Mutex
	bodies []map[string]any
}

// NewContinuer starts a Continuer of n tokens (refusing continuations
// with refuse), closed when the test ends. Set its other fields before the
// first request.
func NewContinuer(t testing.TB, n int, refuse bool) *Continuer {
	c := &Continuer{N: n, Refuse: refuse}
	c.Server = httptest.NewServer(http.HandlerFunc(c.serve))
	t.Cleanup(c.Close)
	return c
}

func (c *Continuer) serve(w http.ResponseWriter, r *http.Request) {
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
		if c.Refuse {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":{"message":"continuing a message is not supported","type":"invalid_request_error","code":"unsupported"}}`)
			return
		}
		prefix, _ := last["content"].(string)
		if !c.Restart {
			from = len(strings.Fields(prefix))
		}
	}
	to := c.N
	c.mu.Lock()
	if last["role"] == "assistant" && c.Cuts > 0 {
		c.Cuts--
		to = min(c.N, from+c.CutAfter)
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
	if to < c.N {
		return
	}
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

// Requests returns the bodies of the requests served so far, decoded.
func (c *Continuer) Requests() []map[string]any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]any(nil), c.bodies...)
}
