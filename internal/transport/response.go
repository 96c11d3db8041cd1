package transport

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/polygateway/polygateway/core"
)

// readJSON reads a non-streaming (application/json) answer.
//
// The body is bounded by Config.MaxBodyBytes. A body that is not a JSON
// object is a TransientError (a proxy's HTML page, a cut body); a body
// with a top-level "error" or a MiniMax base_resp.status_code ≠ 0 is
// classified like an error response although the status was 2xx; a body
// without a usable choice (no choices, or none with index 0) is a
// TransientError — never an empty success.
func (c *Client) readJSON(ctx, actx context.Context, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile, resp *http.Response, st *attemptState, start time.Time) (*core.LLMResponse, error) {
	var err error
	st.body, err = readBody(resp.Body, st.body, c.cfg.MaxBodyBytes, resp.ContentLength, &st.asm.mem)
	switch {
	case errors.Is(err, errBodyTooLarge):
		return nil, errMaker{src: src, status: resp.StatusCode, msg: "response body larger than " + formatBytes(c.cfg.MaxBodyBytes), err: err}.
			transient(core.ReasonNetworkError, 0)
	case errors.Is(err, errMemoryBudget):
		return nil, &memoryError{source: src.Name, held: st.asm.mem.reserved}
	case err != nil:
		return nil, c.ioFailure(ctx, actx, src, resp.StatusCode, err)
	}
	// A byte order mark is no part of the JSON text (RFC 8259 lets a
	// reader ignore one): skipped, as a stream's is.
	body := bytes.TrimPrefix(st.body, bom)
	st.dec.stream = false
	if !st.dec.decodeChunk(body, &st.chunk) {
		env := parseEnvelope(body)
		if env.json {
			// Valid JSON that is not an object of ours: treat as an error body.
			return nil, classifyResponse(src, prof, resp.StatusCode, resp.Header, env, c.cfg.MaxRetryAfter, time.Now())
		}
		msg := "malformed response body"
		if env.message != "" {
			msg += ": " + env.message
		}
		return nil, errMaker{src: src, status: resp.StatusCode, msg: msg}.transient(core.ReasonNetworkError, 0)
	}
	if st.chunk.isError() {
		return nil, classifyResponse(src, prof, resp.StatusCode, resp.Header, parseEnvelope(body), c.cfg.MaxRetryAfter, time.Now())
	}
	ch := st.chunk.picked()
	if ch == nil {
		return nil, errMaker{src: src, status: resp.StatusCode, msg: "response has no choices"}.transient(core.ReasonNetworkError, 0)
	}
	if !ch.answer() {
		// A choice without its message (or one that is not an object)
		// holds no answer: damaged, not empty.
		return nil, errMaker{src: src, status: resp.StatusCode, msg: "response choice has no message"}.transient(core.ReasonNetworkError, 0)
	}
	st.asm.reset(prof, true, src.Model, nil)
	token, err := st.asm.apply(&st.chunk)
	if err != nil {
		return nil, &memoryError{source: src.Name, held: st.asm.mem.reserved}
	}
	if token && call.Stream {
		// A stream was asked for but the server answered in one piece.
		st.clock.token()
	}
	st.asm.end()
	return c.result(src, call, st, start, false), nil
}

func formatBytes(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.FormatInt(n>>20, 10) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.FormatInt(n>>10, 10) + " KiB"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
