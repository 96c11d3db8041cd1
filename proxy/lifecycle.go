package proxy

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrServerClosed is returned by Swap after Shutdown.
var ErrServerClosed = errors.New("proxy: server closed")

// acquire returns the current generation with a reference held, or nil
// when the server is shutting down.
func (s *Server) acquire() *generation {
	for {
		g := s.gen.Load()
		if g.acquire() {
			return g
		}
		if s.draining.Load() {
			return nil
		}
		// Retired by a concurrent Swap: the next Load sees its successor.
	}
}

// admit counts a request in, or refuses it when MaxInFlight requests are
// already being served; leave counts it out.
func (s *Server) admit() bool {
	n := s.calls.Add(1)
	if s.cfg.MaxInFlight > 0 && n > int64(s.cfg.MaxInFlight) {
		s.calls.Add(-1)
		return false
	}
	return true
}

func (s *Server) leave() { s.calls.Add(-1) }

// enter reads the request's deadline and its place in the queue (a bad
// header is a 400), pins the current generation of clients and admits the
// request under MaxInFlight, before its body is read. On refusal it has answered
// the client and returns a nil generation; otherwise the caller defers
// leave.
func (s *Server) enter(w http.ResponseWriter, r *http.Request, ri *reqInfo) (*generation, func()) {
	timeout, ae := s.requestTimeout(r)
	if ae != nil {
		leaveUnread(w, r)
		s.fail(w, ri, ae)
		return nil, nil
	}
	if ri.place, ae = s.place(r, ri); ae != nil {
		leaveUnread(w, r)
		s.fail(w, ri, ae)
		return nil, nil
	}
	ri.placed = true
	g := s.acquire()
	if g == nil {
		leaveUnread(w, r)
		s.fail(w, ri, mapError(errShuttingDown, false))
		return nil, nil
	}
	if !s.admit() {
		g.release()
		leaveUnread(w, r)
		ri.refused = RefusedInFlight
		s.fail(w, ri, overloaded)
		return nil, nil
	}
	ri.deadline = time.Now().Add(timeout)
	w.Header().Set(timeoutHeader, s.secondsText(timeout))
	return g, func() {
		s.leave()
		g.release()
	}
}

// overloaded is the answer beyond MaxInFlight.
var overloaded = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_overloaded",
	msg: "the gateway is serving its maximum number of requests; retry", retryAfter: time.Second}

// requestTimeout is the deadline of a request: the X-PolyGateway-Timeout
// header's seconds, at most RequestTimeout, or RequestTimeout without the
// header. A header that is not a number of seconds > 0 is a 400 naming it.
func (s *Server) requestTimeout(r *http.Request) (time.Duration, *apiError) {
	limit := s.cfg.RequestTimeout
	v := strings.TrimSpace(r.Header.Get(timeoutHeader))
	if v == "" {
		return limit, nil
	}
	secs, err := strconv.ParseFloat(v, 64)
	if err != nil || !(secs > 0) || math.IsInf(secs, 0) {
		return 0, invalidRequest(http.StatusBadRequest, timeoutHeader, "invalid_value",
			timeoutHeader+" "+strconv.Quote(v)+" is not a number of seconds > 0")
	}
	if secs >= limit.Seconds() {
		return limit, nil
	}
	return max(time.Duration(secs*float64(time.Second)), time.Millisecond), nil
}

// secondsText is d in seconds as X-PolyGateway-Timeout says it.
func (s *Server) secondsText(d time.Duration) string {
	if d == s.cfg.RequestTimeout {
		return s.defaultTimeout
	}
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
}

// callContext derives the context of a governed call: it ends when the
// client goes away, when the request's deadline (requestTimeout) passes or
// when a Shutdown runs out of time.
func (s *Server) callContext(r *http.Request) (context.Context, func()) {
	deadline := info(r).deadline
	if deadline.IsZero() {
		deadline = time.Now().Add(s.cfg.RequestTimeout)
	}
	ctx, cancel := context.WithDeadline(r.Context(), deadline)
	stop := context.AfterFunc(s.hard, cancel)
	return ctx, func() { stop(); cancel() }
}

// callError maps the error of a governed call, telling a client that went
// away and a forced shutdown apart from the call's own failure.
func (s *Server) callError(r *http.Request, err error) *apiError {
	if r.Context().Err() != nil {
		return s.callFailure(r, err, true)
	}
	if s.hard.Err() != nil && errors.Is(err, context.Canceled) {
		err = errShuttingDown
	}
	return s.callFailure(r, err, false)
}

// Swap replaces the routes and clients atomically (a SIGHUP reload). New
// requests use b at once; requests already running finish on the clients
// they started with, which are closed once the last of them is done
// (clients that b also holds stay open). An invalid b is an error and
// changes nothing.
func (s *Server) Swap(b Backends) error {
	if err := b.validate(); err != nil {
		return err
	}
	if err := s.checkBudgets(&b); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.shut {
		return ErrServerClosed
	}
	ng := newGeneration(b)
	s.hold(ng)
	old := s.gen.Swap(ng)
	s.retire(old)
	return nil
}

// hold counts g's clients as held by one more generation that has not
// drained; New and Swap call it for the generation they install.
func (s *Server) hold(g *generation) {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	for _, c := range g.clients() {
		if shareable(c) {
			s.held[c]++
		}
	}
}

// unhold counts g, drained, out of its clients' holders and returns those
// no generation holds any more: a client that a later generation kept is
// closed only once every generation that holds it has drained, whichever
// drains last.
func (s *Server) unhold(g *generation) []io.Closer {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	var out []io.Closer
	for _, c := range g.clients() {
		if !shareable(c) {
			out = append(out, c)
			continue
		}
		if s.held[c]--; s.held[c] == 0 {
			delete(s.held, c)
			out = append(out, c)
		}
	}
	return out
}

// retire retires g and, in the background once it has drained, closes its
// clients that no other generation holds. Called with s.mu held.
func (s *Server) retire(g *generation) {
	g.retire()
	s.retiring.Add(1)
	go func() {
		defer s.retiring.Done()
		<-g.drained
		for _, c := range s.unhold(g) {
			if err := c.Close(); err != nil {
				s.log.Warn("closing a replaced client failed", slog.String("error", err.Error()))
				s.closeMu.Lock()
				s.closeErr = append(s.closeErr, err)
				s.closeMu.Unlock()
			}
		}
	}()
}

// Shutdown stops admitting calls — from its first instant /readyz answers
// 503 and new chat and embeddings requests get 503 server_shutting_down
// with Retry-After — waits for the calls in flight, streams included, to
// finish, and closes every client. If ctx ends first, the remaining calls
// are cancelled (a committed stream ends with an error event, never with
// [DONE]) and Shutdown returns ctx's error once they have unwound. Keep the
// http.Server listening while it runs, so that a request arriving during
// the drain gets its 503 rather than a refused connection, and stop it
// (http.Server.Shutdown) once Shutdown has returned. Calling Shutdown again
// waits for the first one.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if !s.shut {
		s.shut = true
		s.draining.Store(true)
		s.retire(s.gen.Load())
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.retiring.Wait()
		close(done)
	}()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.hardCancel()
		<-done
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	return errors.Join(append([]error{err}, s.closeErr...)...)
}

// InFlight returns the number of API requests being served.
func (s *Server) InFlight() int { return s.gen.Load().inflight() }
