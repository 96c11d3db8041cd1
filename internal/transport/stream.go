package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

// readStream reads an SSE answer. The rules (DIALECTS.md):
//
//   - every event is checked for a top-level "error" (or "type":"error",
//     "object":"error", MiniMax base_resp, "event: error") before anything
//     else: such an event fails the attempt even when [DONE] follows;
//   - an event that does not parse as a chunk is passed over only when
//     skippable proves it held nothing of the answer (at most
//     maxSkippedEvents per stream); any other is a TransientError, never a
//     partial success — except an unterminated last event before any
//     finish_reason, which counts as a cut stream;
//   - "data: [DONE]" ends the stream;
//   - the stream ending without [DONE] after a finish_reason is complete;
//   - with neither, src.MissingDone decides: "salvage" returns what was
//     received (at least one token) as a success with an empty
//     FinishReason; anything else ("retry", the default) is a
//     TransientError (cut stream).
//
// Usage is the last complete usage object seen anywhere (see assembler).
func (c *Client) readStream(ctx, actx context.Context, src *core.SourceConfig, call *core.Call, prof *core.ProviderProfile, resp *http.Response, st *attemptState, start time.Time) (*core.LLMResponse, error) {
	st.capr = capReader{r: resp.Body, n: c.cfg.MaxStreamBytes}
	st.sse.Reset(&st.capr, c.cfg.MaxEventBytes)
	st.out.reset(call.Deltas)
	out := &st.out
	st.dec.stream = true
	st.asm.reset(prof, false, src.Model, out.keeper)
	mk := errMaker{src: src, status: resp.StatusCode}
	done, cut := false, false
	for !done && !cut {
		if out.unflushed && !st.sse.Buffered() {
			// Every delta read so far went to the sink; the next event
			// needs the network: let the sink push them out now.
			if ferr := out.flush(); ferr != nil {
				return nil, c.consumerFailed(ctx, mk, ferr)
			}
		}
		ev, err := st.sse.Next()
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			cut = true
			continue
		case errors.Is(err, io.ErrUnexpectedEOF) && actx.Err() == nil:
			// The body ended abruptly (e.g. a chunked stream closed early).
			cut = true
			continue
		case errors.Is(err, ErrEventTooLarge):
			mk.msg = "sse event larger than " + formatBytes(int64(c.cfg.MaxEventBytes))
			return nil, mk.transient(core.ReasonNetworkError, 0)
		case errors.Is(err, errStreamTooLarge):
			mk.msg = "stream larger than " + formatBytes(c.cfg.MaxStreamBytes)
			return nil, mk.transient(core.ReasonNetworkError, 0)
		default:
			if st.asm.finish != "" && ctx.Err() == nil && actx.Err() != nil {
				// The answer was complete (finish_reason seen) and only the
				// end of the stream never came: finished, not failed.
				cut = true
				continue
			}
			return nil, c.ioFailure(ctx, actx, src, resp.StatusCode, err)
		}
		var ferr error
		done, cut, ferr = c.streamEvent(ev, src, prof, resp, st, out)
		if ferr != nil {
			var ce consumerError
			if errors.As(ferr, &ce) {
				return nil, c.consumerFailed(ctx, mk, ce.err)
			}
			return nil, ferr
		}
	}
	if !done && st.asm.finish == "" {
		// A cut answer fails before the think filter lets go of what it
		// holds back: half a tag never reaches the sink, whose text a
		// continuation goes on from.
		if actx.Err() != nil {
			return nil, c.ioFailure(ctx, actx, src, resp.StatusCode, actx.Err())
		}
		if src.MissingDone != core.MissingDoneSalvage || !st.asm.gotToken {
			mk.msg = "stream ended without [DONE] or finish_reason after " + strconv.Itoa(st.clock.tokens) + " token events"
			return nil, mk.transient(core.ReasonNetworkError, 0)
		}
	}
	st.asm.end()
	if err := out.send(st); err != nil {
		return nil, c.consumerFailed(ctx, mk, err)
	}
	if done {
		drainAfterDone(resp.Body)
	}
	if !st.picked {
		// No chunk had a choice to read (of index 0, or of none): the
		// stream holds no answer, as a body without one holds none.
		mk.msg = "stream has no choices"
		return nil, mk.transient(core.ReasonNetworkError, 0)
	}
	return c.result(src, call, st, start, true), nil
}

// consumerError wraps the error of a delta sink (see streamEvent).
type consumerError struct{ err error }

func (e consumerError) Error() string { return "stream consumer failed: " + e.err.Error() }

