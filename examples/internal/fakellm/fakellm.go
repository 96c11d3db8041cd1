// Package fakellm is a small OpenAI-compatible chat server on localhost for
// the how-to example programs under examples/: it answers
// POST …/chat/completions, streaming (SSE) and not, and can be told to fail
// the way real providers fail. It exists so that the examples run offline;
// it is not part of the library.
package fakellm

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Request is what the server read from one chat request.
type Request struct {
	Model    string
	Messages []Message
	Stream   bool
	// Params holds every other top-level field of the body.
	Params map[string]any
}

// Message is one message of a request (text content only; content arrays
// are flattened to their text parts).
type Message struct {
	Role, Content string
}

// LastUser returns the content of the last user message.
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// Server is a fake provider. Its zero configuration answers every request
// with "ok" after no delay.
type Server struct {
	srv      *httptest.Server
	requests atomic.Int64

	mu      sync.Mutex
	reply   func(Request) string
	model   string
	latency time.Duration
	status  int
	code    string
	message string
	header  http.Header
	match   func(Request) bool
	when    Failure
}

// Failure is an error answer: an HTTP status and an OpenAI-style error body.
type Failure struct {
	Status        int
	Code, Message string
}

// New starts a server that answers with reply (nil: "ok").
func New(reply func(Request) string) *Server {
	s := &Server{reply: reply}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// BaseURL is the value for a source's BASE_URL.
func (s *Server) BaseURL() string { return s.srv.URL + "/v1" }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests returns how many chat requests reached the server.
func (s *Server) Requests() int { return int(s.requests.Load()) }

// SetModel sets the model name the answers report (default: the request's).
func (s *Server) SetModel(model string) { s.mu.Lock(); s.model = model; s.mu.Unlock() }

// SetLatency delays every answer by d.
func (s *Server) SetLatency(d time.Duration) { s.mu.Lock(); s.latency = d; s.mu.Unlock() }

// SetReply replaces the answer function.
func (s *Server) SetReply(reply func(Request) string) { s.mu.Lock(); s.reply = reply; s.mu.Unlock() }

// Fail makes every following request fail with status and an OpenAI-style
// error body carrying code and message; header values are added to the
// answer (e.g. Retry-After).
func (s *Server) Fail(status int, code, message string, header http.Header) {
	s.mu.Lock()
	s.status, s.code, s.message, s.header = status, code, message, header
	s.mu.Unlock()
}

// Recover makes the server answer normally again.
func (s *Server) Recover() { s.Fail(0, "", "", nil) }

// FailWhen makes the requests for which match returns true fail with f.
func (s *Server) FailWhen(match func(Request) bool, f Failure) {
	s.mu.Lock()
	s.match, s.when = match, f
	s.mu.Unlock()
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		http.NotFound(w, r)
		return
	}
	s.requests.Add(1)
	var body map[string]any
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "the body is not JSON", nil)
		return
	}
	req := parse(body)

	s.mu.Lock()
	reply, model, latency := s.reply, s.model, s.latency
	status, code, message, header := s.status, s.code, s.message, s.header
	if s.match != nil && status == 0 && s.match(req) {
		status, code, message = s.when.Status, s.when.Code, s.when.Message
	}
	s.mu.Unlock()

	if latency > 0 {
		select {
		case <-time.After(latency):
		case <-r.Context().Done():
			return
		}
	}
	if status != 0 {
		writeError(w, status, code, message, header)
		return
	}
	answer := "ok"
	if reply != nil {
		answer = reply(req)
	}
	if model == "" {
		model = req.Model
	}
	prompt, completion := 0, len(strings.Fields(answer))
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	usage := map[string]int{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion", "model": model,
			"choices": []any{map[string]any{
				"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answer},
			}},
			"usage": usage,
		})
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	event := func(v any) {
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	for i, word := range strings.SplitAfter(answer, " ") {
		delta := map[string]any{"content": word}
		if i == 0 {
			delta["role"] = "assistant"
		}
		event(chunk(delta, nil))
	}
	event(chunk(map[string]any{}, "stop"))
	event(map[string]any{"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": model, "choices": []any{}, "usage": usage})
	fmt.Fprint(w, "data: [DONE]\n\n")
}

func parse(body map[string]any) Request {
	req := Request{Params: map[string]any{}}
	for k, v := range body {
		switch k {
		case "model":
			req.Model, _ = v.(string)
		case "stream":
			req.Stream, _ = v.(bool)
		case "messages":
			list, _ := v.([]any)
			for _, item := range list {
				m, _ := item.(map[string]any)
				msg := Message{}
				msg.Role, _ = m["role"].(string)
				switch c := m["content"].(type) {
				case string:
					msg.Content = c
				case []any:
					var parts []string
					for _, p := range c {
						if pm, ok := p.(map[string]any); ok {
							if t, ok := pm["text"].(string); ok {
								parts = append(parts, t)
							}
						}
					}
					msg.Content = strings.Join(parts, " ")
				}
				req.Messages = append(req.Messages, msg)
			}
		default:
			req.Params[k] = v
		}
	}
	return req
}

func writeError(w http.ResponseWriter, status int, code, message string, header http.Header) {
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if message == "" {
		message = http.StatusText(status)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": message, "type": "fake_error", "code": code,
	}})
}
