package polygateway

import (
	"context"

	"github.com/polygateway/polygateway/core"
)

// Call is one governed call as middleware sees it. Middleware may read it
// and pass it on; it never changes Messages or Params.
type Call struct {
	// ID is the call_id of the telemetry row and LLMResponse.CallID.
	ID string
	// Scope is the logical role (upper case), e.g. "LLM".
	Scope string
	// Messages is the conversation to send (for embeddings and OCR, the
	// input as telemetry records it).
	Messages []Message
	// Params holds the extra request fields (temperature, max_tokens, tools…).
	Params map[string]any
	// Stream is true when the upstream is asked to stream.
	Stream bool
	// SessionID and ParentCallID link telemetry rows of one task.
	SessionID, ParentCallID string
	// CacheSalt and CacheNamespace refine the cache key.
	CacheSalt, CacheNamespace string

	inner *core.Call
}

// Handler serves one governed call. Implementations must be safe for
// concurrent use and return an error satisfying errors.Is(err, ctx.Err())
// when ctx ends before the call completes.
type Handler func(ctx context.Context, call *Call) (*LLMResponse, error)

// Middleware wraps a Handler in one layer of the onion; see WithMiddleware.
type Middleware func(next Handler) Handler

// Chain composes middleware once around h: the first listed is the
// outermost layer.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] != nil {
			h = mws[i](h)
		}
	}
	return h
}

// publicCall is the middleware's view of a core call.
func publicCall(c *core.Call) *Call {
	return &Call{
		ID: c.ID, Scope: c.Scope, Messages: publicMessages(c.Messages), Params: c.Params, Stream: c.Stream,
		SessionID: c.SessionID, ParentCallID: c.ParentCallID, CacheSalt: c.CacheSalt, CacheNamespace: c.CacheNamespace,
		inner: c,
	}
}

// coreCall is the core call behind pc: the one it came from, with what
// a middleware may have set on the view, or a new chat call for a Call the
// middleware built itself.
func (pc *Call) coreCall() *core.Call {
	c := pc.inner
	if c == nil {
		c = &core.Call{}
	}
	c.ID, c.Scope, c.Messages, c.Params, c.Stream = pc.ID, pc.Scope, coreMessages(pc.Messages), pc.Params, pc.Stream
	c.SessionID, c.ParentCallID, c.CacheSalt, c.CacheNamespace = pc.SessionID, pc.ParentCallID, pc.CacheSalt, pc.CacheNamespace
	return c
}

// coreMiddleware puts a user's middleware into the onion internal/kernel
// assembles.
func coreMiddleware(m Middleware) core.Middleware {
	if m == nil {
		return nil
	}
	return func(next core.Handler) core.Handler {
		h := m(func(ctx context.Context, pc *Call) (*LLMResponse, error) {
			resp, err := next(ctx, pc.coreCall())
			return publicResponse(resp), publicError(err)
		})
		if h == nil {
			return next
		}
		return func(ctx context.Context, c *core.Call) (*core.LLMResponse, error) {
			resp, err := h(ctx, publicCall(c))
			return coreResponse(resp), err
		}
	}
}
