package polygatewaytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	plainReq  = `{"model":"m-req","messages":[{"role":"user","content":"hi"}]}`
	streamReq = `{"model":"m-req","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	usageReq  = `{"model":"m-req","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]}`
)

// post sends body to the server's chat endpoint with its own client.
func post(t testing.TB, s *Server, body string) (*http.Response, error) {
	t.Helper()
	return postCtx(context.Background(), t, s, body)
}

func postCtx(ctx context.Context, t testing.TB, s *Server, body string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer sk-test")
	return s.Client().Do(req)
}

// mustPost posts and reads the whole body, failing on transport errors.
func mustPost(t testing.TB, s *Server, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := post(t, s, body)
	if err != nil {
		t.Fatalf("post: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, b
}

// completion is the non-streaming answer shape.
type completion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Role             string `json:"role"`
			Content          string `json:"content"`
			ReasoningContent string `json:"reasoning_content"`
			Reasoning        string `json:"reasoning"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage `json:"usage"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// chunk is the streaming event shape.
type chunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Delta struct {
			Role             string  `json:"role"`
			Content          *string `json:"content"`
			ReasoningContent string  `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *usage          `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// event is one SSE line of interest.
type event struct {
	comment bool
	data    string
	at      time.Time
}

// readSSE reads events until the body ends; err is the read error (nil on a
// clean end).
func readSSE(r io.Reader) ([]event, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var evs []event
	for {
		line, err := br.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		switch {
		case strings.HasPrefix(line, ":"):
			evs = append(evs, event{comment: true, data: line, at: time.Now()})
		case strings.HasPrefix(line, "data:"):
			evs = append(evs, event{data: strings.TrimSpace(line[5:]), at: time.Now()})
		}
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
	}
}

// streamResult summarises a stream.
type streamResult struct {
	content   strings.Builder
	thinking  string
	tokens    int
	finish    string
	usage     *usage
	done      bool
	malformed int
	errors    int
	comments  int
	model     string
	events    []event
	readErr   error
	tokenTime []time.Time
}

func parseStream(t testing.TB, resp *http.Response) *streamResult {
	t.Helper()
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q", ct)
	}
	evs, err := readSSE(resp.Body)
	res := &streamResult{events: evs, readErr: err}
	for _, e := range evs {
		if e.comment {
			res.comments++
			continue
		}
		if e.data == "[DONE]" {
			res.done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			res.malformed++
			continue
		}
		if len(c.Error) > 0 {
			res.errors++
			continue
		}
		res.model = c.Model
		if c.Usage != nil {
			res.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				res.content.WriteString(*ch.Delta.Content)
				res.tokens++
				res.tokenTime = append(res.tokenTime, e.at)
			}
			res.thinking += ch.Delta.ReasoningContent
			if ch.FinishReason != nil {
				res.finish = *ch.FinishReason
			}
		}
	}
	return res
}

func wantContent(n int) string {
	var b bytes.Buffer
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("tok")
		b.WriteString(strconv.Itoa(i))
	}
	return b.String()
}
