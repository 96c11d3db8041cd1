package proxy

import (
	"io"
	"maps"
	"reflect"
	"slices"
	"sync"

	"github.com/polygateway/polygateway/internal/kernel"
)

// generation is one immutable set of routes and clients plus a reference
// count of the requests using it. A retired generation admits no new
// requests; drained is closed once it is retired and its last request has
// finished.
type generation struct {
	Backends
	models []string // every routed model name, sorted
	// chat holds the kernel client of every chat scope and whether a
	// source of it has a stream watchdog.
	chat map[string]chatScope

	mu      sync.Mutex
	refs    int
	retired bool
	drained chan struct{}
}

func newGeneration(b Backends) *generation {
	b.Clients = maps.Clone(b.Clients)
	b.Embedders = maps.Clone(b.Embedders)
	b.Routes = maps.Clone(b.Routes)
	b.EmbedRoutes = maps.Clone(b.EmbedRoutes)
	models := slices.Collect(maps.Keys(b.Routes))
	for m := range b.EmbedRoutes {
		if _, dup := b.Routes[m]; !dup {
			models = append(models, m)
		}
	}
	slices.Sort(models)
	chat := make(map[string]chatScope, len(b.Clients))
	for scope, c := range b.Clients {
		k, err := kernel.Unwrap(c)
		if err != nil {
			continue // validate refused nil clients
		}
		cs := chatScope{k: k, cacheNS: k.Settings().CacheNamespace}
		for i := range k.Settings().Sources {
			src := &k.Settings().Sources[i]
			cs.watched = cs.watched || src.TTFTTimeout > 0 || src.InterTokenTimeout > 0
		}
		chat[scope] = cs
	}
	return &generation{Backends: b, models: models, chat: chat, drained: make(chan struct{})}
}

// chatScope is what a chat request needs of its scope.
type chatScope struct {
	k *kernel.Client
	// watched: a source of the scope has a time-to-first-token or
	// inter-token timeout. Such a source can only be watched while it
	// streams, so a non-streaming client's call still asks the upstream to
	// stream (and a silent first token fails over); without a watchdog the
	// upstream answers with one JSON body, which costs a fraction of the
	// SSE events.
	watched bool
	// cacheNS is the scope's configured cache namespace ("" without one),
	// which a request's client key refines (Server.cacheNamespace).
	cacheNS string
}

// acquire takes a reference unless the generation is retired.
func (g *generation) acquire() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return false
	}
	g.refs++
	return true
}

// release drops a reference taken by acquire.
func (g *generation) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.refs--
	if g.retired && g.refs == 0 {
		close(g.drained)
	}
}

// retire stops admitting requests; drained closes when the last one ends.
func (g *generation) retire() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.retired {
		return
	}
	g.retired = true
	if g.refs == 0 {
		close(g.drained)
	}
}

// inflight returns the number of requests using the generation.
func (g *generation) inflight() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.refs
}

// chatRoute returns the scope that serves a chat model and its client.
func (g *generation) chatRoute(model string) (string, chatScope, bool) {
	scope, ok := g.Routes[model]
	if !ok {
		scope = g.DefaultScope
	}
	c, ok := g.chat[scope]
	return scope, c, ok && scope != ""
}

// embedRoute returns the scope and client that serve an embeddings model.
func (g *generation) embedRoute(model string) (string, Embedder, bool) {
	scope, ok := g.EmbedRoutes[model]
	if !ok {
		scope = g.DefaultEmbedScope
	}
	c, ok := g.Embedders[scope]
	return scope, c, ok && scope != ""
}

// clients returns the generation's clients, chat then embeddings, each
// once.
func (g *generation) clients() []io.Closer {
	var out []io.Closer
	for _, scope := range slices.Sorted(maps.Keys(g.Clients)) {
		out = appendNew(out, g.Clients[scope])
	}
	for _, scope := range slices.Sorted(maps.Keys(g.Embedders)) {
		out = appendNew(out, g.Embedders[scope])
	}
	return out
}

// appendNew appends c to cs unless cs holds it already.
func appendNew(cs []io.Closer, c io.Closer) []io.Closer {
	if shareable(c) && slices.Contains(cs, c) {
		return cs
	}
	return append(cs, c)
}

// shareable reports whether c can be told apart by ==, as a client that
// generations share must be; any other (a value holding a map, say) is
// its generation's own, since == on it would panic.
func shareable(c io.Closer) bool { return reflect.ValueOf(c).Comparable() }

// chatScopes returns the chat scopes, sorted.
func (g *generation) chatScopes() []string { return slices.Sorted(maps.Keys(g.chat)) }
