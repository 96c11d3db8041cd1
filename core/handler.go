package core

import "context"

// Handler serves one governed call. Implementations must be safe for
// concurrent use and must return an error satisfying errors.Is(err, ctx.Err())
// when ctx ends before the call completes.
type Handler func(ctx context.Context, call *Call) (*LLMResponse, error)

// Middleware wraps a Handler in one layer of the onion.
type Middleware func(next Handler) Handler

// Chain composes middleware once: the first listed is the outermost layer.
// A nil layer, or one that returns a nil Handler, is skipped.
func Chain(h Handler, mws ...Middleware) Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		if mws[i] == nil {
			continue
		}
		if next := mws[i](h); next != nil {
			h = next
		}
	}
	return h
}
