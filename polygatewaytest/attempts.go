package polygatewaytest

import (
	"net/http"
	"time"
)

// Attempt is one request as the server saw it, kept in the attempt log
// (Server.Attempts): every request to the server, whatever its path —
// chat completions, embeddings, the models list, unknown paths and
// WithHandler handlers.
type Attempt struct {
	// Seq is the 0-based order in which the server logged the request since
	// it started (ResetStats does not reset it). Requests that arrive
	// together may be logged in either order.
	Seq int
	// Time is when the server received the request.
	Time time.Time
	// Method and Path are the request's method and URL path, e.g. "POST"
	// and "/v1/chat/completions".
	Method, Path string
	// Model is the request body's "model", "" when it has none.
	Model string
	// Stream is the request body's "stream".
	Stream bool
	// Header is a copy of the request's header as received, Authorization
	// included.
	Header http.Header
	// Body holds the first MaxLoggedBody bytes of the request body.
	Body []byte
	// Truncated reports that Body is shorter than the request body.
	Truncated bool
	// Kind is what the behavior chosen for the request does; KindNone when
	// no Behavior answered it.
	Kind Kind
	// Status is the HTTP status code of the answer: the behavior's
	// (0 for Reset and Hang, which send none), 400, 404 or 405 for requests
	// the server refused itself, 200 for the models list, 0 for WithHandler
	// handlers.
	Status int
}

// logAttempt adds one request to the attempt log.
func (s *Server) logAttempt(r *http.Request, at time.Time, body []byte, model string, stream bool, k Kind, status int) {
	if len(s.log) == 0 {
		return
	}
	a := Attempt{
		Time:   at,
		Method: r.Method,
		Path:   r.URL.Path,
		Model:  model,
		Stream: stream,
		Header: r.Header.Clone(),
		Kind:   k,
		Status: status,
	}
	if len(body) > MaxLoggedBody {
		a.Body, a.Truncated = append([]byte(nil), body[:MaxLoggedBody]...), true
	} else {
		a.Body = body // never modified: the server shares request bodies read-only
	}
	s.mu.Lock()
	a.Seq = s.logSeq
	s.logSeq++
	s.log[s.logNext] = a
	s.logNext = (s.logNext + 1) % len(s.log)
	s.logLen = min(s.logLen+1, len(s.log))
	s.mu.Unlock()
}

// Attempts returns copies of the requests in the attempt log, oldest
// first: at most the last DefaultAttemptLog (see WithAttemptLog) since the
// server started or since the last ResetStats.
func (s *Server) Attempts() []Attempt {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Attempt, 0, s.logLen)
	k := len(s.log)
	for i := range s.logLen {
		a := s.log[(s.logNext-s.logLen+i+k)%k]
		a.Header = a.Header.Clone()
		a.Body = append([]byte(nil), a.Body...)
		out = append(out, a)
	}
	return out
}

// AttemptsFor returns the attempts of the log whose Model is model, oldest
// first.
func (s *Server) AttemptsFor(model string) []Attempt {
	all := s.Attempts()
	out := all[:0]
	for _, a := range all {
		if a.Model == model {
			out = append(out, a)
		}
	}
	return out
}
