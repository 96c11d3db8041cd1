package polygateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
)

// streamedText is a round tripper that answers every chat completion with
// text streamed in chunks of the sizes split gives (cycling; a size byte s
// is s%17+1 bytes), each chunk's text encoded by encoding/json.
type streamedText struct {
	mu          sync.Mutex
	text, split []byte
}

func (s *streamedText) set(text string, split []byte) {
	s.mu.Lock()
	s.text, s.split = []byte(text), split
	s.mu.Unlock()
}

// pieces cuts the text as the stream sends it.
func (s *streamedText) pieces() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for rest, i := s.text, 0; len(rest) > 0; i++ {
		n := len(rest)
		if len(s.split) > 0 {
			n = min(n, int(s.split[i%len(s.split)])%17+1)
		}
		out = append(out, string(rest[:n]))
		rest = rest[n:]
	}
	return out
}

func (s *streamedText) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	var b bytes.Buffer
	for _, p := range s.pieces() {
		c, _ := json.Marshal(p)
		b.WriteString(`data: {"model":"m","choices":[{"index":0,"delta":{"content":` + string(c) + `}}]}` + "\n\n")
	}
	b.WriteString(`data: {"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(&b), Request: r,
		ProtoMajor: 1, ProtoMinor: 1}, nil
}

// FuzzStructuredRepair streams a fuzzed answer, in pieces of the sizes
// split gives, to a WithJSON call: the answer assembled is the text sent
// (as encoding/json reads each piece), and the call's outcome is the
// structured-output path's on that text — repaired JSON (valid JSON kept
// as it is), a document (object or array) opened by the text's first
// bracket, decoded by encoding/json — or a ResultInvalidError when there
// is none; never a panic.
func FuzzStructuredRepair(f *testing.F) {
	for _, s := range []string{
		"```json\n{\"score\": 7, \"reason\": 'fine',}\n```", `{"a":1}`, `[1,2`, "plain prose, no JSON", `"just a string"`, `{"a":"é\u2028"}`,
		"{'x': [1, 2,]}", "Sure! Here it is: {\"k\": true}", "", "{\"a\":\"\xff\"}", `{"nested":{"deep":[{"x":null}]}`,
	} {
		f.Add(s, []byte{3, 0, 250})
	}
	rt := &streamedText{}
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(testenv.Base().Set(
		"LLM__OPENAI__1__BASE_URL", "http://upstream.invalid/v1", "LLM__OPENAI__1__API_KEY", "k", "LLM__OPENAI__1__MODEL", "m",
		"LLM__OPENAI__1__TIMEOUT_S", "5", "PGW_STRUCTURED_MAX_RETRIES", "0")), polygateway.WithHTTPClient(&http.Client{Transport: rt}))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	f.Fuzz(func(t *testing.T, text string, split []byte) {
		rt.set(text, split)
		var sent strings.Builder
		for _, p := range rt.pieces() {
			var back string
			b, _ := json.Marshal(p)
			_ = json.Unmarshal(b, &back)
			sent.WriteString(back)
		}
		content := sent.String()
		resp, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("answer in JSON")}, polygateway.WithJSON(), polygateway.WithStream(true))
		var want any
		repaired, rerr := polygateway.RepairJSON(content)
		if rerr == nil {
			if !json.Valid([]byte(repaired)) {
				t.Fatalf("repair of %q is not JSON: %q", content, repaired)
			}
			if trimmed := strings.TrimSpace(content); json.Valid([]byte(trimmed)) && repaired != trimmed {
				t.Fatalf("valid JSON %q repaired to %q", trimmed, repaired)
			}
			if i := strings.IndexAny(content, "{["); i >= 0 && content[i] == repaired[0] {
				_ = json.Unmarshal([]byte(repaired), &want)
			}
		}
		var invalid *polygateway.ResultInvalidError
		switch {
		case want == nil:
			if err == nil || !errors.As(err, &invalid) {
				t.Fatalf("%q: (%+v, %v), want a ResultInvalidError", content, resp, err)
			}
		case err != nil:
			t.Fatalf("%q: %v, want %v", content, err, want)
		case resp.Content != content:
			t.Fatalf("assembled %q, sent %q", resp.Content, content)
		case !reflect.DeepEqual(resp.StructuredData, want):
			t.Fatalf("%q: data %#v, want %#v", content, resp.StructuredData, want)
		}
	})
}
