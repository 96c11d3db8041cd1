package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
)

var (
	_ core.DeltaFlusher = (*streamSink)(nil)
	_ core.DeltaKeeper  = (*streamSink)(nil)
	_ core.DeltaModel   = (*streamSink)(nil)
)

// errStreamBroken reports a relayed stream that could not be completed.
var errStreamBroken = errors.New("stream broken after the first byte")

// sseWriter writes server-sent events to the client. Every write is bounded
// by the write timeout; the first failure sticks.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	started bool
	err     error
	buf     []byte
	// enc encodes delta chunks into buf (see delta), HTML escaping off.
	enc *json.Encoder
	// set is when the write deadline was last moved.
	set time.Time
}

// start sends the response headers (status 200, text/event-stream).
func (o *sseWriter) start(set func(http.Header)) {
	h := o.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	set(h)
	o.started = true
	o.deadline()
	o.w.WriteHeader(http.StatusOK)
}

// deadline bounds the next write by the write timeout. Moving a deadline
// costs a timer update, so a stream writing many events a millisecond
// moves it when a sixteenth of the timeout has passed since the last move:
// every write is still bounded by between 15/16 of the timeout and the
// timeout.
func (o *sseWriter) deadline() {
	now := time.Now()
	if !o.set.IsZero() && now.Sub(o.set) < o.timeout/16 {
		return
	}
	o.set = now
	_ = o.rc.SetWriteDeadline(now.Add(o.timeout))
}

// event writes one "data: <json>" event (without flushing).
func (o *sseWriter) event(v any) {
	if o.err != nil {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		o.err = err
		return
	}
	o.buf = append(o.buf[:0], "data: "...)
	o.buf = append(o.buf, b...)
	o.buf = append(o.buf, '\n', '\n')
	o.write(o.buf)
}

// delta writes one delta chunk as "data: <json>" (without flushing),
// encoded by encoding/json without HTML escaping.
func (o *sseWriter) delta(c *chunkBody) {
	if o.err != nil {
		return
	}
	if o.enc == nil {
		o.enc = json.NewEncoder((*bufWriter)(o))
		o.enc.SetEscapeHTML(false)
	}
	o.buf = append(o.buf[:0], "data: "...)
	if err := o.enc.Encode(c); err != nil {
		o.err = err
		return
	}
	o.buf = append(o.buf, '\n') // after Encode's own newline: the blank line
	o.write(o.buf)
}

// bufWriter appends what is written to the sseWriter's buf.
type bufWriter sseWriter

func (b *bufWriter) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (o *sseWriter) write(p []byte) {
	if o.err != nil {
		return
	}
	o.deadline()
	if _, err := o.w.Write(p); err != nil {
		o.err = err
	}
}

// flush pushes what was written to the client.
func (o *sseWriter) flush() error {
	if o.err == nil {
		o.deadline()
		if err := o.rc.Flush(); err != nil {
			o.err = err
		}
	}
	return o.err
}

// Chunk wire types.
type chunkBody struct {
	ID      string        `json:"id"`
	Object  string        `json:"object"`
	Created int64         `json:"created"`
	Model   string        `json:"model"`
	Choices []chunkChoice `json:"choices"`
	Usage   *usageBody    `json:"usage,omitempty"`
	Gateway *gatewayInfo  `json:"gateway,omitempty"`
}

type chunkChoice struct {
	Index        int       `json:"index"`
	Delta        deltaBody `json:"delta"`
	FinishReason *string   `json:"finish_reason"`
}

