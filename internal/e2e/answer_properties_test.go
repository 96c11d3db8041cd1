package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// The properties of this file hold the invariants of
// docs/explanation-faults.md for what an upstream's answer is: a
// non-stream body, the end of a stream, and the continuation of a cut
// stream. Each runs seeded random faults through FromEnv and Chat or
// ChatStream: a success is always the upstream's whole answer.

// wholeBody is the non-stream completion every primary of these tests
// means to send: fullAnswer, with usage.
const wholeBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"alpha beta gamma"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`

// bodySays is what a body says as a completion, decided by encoding/json
// (keys matched exactly: the decoded maps are walked), and whether it is
// one: a JSON object whose choices hold one of index 0 (or of no index)
// with a message. A body that is not, is no answer.
func bodySays(body []byte) (string, bool) {
	var v map[string]any
	if json.Unmarshal(body, &v) != nil {
		return "", false
	}
	choices, _ := v["choices"].([]any)
	for _, c := range choices {
		choice, ok := c.(map[string]any)
		if !ok {
			continue
		}
		if idx, ok := choice["index"].(float64); ok && idx != 0 {
			continue
		}
		msg, ok := choice["message"].(map[string]any)
		if !ok {
			continue
		}
		content, _ := msg["content"].(string)
		return content, true
	}
	return "", false
}

// wellFormed are bodies that are valid JSON but hold no whole answer, or
// a different one: what a damaged or confused upstream also sends.
var wellFormed = []string{
	`{}`, `[]`, `null`, `"alpha beta gamma"`, `{"choices":[]}`, `{"choices":null}`, `{"id":"chatcmpl-1"}`,
	`{"choices":[{"index":1,"message":{"role":"assistant","content":"alpha"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"delta":{"content":"alpha beta"},"finish_reason":"stop"}]}`,
	`{"choices":[{"index":0,"message":{"role":"assistant","content":"alpha"},"finish_reason":"length"}]}`,
	`{"choices":[{"index":0,"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}`,
	`{"error":{"message":"overloaded","type":"server_error"}}`,
	`{"object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"alpha beta gamma"}}]}`,
}

// damage applies one random fault to b and names it.
func damage(r *rand.Rand, b []byte) ([]byte, string) {
	b = bytes.Clone(b)
	switch r.IntN(6) {
	case 5:
		w := wellFormed[r.IntN(len(wellFormed))]
		return []byte(w), "replaced by " + w
	case 0:
		n := r.IntN(len(b))
		return b[:n], fmt.Sprintf("cut at %d", n)
	case 1:
		i, c := r.IntN(len(b)), byte(r.IntN(256))
		b[i] = c
		return b, fmt.Sprintf("byte %d set to %#x", i, c)
	case 2:
		i := r.IntN(len(b))
		j := i + r.IntN(len(b)-i)
		return append(b[:i:i], b[j:]...), fmt.Sprintf("bytes %d to %d dropped", i, j)
	case 3:
		i := r.IntN(len(b))
		j := i + r.IntN(len(b)-i)
		return append(b[:j:j], b[i:]...), fmt.Sprintf("bytes %d to %d repeated", i, j)
	default:
		return b, "none"
	}
}

// rawServer serves body to every request with the content type and, when
// declared is positive, that Content-Length (a body shorter than it
// declares ends early, as a dropped connection does).
func rawServer(t *testing.T, contentType string, body []byte, declared int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		if declared > 0 {
			w.Header().Set("Content-Length", strconv.Itoa(declared))
		}
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Through FromEnv and Chat without a stream, a randomly damaged
// completion body — cut, a byte changed, a span dropped or repeated,
// declared longer than it is, sent under another content type — is
// accepted only for what it says as a whole completion (encoding/json
// decides), and is otherwise a fault of the attempt: the fallback's whole
// answer, or an error without one. Never a shorter answer.
func TestPropertyANonStreamBodyIsWholeOrAnError(t *testing.T) {
	t.Parallel()
	for seed := range uint64(120) {
		r := rand.New(rand.NewPCG(seed, 2102))
		body, fault := damage(r, []byte(wholeBody))
		declared := 0
		if r.IntN(4) == 0 {
			declared = len(wholeBody)
			fault += ", declared " + strconv.Itoa(declared) + " bytes"
		}
		ct := []string{"application/json", "application/json; charset=utf-8", "text/plain", ""}[r.IntN(4)]
		fallback := r.IntN(2) == 0
		name := fmt.Sprintf("seed %d: %s, content type %q, fallback %v", seed, fault, ct, fallback)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			srv := rawServer(t, ct, body, declared)
			c := streamClient(t, srv.URL, fallback)
			resp, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("say it")}, polygateway.WithStream(false))
			said, whole := bodySays(body)
			if declared > len(body) {
				whole = false // the body ended before its length: it was cut
			}
			switch {
			case err != nil && fallback:
				t.Fatalf("%s: %v, want the fallback's answer at least", name, err)
			case err != nil:
				// An honest error.
			case resp.SourceName == "openai_1" && (!whole || resp.Content != said):
				t.Fatalf("%s: the primary's body %q was accepted as %q", name, body, resp.Content)
			case resp.SourceName != "openai_1" && resp.Content != fullAnswer:
				t.Fatalf("%s: %s answered %q", name, resp.SourceName, resp.Content)
			}
			if err == nil && !fallback && whole != (resp.SourceName == "openai_1") {
				t.Fatalf("%s: a whole completion %q was refused", name, body)
			}
		})
	}
}

