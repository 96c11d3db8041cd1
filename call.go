package polygateway

import "github.com/polygateway/polygateway/core"

// Call is one governed call as middleware sees it (go doc core.Call).
// Middleware may read it and pass it on; it never changes Messages or
// Params.
type Call = core.Call

// Handler serves one governed call. Implementations must be safe for
// concurrent use and return an error satisfying errors.Is(err, ctx.Err())
// when ctx ends before the call completes.
type Handler = core.Handler

// Middleware wraps a Handler in one layer of the onion; see WithMiddleware.
type Middleware = core.Middleware

// Chain composes middleware once around h: the first listed is the
// outermost layer; a nil layer, or one that returns nil, is skipped.
func Chain(h Handler, mws ...Middleware) Handler { return core.Chain(h, mws...) }
