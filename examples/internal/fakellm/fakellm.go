// Package fakellm is a small OpenAI-compatible chat server on localhost for
// the how-to example programs under examples/: it answers
// POST …/chat/completions, streaming (SSE) and not, with an answer computed
// from the request, and can be told to fail the way real providers fail.
// It is a thin layer over the public test fake
// github.com/polygateway/polygateway/polygatewaytest, which does the HTTP;
// it exists so that the examples run offline and is not part of the
// library.
package fakellm

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway/polygatewaytest"
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
	srv *polygatewaytest.Server

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
	s.srv = polygatewaytest.New(polygatewaytest.WithFunc(s.behave))
	return s
}

// BaseURL is the value for a source's BASE_URL.
func (s *Server) BaseURL() string { return s.srv.URL() }

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Requests returns how many chat requests reached the server.
func (s *Server) Requests() int { return s.srv.Requests() }

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

// behave chooses the answer to one request: a failure, or the reply with
// usage counted in words.
func (s *Server) behave(info polygatewaytest.RequestInfo) polygatewaytest.Behavior {
	var body map[string]any
	_ = json.Unmarshal(info.Body, &body) // the fake answered a non-JSON body itself
	req := parse(body)

	s.mu.Lock()
	reply, model, latency := s.reply, s.model, s.latency
	status, code, message, header := s.status, s.code, s.message, s.header
	if s.match != nil && status == 0 && s.match(req) {
		status, code, message = s.when.Status, s.when.Code, s.when.Message
	}
	s.mu.Unlock()

	if status != 0 {
		return polygatewaytest.Status(status, errorBody(status, code, message), flatten(header)).WithLatency(latency)
	}
	answer := "ok"
	if reply != nil {
		answer = reply(req)
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(strings.Fields(m.Content))
	}
	b := polygatewaytest.OK().WithContent(answer).WithPromptTokens(prompt).WithModel(model).WithLatency(latency)
	if answer == "" {
		b = b.WithTokens(0)
	}
	return b
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

// errorBody is an OpenAI-style error envelope.
func errorBody(status int, code, message string) string {
	if message == "" {
		message = http.StatusText(status)
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": message, "type": "fake_error", "code": code,
	}})
	return string(b)
}

// flatten turns a header into the fake's map, joining repeated values.
func flatten(h http.Header) map[string]string {
	if len(h) == 0 {
		return nil
	}
	m := make(map[string]string, len(h))
	for k, vs := range h {
		m[k] = strings.Join(vs, ", ")
	}
	return m
}