// usageEvent follows the finish of every stream of these tests.
const usageEvent = `{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`

// Through FromEnv, Chat and ChatStream, a stream of fullAnswer cut at any
// byte — inside an event, between events, inside the finish, the usage
// chunk or [DONE] — is a success only once its finish has arrived, and
// then with the whole answer; before it, the call is an error (without a
// fallback) or the fallback's whole answer.
func TestPropertyAStreamCutAnywhereIsWholeOrAnError(t *testing.T) {
	t.Parallel()
	var whole strings.Builder
	for _, w := range strings.SplitAfter(fullAnswer, " ") {
		fmt.Fprintf(&whole, "data: %s\n\n", chunkEvent(w))
	}
	fmt.Fprintf(&whole, "data: %s\n\n", fu.FinishChunk)
	finished := whole.Len() - 2 // the finish event's JSON has all arrived
	fmt.Fprintf(&whole, "data: %s\n\ndata: [DONE]\n\n", usageEvent)
	raw := whole.String()
	for cut := range len(raw) + 1 {
		for _, fallback := range []bool{false, true} {
			name := fmt.Sprintf("cut at %d of %d (%q), fallback %v", cut, len(raw), raw[max(0, cut-12):cut], fallback)
			srv := rawServer(t, "text/event-stream", []byte(raw[:cut]), 0)
			c := streamClient(t, srv.URL, fallback)
			chat, chatErr, stream, streamErr := outcomes(t, c)
			for _, o := range []struct {
				api  string
				text string
				err  error
			}{{"Chat", chat, chatErr}, {"ChatStream", stream, streamErr}} {
				switch {
				case o.err == nil && o.text != fullAnswer:
					t.Fatalf("%s: %s succeeded with %q", name, o.api, o.text)
				case o.err == nil && !fallback && cut < finished:
					t.Fatalf("%s: %s succeeded before the finish had arrived", name, o.api)
				case o.err != nil && fallback && o.api == "Chat":
					t.Fatalf("%s: Chat = %v, want the fallback's answer", name, o.err)
				}
			}
			srv.Close()
		}
	}
}

// Through FromEnv and ChatStream, a primary cut after a random number of
// the tokens of its answer, a fallback that continues the relayed prefix
// (or refuses to, answers anew from the first word, or is itself cut in
// its first continuations): the
// caller receives a prefix of the upstream's answer, never a word twice or
// out of order, and the call succeeds only with the whole answer; an
// error leaves no Response. Chat, which commits nothing to its caller,
// returns the whole answer or an error the same way.
func TestPropertyAContinuationIsSeamlessOrAnError(t *testing.T) {
	t.Parallel()
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 2103))
		n := 5 + r.IntN(40)
		cutAt := 1 + r.IntN(n-1)
		refuse := r.IntN(4) == 0
		restart := r.IntN(5) == 0
		cuts, cutAfter := r.IntN(3), r.IntN(n-cutAt)
		attempts := 1 + r.IntN(3)
		name := fmt.Sprintf("seed %d: %d tokens cut after %d, refuse %v, answer anew %v, %d continuations cut after %d tokens, MAX_ATTEMPTS %d",
			seed, n, cutAt, refuse, restart, cuts, cutAfter, attempts)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			fallback := testkit.NewContinuer(t, n, refuse)
			fallback.Cuts, fallback.CutAfter, fallback.Restart = cuts, cutAfter, restart
			primary := fu.NewServer(t, fu.WithBehavior(fu.CutAfter(cutAt).WithTokens(n)))
			c := testenv.Base().Source("openai", 1, primary.URL()).Set("LLM__RETRY__TIER_PATIENCE_S", "0",
				"LLM__RETRY__MAX_ATTEMPTS", strconv.Itoa(attempts),
				"LLM__VLLM__1__BASE_URL", fallback.URL+"/v1", "LLM__VLLM__1__API_KEY", "none", "LLM__VLLM__1__MODEL", "local",
				"LLM__VLLM__1__TIMEOUT_S", "5", "LLM__VLLM__1__PRIORITY", "1").Client(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s := c.ChatStream(ctx, []polygateway.Message{polygateway.User("tell me")})
			var got strings.Builder
			for s.Next() {
				got.WriteString(s.Delta().Content)
				if !strings.HasPrefix(fu.Tokens(n), got.String()) {
					s.Close()
					t.Fatalf("%s: the caller received %q, not a prefix of the answer", name, got.String())
				}
			}
			s.Close()
			if err := s.Err(); err != nil {
				if !refuse && !restart && cuts == 0 && attempts > 1 {
					t.Fatalf("%s: the stream failed (%v) though the fallback continues it whole", name, err)
				}
				if s.Response() != nil {
					t.Fatalf("%s: the stream failed (%v) but has a Response", name, err)
				}
			} else if got.String() != fu.Tokens(n) || s.Response().Content != fu.Tokens(n) {
				t.Fatalf("%s: the stream succeeded with %q (Response %q)", name, got.String(), s.Response().Content)
			}
			resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User("tell me")})
			if err == nil && resp.Content != fu.Tokens(n) {
				t.Fatalf("%s: Chat succeeded with %q", name, resp.Content)
			}
		})
	}
}