type deltaBody struct {
	Role             string         `json:"role,omitempty"`
	Content          *string        `json:"content,omitempty"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []toolCallBody `json:"tool_calls,omitempty"`
}

// streamEvents writes a streamed chat answer in the event shape of an API
// other than chat completions (whose chunks streamSink writes itself). The
// sink calls it with its lock held, in order: delta for every piece of the
// answer as the commit policy releases it, then end once for a successful
// answer, or fail once for one that cannot complete.
type streamEvents interface {
	// delta writes a piece of the answer (content, thinking or both; both
	// empty for an empty answer) of the source model model.
	delta(out *sseWriter, model, content, thinking string)
	// end writes the rest of a successful answer resp (its text went out
	// through delta) and its end.
	end(out *sseWriter, model string, resp *polygateway.LLMResponse, gw *gatewayInfo)
	// fail ends the stream with e: the client must never take it for a
	// complete answer.
	fail(out *sseWriter, e *apiError)
}

// streamSink is the DeltaSink of a streamed chat call: it implements the
// commit policy. Under first_token every delta goes to the client at once
// and the sink is committed from the first byte on; under buffer the deltas
// are held until the call has succeeded and Reset drops a failed attempt's.
// Either way it keeps the text of the deltas (core.DeltaKeeper): the
// answer's text is held once, by the sink, and the transport's answer is
// made of it.
type streamSink struct {
	mu       sync.Mutex
	buffer   bool
	out      sseWriter
	ri       *reqInfo
	id       string
	created  int64
	alias    string
	model    string // tracked: the current attempt's source model
	upstream string // the model the current attempt's answer names (SetModel)
	source   string
	breaker  core.BreakerState // tracked: the current attempt's circuit state
	attempts []string

	committed bool
	roleSent  bool
	unflushed bool
	// sent and sentThink are the text of the deltas kept: relayed
	// (first_token), or held (buffer), ends the ends of each held delta.
	sent      strings.Builder
	sentThink strings.Builder
	ends      []pieceEnd
	// mem is the server's memory budget, and held what ends takes of it
	// (buffer): a token stream's deltas are a few bytes each, and their
	// bookkeeping would otherwise outweigh the text the budget counts.
	mem  core.MemoryBudget
	held int64
	// chunk, choice and content are the delta chunk being written.
	chunk   chunkBody
	choice  [1]chunkChoice
	content string
	// events writes the stream in another API's shape (nil: chat chunks).
	events streamEvents
}

// pieceEnd is where a held delta ends in sent and sentThink.
type pieceEnd struct{ content, thinking int }

// pieceEndSize is the bytes one pieceEnd takes: two ints.
const pieceEndSize = 2 * strconv.IntSize / 8

// errHeldPieces fails a buffered stream whose held deltas' bookkeeping
// does not fit the memory budget: the call ends as an answer too large.
var errHeldPieces = fmt.Errorf("proxy: the deltas held for a buffered answer exceed the memory budget: %w", core.ErrMemoryBudget)

// holdEnd makes room in ends for one more held delta, taking from the
// memory budget what a larger array needs before it is allocated. Called
// with k.mu held.
func (k *streamSink) holdEnd() error {
	if len(k.ends) < cap(k.ends) {
		return nil
	}
	n := max(cap(k.ends), 32) // the array doubles
	if !k.mem.Reserve(int64(n) * pieceEndSize) {
		return errHeldPieces
	}
	k.held += int64(n) * pieceEndSize
	k.ends = slices.Grow(k.ends, n)
	return nil
}

// release gives back what the sink took of the memory budget; the sink
// writes nothing it holds after it (called when its request is done).
func (k *streamSink) release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.held > 0 {
		k.mem.Release(k.held)
		k.held = 0
	}
}

func (s *Server) newStreamSink(w http.ResponseWriter, ri *reqInfo, callID, alias, commit string, ans chatAnswer) *streamSink {
	if commit == "" {
		commit = s.cfg.StreamCommit
	}
	k := &streamSink{
		buffer: commit == CommitBuffer,
		out:    sseWriter{w: w, rc: http.NewResponseController(w), timeout: s.cfg.WriteTimeout},
		ri:     ri, id: "chatcmpl-" + callID, created: time.Now().Unix(), alias: alias,
		mem: &s.bodies,
	}
	if ans != nil {
		k.events = ans.events(callID, k.created)
	}
	return k
}

// AttemptStarted notes the source an attempt goes to (core.AttemptListener):
// chunks relayed before the answer is complete name its model, and the
// headers name it and the attempts so far.
func (k *streamSink) AttemptStarted(ev core.AttemptEvent) {
	k.mu.Lock()
	k.source, k.model, k.breaker, k.upstream = ev.Source, ev.Model, ev.Breaker, ""
	k.attempts = append(k.attempts, ev.Source)
	k.mu.Unlock()
}

// SetModel notes the model the current attempt's answer names
// (core.DeltaModel): the chunks relayed name it.
func (k *streamSink) SetModel(model string) {
	k.mu.Lock()
	k.upstream = model
	k.mu.Unlock()
}

// Kept returns the text of the deltas kept (core.DeltaKeeper).
func (k *streamSink) Kept() (content, thinking string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.sent.String(), k.sentThink.String()
}

// AttemptFinished is part of core.AttemptListener.
func (k *streamSink) AttemptFinished(core.AttemptEvent) {}

// Delta relays (first_token) or holds (buffer) one piece of the answer.
func (k *streamSink) Delta(content, thinking string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sent.WriteString(content)
	k.sentThink.WriteString(thinking)
	if k.buffer {
		if err := k.holdEnd(); err != nil {
			return err
		}
		k.ends = append(k.ends, pieceEnd{k.sent.Len(), k.sentThink.Len()})
		return nil
	}
	if k.out.err != nil {
		return k.out.err
	}
	first := !k.committed
	if first {
		k.committed = true
		source, attempts, state := k.source, strings.Join(k.attempts, ","), k.breaker
		k.out.start(func(h http.Header) {
			h.Set("X-PolyGateway-Source", source)
			h.Set("X-PolyGateway-Attempts", attempts)
			h.Set("X-PolyGateway-Cache", "miss")
			h.Set("X-PolyGateway-Degraded", "false")
			h.Set(breakerHeader, state.String())
		})
	}
	k.writeDelta(k.streamModel(), content, thinking)
	if first {
		// The first token goes out at once (time to first token); later
		// ones wait for FlushDeltas, at most until the transport has no
		// further event at hand.
		return k.out.flush()
	}
	k.unflushed = true
	return k.out.err
}

// FlushDeltas pushes the relayed deltas to the client
// (core.DeltaFlusher): the transport calls it when it has no further
// event at hand, so deltas that arrived together leave in one write.
func (k *streamSink) FlushDeltas() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.unflushed {
		return k.out.err
	}
	k.unflushed = false
	return k.out.flush()
}

// streamModel is the model the chunks relayed name: the one the
// answering attempt's answer names (the upstream's, else its source's
// MODEL: SetModel), else the attempt's source model (announced when it
// started), else the requested name until one is known. Called with k.mu
// held.
func (k *streamSink) streamModel() string {
	return cmpOr(k.upstream, cmpOr(k.model, k.alias))
}

// writeDelta writes a content/thinking chunk (the first one carries the
// role). Called with k.mu held.
func (k *streamSink) writeDelta(model, content, thinking string) {
	if k.events != nil {
		k.events.delta(&k.out, model, content, thinking)
		return
	}
	k.content = content
	k.choice[0] = chunkChoice{Delta: deltaBody{ReasoningContent: thinking}}
	if content != "" || thinking == "" {
		k.choice[0].Delta.Content = &k.content
	}
	if !k.roleSent {
		k.choice[0].Delta.Role, k.roleSent = "assistant", true
	}
	k.chunk = chunkBody{ID: k.id, Object: "chat.completion.chunk", Created: k.created, Model: model, Choices: k.choice[:]}
	k.out.delta(&k.chunk)
}

// Committed reports whether anything was sent to the client.
func (k *streamSink) Committed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.committed
}

// Delivered returns what was relayed to the client (first_token; nothing
// under buffer): a continuation goes on from it.
func (k *streamSink) Delivered() (content, thinking string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.buffer {
		return "", ""
	}
	return k.sent.String(), k.sentThink.String()
}

// Reset drops the deltas a failed attempt left (buffer).
func (k *streamSink) Reset() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.buffer {
		k.sent, k.sentThink = strings.Builder{}, strings.Builder{}
		k.ends = k.ends[:0]
	}
}

// delta builds a content/thinking chunk; the first one carries the role.
func (k *streamSink) delta(model, content, thinking string) *chunkBody {
	d := deltaBody{ReasoningContent: thinking}
	if content != "" || thinking == "" {
		d.Content = &content
	}
	if !k.roleSent {
		d.Role, k.roleSent = "assistant", true
	}
	return &chunkBody{ID: k.id, Object: "chat.completion.chunk", Created: k.created, Model: model, Choices: []chunkChoice{{Delta: d}}}
}

// finish sends the rest of a successful answer: what was not relayed yet,
// the tool calls, the finish chunk, the usage chunk when asked for, and
// [DONE].
//
// When part of an answer was already relayed and the final answer does not
// continue it (a fallback answered after the stream broke), nothing can
// complete the stream honestly: it ends with an error event instead, and
// errStreamBroken is returned.
func (k *streamSink) finish(resp *polygateway.LLMResponse, includeUsage bool) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.buffer && (k.sent.Len() > 0 || k.sentThink.Len() > 0) && (resp.Degraded ||
		!strings.HasPrefix(resp.Content, k.sent.String()) || !strings.HasPrefix(resp.Thinking, k.sentThink.String())) {
		k.failEvent(&apiError{typ: "upstream_error", code: "stream_interrupted",
			msg: "the stream broke after it had started; the fallback answer cannot continue it"})
		_ = k.out.flush()
		return errStreamBroken
	}
	// Every chunk names one model: the one the answer names (the
	// upstream's, else the source's MODEL), which the chunks relayed so
	// far named too.
	model := resp.Model
	if !k.out.started {
		k.committed = true
		k.out.start(func(h http.Header) { setGatewayHeaders(h, resp) })
	}
	switch {
	case k.buffer && len(k.ends) > 0 && k.sent.String() == resp.Content && k.sentThink.String() == resp.Thinking:
		content, thinking := k.sent.String(), k.sentThink.String()
		c, t := 0, 0
		for _, e := range k.ends {
			k.writeDelta(model, content[c:e.content], thinking[t:e.thinking])
			c, t = e.content, e.thinking
		}
	case k.buffer || k.sent.Len() == 0 && k.sentThink.Len() == 0:
		if resp.Content != "" || resp.Thinking != "" || len(resp.ToolCalls) == 0 {
			k.writeDelta(model, resp.Content, resp.Thinking)
		}
	default:
		// Relayed deltas normally are the whole answer; send what the
		// final answer has beyond them, if anything.
		var rest, restThink string
		if sent := k.sent.String(); len(resp.Content) > len(sent) && strings.HasPrefix(resp.Content, sent) {
			rest = resp.Content[len(sent):]
		}
		if sent := k.sentThink.String(); len(resp.Thinking) > len(sent) && strings.HasPrefix(resp.Thinking, sent) {
			restThink = resp.Thinking[len(sent):]
		}
		if rest != "" || restThink != "" {
			k.writeDelta(model, rest, restThink)
		}
	}
	if k.events != nil {
		k.events.end(&k.out, model, resp, newGatewayInfo(k.ri, resp))
		return k.out.flush()
	}
	if tcs := toolCalls(resp, true); len(tcs) > 0 {
		c := k.delta(model, "", "")
		c.Choices[0].Delta.Content = nil
		c.Choices[0].Delta.ToolCalls = tcs
		k.out.event(c)
	}
	reason := finishReason(resp)
	fin := &chunkBody{ID: k.id, Object: "chat.completion.chunk", Created: k.created, Model: model,
		Choices: []chunkChoice{{Delta: deltaBody{}, FinishReason: &reason}}}
	gw := newGatewayInfo(k.ri, resp)
	if includeUsage {
		k.out.event(fin)
		k.out.event(&chunkBody{ID: k.id, Object: "chat.completion.chunk", Created: k.created, Model: model,
			Choices: []chunkChoice{}, Usage: usageOf(resp), Gateway: gw})
	} else {
		fin.Gateway = gw
		k.out.event(fin)
	}
	k.out.write([]byte("data: [DONE]\n\n"))
	return k.out.flush()
}

// fail ends a committed stream with an OpenAI-style error event and no
// [DONE], so that no client mistakes it for a complete answer.
func (k *streamSink) fail(e *apiError) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.failEvent(e)
	_ = k.out.flush()
}

// failEvent writes the event that ends a stream with e. Called with k.mu
// held.
func (k *streamSink) failEvent(e *apiError) {
	if k.events != nil {
		k.events.fail(&k.out, e)
		return
	}
	k.out.event(e.envelope())
}

// writeFailed reports whether a write to the client failed.
func (k *streamSink) writeFailed() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.err != nil
}

// started reports whether the response headers went out.
func (k *streamSink) started() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.out.started
}

// tracked returns the source and attempts seen so far.
func (k *streamSink) tracked() (string, []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.source, append([]string(nil), k.attempts...)
}

// streamChat serves a chat completion with "stream": true.
func (s *Server) streamChat(w http.ResponseWriter, r *http.Request, ri *reqInfo, chain []chatHop, req *chatRequest, ans chatAnswer) {
	ctx, done := s.callContext(r)
	defer done()
	resp, sink, err := s.streamRoutes(s.withBudget(ctx), w, ri, chain, req, ans)
	defer sink.release()
	if err == nil {
		s.note(ri, resp)
		if werr := sink.finish(resp, req.includeUsage); errors.Is(werr, errStreamBroken) {
			ri.code, ri.outcome = "stream_interrupted", "stream_interrupted"
		} else if werr != nil {
			ri.code, ri.outcome = "client_write_failed", "client_write_failed"
		}
		return
	}
	ae := s.callError(r, err)
	ri.source, ri.attempts = sink.tracked()
	if sink.writeFailed() {
		// The client stopped reading (write timeout) or went away mid-stream:
		// the call was aborted for its sake, nothing more can be sent.
		ri.code, ri.outcome = "client_write_failed", "client_write_failed"
		if !sink.started() {
			ri.status = StatusClientClosedRequest
		}
		return
	}
	if !sink.started() {
		if len(ri.attempts) > 0 {
			w.Header().Set("X-PolyGateway-Attempts", strings.Join(ri.attempts, ","))
		}
		s.fail(w, ri, ae)
		return
	}
	// The client has a 200 and part of an answer: the log keeps that status
	// and tells how the stream ended.
	ri.code, ri.outcome = ae.code, "stream_interrupted"
	if ae.status == StatusClientClosedRequest {
		ri.outcome = "client_closed_request"
		return
	}
	sink.fail(ae)
}
