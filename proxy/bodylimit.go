package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
)

// leaveUnread is called before answering a request refused before its
// body was read. net/http would otherwise read — and discard — up to
// 256 KiB of the body after the handler, to keep the connection alive:
// instead the connection closes after the answer, and its read deadline is
// set in the past so that nothing more is read from it.
func leaveUnread(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close")
		_ = http.NewResponseController(w).SetReadDeadline(time.Now())
	}
}

// bodyBudget is the server-wide count of bytes held in memory for the
// calls being served (MaxBufferedBodyBytes): request bodies and upstream
// answers together. It is the core.MemoryBudget every call's context
// carries (see withBudget), from which the transport reserves what it
// buffers of an answer.
type bodyBudget struct {
	max  int64
	used atomic.Int64
}

var _ core.MemoryBudget = (*bodyBudget)(nil)

// Reserve takes n bytes, or reports false when they do not fit.
func (b *bodyBudget) Reserve(n int64) bool {
	for {
		u := b.used.Load()
		if u+n > b.max {
			return false
		}
		if b.used.CompareAndSwap(u, u+n) {
			return true
		}
	}
}

// Release gives back n bytes taken before.
func (b *bodyBudget) Release(n int64) { b.used.Add(-n) }

// withBudget returns ctx carrying the server's budget: the transport
// reserves from it what it buffers of the call's answers.
func (s *Server) withBudget(ctx context.Context) context.Context {
	return core.WithMemoryBudget(ctx, &s.bodies)
}

// bodyBusy is the answer when a body or an answer does not fit
// MaxBufferedBodyBytes.
var bodyBusy = &apiError{status: http.StatusServiceUnavailable, typ: "server_error", code: "server_overloaded",
	msg: "the gateway holds its maximum of buffered bytes; retry", retryAfter: time.Second}

// chunkedStep is the first buffer of a body without Content-Length; the
// buffer doubles from there, each step reserved before it is read into.
const chunkedStep = 16 << 10

// readBody reads a request body of at most MaxBodyBytes into memory
// reserved from the server's budget, and lifts the connection's read
// deadline afterwards, so that ReadTimeout bounds the upload but not the
// answer. A declared Content-Length is reserved (and allocated) whole
// before the first byte is read; a chunked body reserves each doubling of
// its buffer before reading into it. The bytes are decoded by encoding/json
// from this one buffer, which nothing refers to once decoded; the share
// stays reserved for the decoded request until the caller calls release,
// once the request's answer is complete. On error nothing stays reserved.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), _ *apiError) {
	limit := s.cfg.MaxBodyBytes
	tooLarge := invalidRequest(http.StatusRequestEntityTooLarge, "", "request_too_large",
		"request body larger than "+formatBytes(limit))
	if r.ContentLength > limit {
		info(r).refused = RefusedBodyLimit
		return nil, nil, tooLarge
	}
	var held int64
	release = func() { s.bodies.Release(held) }
	reserve := func(n int64) bool {
		if !s.bodies.Reserve(n) {
			return false
		}
		held += n
		return true
	}
	fail := func(e *apiError) ([]byte, func(), *apiError) {
		release()
		if e == bodyBusy {
			leaveUnread(w, r)
			info(r).refused = RefusedMemoryBudget
		}
		return nil, nil, e
	}
	var err error
	if n := r.ContentLength; n >= 0 {
		if !reserve(n) {
			return fail(bodyBusy)
		}
		body = make([]byte, n)
		_, err = io.ReadFull(r.Body, body)
	} else {
		mr := http.MaxBytesReader(w, r.Body, limit)
		for {
			if len(body) == cap(body) {
				c := min(max(2*int64(cap(body)), chunkedStep), limit+1) // +1: room to read the EOF of a body of exactly limit bytes
				if !reserve(c - int64(cap(body))) {
					return fail(bodyBusy)
				}
				grown := make([]byte, len(body), c)
				copy(grown, body)
				body = grown
			}
			var n int
			n, err = mr.Read(body[len(body):cap(body)])
			body = body[:len(body)+n]
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				break
			}
		}
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			info(r).refused = RefusedBodyLimit
			return fail(tooLarge)
		}
		return fail(invalidRequest(http.StatusBadRequest, "", "invalid_body", bodyReadFailure(err)))
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	return body, release, nil
}

// formatBytes renders a byte count for messages.
func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
