package polygateway

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
)

// StreamDelta is one piece of a streamed answer.
type StreamDelta struct {
	// Content and Thinking are the new answer and reasoning text.
	Content, Thinking string
	// ToolCalls are the tool calls the model asked for, complete; they
	// arrive in the stream's last delta.
	ToolCalls []ToolCall
}

// ChatStream is one governed chat call whose answer arrives as it is
// generated: call Next until it returns false, reading Delta after each
// true, then Err, and Response when Err is nil. Always Close it (a
// deferred Close is fine): closing early cancels the call and releases
// everything it holds.
//
// The whole governance applies: until the first delta reaches the caller
// a failing attempt fails over to another source invisibly (nothing of it
// is delivered); after it, the stream is committed, and a failure ends it
// with an error — never with a truncated answer presented as complete. A
// cache hit is replayed as one delta, as is the answer of a source asked
// not to stream (WithStream(false)). The call writes its telemetry row
// like Chat. A ChatStream is used by one goroutine.
type ChatStream struct {
	cancel context.CancelFunc
	done   chan struct{} // closed when the call returned
	wake   chan struct{} // a delta was queued or the call returned

	mu        sync.Mutex
	queue     []StreamDelta
	committed bool
	sent      strings.Builder // content delivered to the queue
	sentThink strings.Builder
	finished  bool
	resp      *LLMResponse
	err       error

	cur       StreamDelta
	closeOnce sync.Once
}

// ChatStream starts one governed chat call and returns its stream at once;
// failures (a closed client, a nil context, an empty conversation, a call
// that fails before its first delta) are reported by Err after Next
// returns false.
// Structured output (WithJSON, WithJSONSchema) is not streamed: use Chat or
// ChatInto.
func (c *GatewayClient) ChatStream(ctx context.Context, msgs []Message, opts ...CallOption) *ChatStream {
	s := &ChatStream{cancel: func() {}, done: make(chan struct{}), wake: make(chan struct{}, 1)}
	co := kernel.ResolveCall(opts)
	switch err := kernel.CheckContext(ctx); {
	case err != nil:
		s.end(nil, err)
		return s
	case len(msgs) == 0:
		s.end(nil, &RequestRejectedError{Code: "empty_messages", Message: "no messages to send"})
		return s
	case co.JSON:
		s.end(nil, &RequestRejectedError{Code: "structured_stream", Message: "structured output is not streamed: use Chat or ChatInto"})
		return s
	}
	ctx, s.cancel = context.WithCancel(ctx)
	call := c.newCall(msgs, co)
	call.Deltas = (*streamSink)(s)
	go func() {
		resp, err := c.k.Handle(ctx, call)
		s.end(resp, err)
	}()
	return s
}

// end records the call's outcome and queues what the deltas did not
// deliver: the whole answer when nothing streamed (a cache hit, a source
// asked not to stream), and the tool calls.
func (s *ChatStream) end(resp *LLMResponse, err error) {
	s.mu.Lock()
	if err == nil && resp != nil {
		sent, sentThink := s.sent.String(), s.sentThink.String()
		switch {
		case !strings.HasPrefix(resp.Content, sent) || !strings.HasPrefix(resp.Thinking, sentThink):
			// A degraded answer stood in after part of another one was
			// delivered: nothing can complete the stream honestly.
			resp, err = nil, &TransientError{Source: resp.SourceName, Reason: core.ReasonNetworkError,
				Message: "the stream broke after it had started; the answer that stood in cannot continue it"}
		default:
			if rest, restThink := resp.Content[len(sent):], resp.Thinking[len(sentThink):]; rest != "" || restThink != "" {
				s.queue = append(s.queue, StreamDelta{Content: rest, Thinking: restThink})
			}
			if len(resp.ToolCalls) > 0 {
				s.queue = append(s.queue, StreamDelta{ToolCalls: resp.ToolCalls})
			}
		}
	}
	if err != nil {
		resp = nil
	}
	s.resp, s.err, s.finished = resp, err, true
	s.mu.Unlock()
	close(s.done)
	s.signal()
}

func (s *ChatStream) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Next waits for the next delta and reports whether there is one; false
// means the stream ended (see Err).
func (s *ChatStream) Next() bool {
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			s.cur = s.queue[0]
			s.queue[0] = StreamDelta{}
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return true
		}
		finished := s.finished
		s.mu.Unlock()
		if finished {
			s.cur = StreamDelta{}
			return false
		}
		<-s.wake
	}
}

// Delta returns the delta Next moved to.
func (s *ChatStream) Delta() StreamDelta { return s.cur }

// Err returns the call's error once Next returned false: nil for a complete
// answer. A cancelled call's error satisfies errors.Is(err, ctx.Err()).
func (s *ChatStream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished {
		return nil
	}
	return s.err
}

// Response returns the complete answer — content, usage, cost, attempts —
// once Next returned false with a nil Err; nil before and on failure.
func (s *ChatStream) Response() *LLMResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.finished || len(s.queue) > 0 {
		return nil
	}
	return s.resp
}

// Close ends the stream: a call still running is cancelled (it then writes
// no telemetry row) and everything it holds is released before Close
// returns; deltas not yet read are dropped, so Next then returns false. It
// is idempotent and returns nil.
func (s *ChatStream) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		<-s.done
		s.mu.Lock()
		clear(s.queue)
		s.queue = nil
		s.mu.Unlock()
	})
	return nil
}

// All returns the stream as an iterator of deltas; a failure is yielded
// last, with a zero delta. Breaking out of the loop closes the stream.
func (s *ChatStream) All() iter.Seq2[StreamDelta, error] {
	return func(yield func(StreamDelta, error) bool) {
		defer s.Close()
		for s.Next() {
			if !yield(s.Delta(), nil) {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(StreamDelta{}, err)
		}
	}
}

// streamSink is the ChatStream as the call's DeltaSink: every delta is
// delivered at once (the stream is committed from the first one).
type streamSink ChatStream

var (
	_ core.DeltaSink   = (*streamSink)(nil)
	_ core.DeltaKeeper = (*streamSink)(nil)
)

// Delta queues one piece of the answer; it never blocks the attempt.
func (k *streamSink) Delta(content, thinking string) error {
	s := (*ChatStream)(k)
	s.mu.Lock()
	if s.finished {
		s.mu.Unlock()
		return errStreamClosed
	}
	s.queue = append(s.queue, StreamDelta{Content: content, Thinking: thinking})
	s.sent.WriteString(content)
	s.sentThink.WriteString(thinking)
	s.committed = true
	s.mu.Unlock()
	s.signal()
	return nil
}

// Committed reports whether a delta reached the caller.
func (k *streamSink) Committed() bool {
	s := (*ChatStream)(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// Reset has nothing to drop: deltas are delivered at once.
func (k *streamSink) Reset() {}

// Kept returns the text of every delta queued (core.DeltaKeeper): the
// stream's text is held once, here, and the answer is made of it.
func (k *streamSink) Kept() (content, thinking string) {
	s := (*ChatStream)(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent.String(), s.sentThink.String()
}

// Delivered returns what reached the caller.
func (k *streamSink) Delivered() (content, thinking string) {
	s := (*ChatStream)(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent.String(), s.sentThink.String()
}

var errStreamClosed = errors.New("polygateway: stream closed")
