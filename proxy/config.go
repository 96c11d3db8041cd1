package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/embed"
)

// Stream commit policies (Config.StreamCommit).
const (
	// CommitFirstToken relays every delta to the client as it arrives. Until
	// the first byte is sent a failed attempt fails over invisibly; after it a
	// failure ends the client's stream with an error event and no [DONE].
	CommitFirstToken = "first_token"
	// CommitBuffer holds the whole answer until the governed call has
	// succeeded, so that even a late cut can fail over; the client then
	// receives the complete answer as SSE.
	CommitBuffer = "buffer"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxBodyBytes      = 8 << 20
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultMaxClients        = 10000
)

// Embedder is what the server needs of an embeddings client of one scope;
// *embed.Client implements it.
type Embedder interface {
	Embed(ctx context.Context, texts []string, opts ...polygateway.CallOption) (*embed.Response, error)
	Sources(ctx context.Context) []polygateway.SourceStatus
	ResetSource(ctx context.Context, source string) error
	Close() error
}

// Backends is one generation of routes and clients. The server serves from
// exactly one generation at a time; Server.Swap replaces it atomically while
// calls already running finish on the generation they started on.
//
// The server owns the clients it is given: it closes them when they are
// replaced (once their in-flight calls have drained) and at Shutdown. A
// client that appears in both the old and the new generation is kept open.
type Backends struct {
	// Clients maps a scope (upper case, e.g. "LLM") to its chat client.
	Clients map[string]*polygateway.GatewayClient
	// Embedders maps a scope to its embeddings client.
	Embedders map[string]Embedder
	// Routes maps a chat model name, as clients send it in "model", to a
	// scope of Clients, e.g. {"gpt-4o": "LLM", "fast": "FAST"}. Each source of
	// the scope replaces the name with its own MODEL upstream.
	Routes map[string]string
	// EmbedRoutes maps an embeddings model name to a scope of Embedders.
	EmbedRoutes map[string]string
	// DefaultScope serves chat models that Routes does not name; empty means
	// such requests get 404 model_not_found.
	DefaultScope string
	// DefaultEmbedScope serves embeddings models that EmbedRoutes does not
	// name; empty means 404 model_not_found.
	DefaultEmbedScope string
}

// validate checks that every route and default names a configured client.
func (b *Backends) validate() error {
	if len(b.Clients) == 0 && len(b.Embedders) == 0 {
		return errors.New("proxy: no clients configured")
	}
	for scope, c := range b.Clients {
		if c == nil {
			return fmt.Errorf("proxy: chat client of scope %q is nil", scope)
		}
	}
	for scope, c := range b.Embedders {
		if c == nil {
			return fmt.Errorf("proxy: embeddings client of scope %q is nil", scope)
		}
	}
	for _, model := range slices.Sorted(maps.Keys(b.Routes)) {
		if strings.TrimSpace(model) == "" {
			return errors.New("proxy: route with an empty model name")
		}
		if _, ok := b.Clients[b.Routes[model]]; !ok {
			return fmt.Errorf("proxy: route %s=%s names a scope without a chat client", model, b.Routes[model])
		}
	}
	for _, model := range slices.Sorted(maps.Keys(b.EmbedRoutes)) {
		if strings.TrimSpace(model) == "" {
			return errors.New("proxy: embeddings route with an empty model name")
		}
		if _, ok := b.Embedders[b.EmbedRoutes[model]]; !ok {
			return fmt.Errorf("proxy: embeddings route %s=%s names a scope without an embeddings client", model, b.EmbedRoutes[model])
		}
	}
	if b.DefaultScope != "" {
		if _, ok := b.Clients[b.DefaultScope]; !ok {
			return fmt.Errorf("proxy: default scope %q has no chat client", b.DefaultScope)
		}
	}
	if b.DefaultEmbedScope != "" {
		if _, ok := b.Embedders[b.DefaultEmbedScope]; !ok {
			return fmt.Errorf("proxy: default embeddings scope %q has no embeddings client", b.DefaultEmbedScope)
		}
	}
	return nil
}