// streamEvent handles one event of a stream: done reports its end
// ([DONE], or the separate usage chunk after the finish), cut a stream cut
// inside its last event. err is the attempt's failure; a sink's error is
// a consumerError.
func (c *Client) streamEvent(ev *SSEEvent, src *core.SourceConfig, prof *core.ProviderProfile, resp *http.Response, st *attemptState, out *deltaOut) (done, cut bool, err error) {
	mk := errMaker{src: src, status: resp.StatusCode}
	data := bytes.TrimSpace(ev.Data)
	if ev.Event == "error" {
		env := parseEnvelope(data)
		return false, false, classifyResponse(src, prof, resp.StatusCode, resp.Header, env, c.cfg.MaxRetryAfter, time.Now())
	}
	switch {
	case len(data) == 0:
		return false, false, nil
	case string(data) == "[DONE]":
		return true, false, nil
	}
	if !st.dec.decodeChunk(data, &st.chunk) {
		if skippable(data) && st.skipped < maxSkippedEvents {
			// Provably nothing of the answer (see skippable): a
			// broken keep-alive or annotation is passed over.
			st.skipped++
			return false, false, nil
		}
		if ev.Unterminated && st.asm.finish == "" {
			// The body was cut inside its last event: a cut stream,
			// which MissingDone decides.
			return false, true, nil
		}
		// The event may have held part of the answer: never a
		// success without it, whatever came before or after.
		mk.msg = "malformed stream event: " + snippet(data, src.APIKey)
		return false, false, mk.transient(core.ReasonNetworkError, 0)
	}
	if st.chunk.isError() {
		env := parseEnvelope(data)
		return false, false, classifyResponse(src, prof, resp.StatusCode, resp.Header, env, c.cfg.MaxRetryAfter, time.Now())
	}
	ch := st.chunk.picked()
	st.picked = st.picked || ch != nil
	token, err := st.asm.apply(&st.chunk)
	if err != nil {
		return false, false, &memoryError{source: src.Name, held: st.asm.mem.reserved}
	}
	if token {
		st.clock.token()
	}
	if err := out.send(st); err != nil {
		return false, false, consumerError{err}
	}
	// The separate usage chunk after finish_reason (one without choices:
	// a chunk of another choice is not it) ends the answer: do not wait
	// for a [DONE] that a server may never send.
	return st.asm.finish != "" && len(st.chunk.Choices) == 0 && st.chunk.Usage.vals().complete(), false, nil
}

// deltaOut passes a stream's deltas to the call's sink.
type deltaOut struct {
	sink    core.DeltaSink
	flusher core.DeltaFlusher
	keeper  core.DeltaKeeper
	modeler core.DeltaModel
	// model is the model last named to the modeler.
	model     string
	unflushed bool
}

// reset makes o pass deltas to sink (nil: none).
func (o *deltaOut) reset(sink core.DeltaSink) {
	*o = deltaOut{sink: sink}
	if sink != nil {
		o.flusher, _ = sink.(core.DeltaFlusher)
		o.keeper, _ = sink.(core.DeltaKeeper)
		o.modeler, _ = sink.(core.DeltaModel)
	}
}

// send passes the delta of the chunk last applied, if it has one.
func (o *deltaOut) send(st *attemptState) error {
	if o.sink == nil {
		return nil
	}
	content, thinking := st.asm.delta()
	if content == "" && thinking == "" {
		return nil
	}
	if o.modeler != nil && o.model != st.asm.model {
		o.model = st.asm.model
		o.modeler.SetModel(o.model)
	}
	if err := o.sink.Delta(content, thinking); err != nil {
		return err
	}
	o.unflushed = o.flusher != nil
	return nil
}

func (o *deltaOut) flush() error {
	o.unflushed = false
	return o.flusher.FlushDeltas()
}

// snippetBytes bounds the part of a bad event quoted in an error.
const snippetBytes = 120

// snippet returns the start of a bad event for an error message: the key
// redacted first, then cut (a cut through the key must not leave most of
// it behind).
func snippet(b []byte, key string) string {
	return redact.New(key).CutBytes(b, snippetBytes)
}

// maxSkippedEvents bounds the malformed events one stream may skip; one
// more fails the attempt.
const maxSkippedEvents = 3

// skippable is the one rule that decides whether a stream event that did
// not parse as a chunk may be passed over. It may only when its bytes prove
// that it held no delta text, tool-call fragment, thinking text, usage,
// finish or error: every one of those lives inside a JSON object in every
// dialect (DIALECTS.md), so an event holding no '{' cannot have carried one
// — a bare word ("ping", "keep-alive"), a JSON scalar, an array of scalars.
// An event with a '{' anywhere is never provably empty: a JSON object cut at
// any byte, whatever keys it reached, or one damaged in the middle, may
// have been a chunk of the answer. An event naming an error in plain text
// is not skipped either: it fails the attempt rather than be ignored.
func skippable(data []byte) bool {
	return bytes.IndexByte(data, '{') < 0 && !containsFold(data, "error")
}

// containsFold reports whether b contains the lower-case ASCII word w in
// any case.
func containsFold(b []byte, w string) bool {
	for i := 0; i+len(w) <= len(b); i++ {
		j := 0
		for ; j < len(w); j++ {
			if b[i+j]|0x20 != w[j] {
				break
			}
		}
		if j == len(w) {
			return true
		}
	}
	return false
}

// After the end of a complete stream, drainAfterDone waits at most
// drainWait for at most drainBytes of what follows.
const (
	drainWait  = 2 * time.Millisecond
	drainBytes = 4 << 10
)

// drainAfterDone reads what follows the end of a complete stream — the
// chunked encoding's last chunk, a trailing blank line — so that the
// connection goes back to the pool: net/http closes a connection whose
// body is closed before its end, and a new one costs a dial on the next
// attempt (with TLS, a handshake). A server that keeps the stream open
// after [DONE] loses its connection after drainWait, as it did before.
func drainAfterDone(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { _ = body.Close() })
	defer t.Stop()
	var buf [512]byte
	for n := 0; n < drainBytes; {
		m, err := body.Read(buf[:])
		n += m
		if err != nil {
			return
		}
	}
}

// consumerFailed is the error of an attempt whose delta sink failed.
func (c *Client) consumerFailed(ctx context.Context, mk errMaker, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return &core.CanceledError{Err: cerr}
	}
	mk.msg = "stream consumer failed: " + err.Error()
	mk.err = err
	return mk.rejectedFor(core.ReasonConsumerFailed, core.CodeConsumerFailed)
}
