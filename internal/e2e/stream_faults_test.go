package e2e

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http/httptest"
	"strings"
	"testing"

	polygateway "github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// fullAnswer is what every upstream of these tests answers in whole.
const fullAnswer = "alpha beta gamma"

// chunkEvent is the payload of one content chunk as providers send it.
func chunkEvent(content string) string { return fu.ContentChunk(content) }

// rawStream serves one SSE stream of fullAnswer in which the event of the
// second word is replaced by broken (the stream goes on after it).
func rawStream(t *testing.T, broken string) *httptest.Server {
	t.Helper()
	words := strings.SplitAfter(fullAnswer, " ")
	return fu.NewRawStream(t, chunkEvent(words[0]), broken, chunkEvent(words[2]), fu.FinishChunk, "[DONE]")
}

// streamClient is a client whose primary is the raw stream at url and,
// with fallback, a healthy fallback tier answering fullAnswer.
func streamClient(t *testing.T, url string, fallback bool) *polygateway.GatewayClient {
	t.Helper()
	e := testenv.Base().Set(
		"LLM__RETRY__TIER_PATIENCE_S", "0", "LLM__RETRY__MAX_ATTEMPTS", "2",
		"LLM__OPENAI__1__BASE_URL", url, "LLM__OPENAI__1__API_KEY", "sk-test-openai",
		"LLM__OPENAI__1__MODEL", "openai-model", "LLM__OPENAI__1__TIMEOUT_S", "5")
	if fallback {
		e = e.Source("qwen", 1, fu.NewServer(t, fu.WithBehavior(fu.OK().WithContent(fullAnswer))).URL(), "PRIORITY", "1")
	} else {
		e = e.Set("LLM__RETRY__MAX_ATTEMPTS", "1")
	}
	return e.Client(t)
}

// outcomes runs Chat and ChatStream on c and returns each one's text, or
// its error.
func outcomes(t *testing.T, c *polygateway.GatewayClient) (chat string, chatErr error, stream string, streamErr error) {
	t.Helper()
	msgs := []polygateway.Message{polygateway.User("say it")}
	if resp, err := c.Chat(context.Background(), msgs); err != nil {
		chatErr = err
	} else {
		chat = resp.Content
	}
	s := c.ChatStream(context.Background(), msgs)
	defer s.Close()
	var b strings.Builder
	for s.Next() {
		b.WriteString(s.Delta().Content)
	}
	if streamErr = s.Err(); streamErr == nil {
		if got := s.Response().Content; got != b.String() {
			t.Errorf("ChatStream relayed %q but its Response says %q", b.String(), got)
		}
	}
	return chat, chatErr, b.String(), streamErr
}

// A token chunk cut at any byte is never a success with other text than
// the upstream's: alone it is an error, with a fallback it is the
// fallback's whole answer (Chat and ChatStream).
func TestATokenChunkCutAtAnyByteIsNeverASuccessWithOtherText(t *testing.T) {
	t.Parallel()
	ev := chunkEvent("beta ")
	for cut := 1; cut < len(ev); cut++ {
		srv := rawStream(t, ev[:cut])
		for _, fallback := range []bool{false, true} {
			chat, chatErr, stream, streamErr := outcomes(t, streamClient(t, srv.URL, fallback))
			if chatErr == nil && chat != fullAnswer {
				t.Fatalf("cut at %d (fallback %v): Chat succeeded with %q", cut, fallback, chat)
			}
			if streamErr == nil && stream != fullAnswer {
				t.Fatalf("cut at %d (fallback %v): ChatStream succeeded with %q", cut, fallback, stream)
			}
			if fallback && chatErr != nil {
				t.Fatalf("cut at %d: Chat with a fallback = %v, want the fallback's answer", cut, chatErr)
			}
			if !fallback && chatErr == nil {
				t.Fatalf("cut at %d: Chat without a fallback succeeded, want an error", cut)
			}
		}
	}
}

// An injected event that holds nothing of the answer — no JSON at all —
// is skipped and counted, and the whole answer is returned; a JSON value
// that is not a chunk is an error or the whole answer, never a short one.
func TestAGarbageEventBetweenTwoChunksIsSkippedOrFailsNeverShortens(t *testing.T) {
	t.Parallel()
	for _, garbage := range []string{"garbage", ": not json", "42", `"text"`, "[1,2]", "null", `{"unexpected":true}`, `{"choices":[]}`} {
		srv := rawStream(t, garbage)
		c := streamClient(t, srv.URL, false)
		resp, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("say it")})
		if err == nil && resp.Content != "alpha gamma" && resp.Content != fullAnswer {
			t.Fatalf("garbage %q: Chat = %q", garbage, resp.Content)
		}
		if !strings.ContainsAny(garbage, "{") && (err != nil || resp.SkippedEvents < 1) {
			t.Fatalf("garbage %q: Chat = (%+v, %v), want the answer with a skipped event", garbage, resp, err)
		}
	}
}

// says is the answer a stream with broken as its second event says, when
// broken still parses as a chunk (damage that leaves valid JSON is taken
// at its word: its bytes are then what the upstream sent); "" otherwise.
func says(broken string) string {
	var c struct {
		Choices []struct {
			Index int
			Delta struct{ Content string }
		}
	}
	if json.Unmarshal([]byte(broken), &c) != nil {
		return ""
	}
	text := ""
	for _, ch := range c.Choices {
		if ch.Index == 0 {
			text += ch.Delta.Content
		}
	}
	return "alpha " + text + "gamma"
}

// The property over random damage to the second chunk: the text is the
// upstream's exactly, or the call is an error.
func TestRandomDamageToAStreamNeverReturnsOtherText(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(21, 1))
	ev := chunkEvent("beta ")
	for range 40 {
		b := []byte(ev)
		switch r.IntN(3) {
		case 0: // cut
			b = b[:r.IntN(len(b))]
		case 1: // a byte replaced
			b[r.IntN(len(b))] = byte(r.IntN(256))
		case 2: // a span dropped
			i := r.IntN(len(b))
			j := i + r.IntN(len(b)-i)
			b = append(b[:i:i], b[j:]...)
		}
		broken := strings.NewReplacer("\n", "", "\r", "").Replace(string(b))
		srv := rawStream(t, broken)
		_, _, stream, err := outcomes(t, streamClient(t, srv.URL, true))
		if err == nil && stream != fullAnswer && stream != says(broken) {
			t.Fatalf("damaged event %q: ChatStream succeeded with %q", broken, stream)
		}
	}
}