// Config configures a Server. The zero value of every field other than
// Backends is a documented default.
type Config struct {
	// Backends holds the routes and clients of the first generation.
	Backends

	// StreamCommit is the commit policy of streamed answers:
	// CommitFirstToken (default, "") or CommitBuffer.
	StreamCommit string

	// MaxBodyBytes caps request bodies (default 8 MiB); larger ones get 413.
	MaxBodyBytes int64

	// ClientRate is the per-client token bucket's refill rate in requests
	// per second; 0 turns per-client limiting off. Clients are keyed by the
	// X-Client-Id header, else by the peer IP address.
	ClientRate float64
	// ClientBurst is the bucket size (default: max(1, ceil(ClientRate))).
	ClientBurst int
	// MaxClients bounds the number of buckets kept (default 10000); idle
	// full buckets are evicted first.
	MaxClients int

	// MaxInFlight caps the governed calls (chat and embeddings) served at
	// once; beyond it a request is refused at once with 503
	// server_overloaded and Retry-After: 1 (load shedding instead of an
	// unbounded queue). 0 means no cap.
	MaxInFlight int

	// ClientKeys, when non-empty, are the API keys clients must present as
	// "Authorization: Bearer <key>" on /v1/ endpoints (401 otherwise). Only
	// their SHA-256 digests are kept; comparison is constant-time.
	ClientKeys []string

	// AdminToken guards POST /admin/breakers/{source}/reset (bearer token,
	// constant-time compare). Empty disables the admin endpoints (404).
	AdminToken string

	// Metrics, when set, is served at GET /metrics (e.g. a Prometheus
	// handler).
	Metrics http.Handler

	// WriteTimeout bounds every single write to a client (default 30 s): a
	// client that stops reading a stream for longer is dropped and its
	// governed call cancelled. It is set per write, so long streams are fine.
	WriteTimeout time.Duration
	// ReadHeaderTimeout, ReadTimeout, IdleTimeout and MaxHeaderBytes are
	// applied by HTTPServer (defaults 10 s, 60 s, 120 s, 64 KiB). The read
	// deadline is lifted once a request body has been read, so it never cuts
	// a long answer.
	ReadHeaderTimeout, ReadTimeout, IdleTimeout time.Duration
	MaxHeaderBytes                              int

	// Logger receives one line per request and operational events (default:
	// slog.Default()). API keys and tokens are never logged.
	Logger *slog.Logger

	// Now is the clock of the per-client limiter (default time.Now); for
	// tests.
	Now func() time.Time
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() (Config, error) {
	switch c.StreamCommit {
	case "":
		c.StreamCommit = CommitFirstToken
	case CommitFirstToken, CommitBuffer:
	default:
		return c, fmt.Errorf("proxy: StreamCommit %q: want %q or %q", c.StreamCommit, CommitFirstToken, CommitBuffer)
	}
	if c.MaxBodyBytes <= 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.ClientRate < 0 || c.ClientBurst < 0 || c.MaxClients < 0 || c.MaxInFlight < 0 {
		return c, errors.New("proxy: ClientRate, ClientBurst, MaxClients and MaxInFlight must not be negative")
	}
	if c.ClientRate > 0 && c.ClientBurst == 0 {
		c.ClientBurst = max(1, int(c.ClientRate+0.999999))
	}
	if c.MaxClients == 0 {
		c.MaxClients = DefaultMaxClients
	}
	if c.WriteTimeout <= 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.ReadHeaderTimeout <= 0 {
		c.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	if c.ReadTimeout <= 0 {
		c.ReadTimeout = DefaultReadTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.MaxHeaderBytes <= 0 {
		c.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	for _, k := range c.ClientKeys {
		if k == "" {
			return c, errors.New("proxy: empty client key")
		}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}
