package proxy

import (
	"context"
	"crypto/sha256"
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
	// DefaultMaxBufferedBodyBytes is the default of MaxBufferedBodyBytes
	// (raised to MaxBodyBytes when that is larger): eight bodies of the
	// default maximum size, or thousands of ordinary ones.
	DefaultMaxBufferedBodyBytes = 64 << 20
	// DefaultRequestTimeout is the default of RequestTimeout: ten minutes,
	// room for a long reasoning answer with a failover, while a request
	// whose client never hangs up still ends.
	DefaultRequestTimeout = 600 * time.Second
)

// Embedder is what the server needs of an embeddings client of one scope;
// *embed.Client implements it. An Embedder that also has a
// Config() embed.Config method (as *embed.Client does) bounds the input
// arrays the server decodes for it by its MaxInputs; any other by
// embed.DefaultMaxInputs.
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
	// MaxBufferedBodyBytes caps the bytes held in memory at once,
	// server-wide, for request bodies and upstream answers together
	// (default DefaultMaxBufferedBodyBytes, 64 MiB, or MaxBodyBytes when
	// that is larger; a smaller explicit value is an error). A request takes
	// its share before its body is read — its declared Content-Length, or
	// for a chunked body growing steps as it is read — and gives it back
	// when its answer is complete. A request whose share does not fit is
	// refused at once with 503 server_overloaded and Retry-After: 1, before
	// the rest of its body is read; it does not wait. It is the
	// core.MemoryBudget of every call: an upstream answer (a body, a
	// stream's text) that does not fit ends its call the same way, unread.
	MaxBufferedBodyBytes int64

	// ClientRate is the per-client token bucket's refill rate in requests
	// per second; 0 turns per-client limiting off. Without ClientKeys,
	// clients are keyed by the X-Client-Id header, else by the peer IP
	// address. With ClientKeys, the client is the authenticated key: every
	// key has a bucket of its own that is never evicted, and X-Client-Id
	// only sub-divides a key (see ClientIDRate), so a key's requests stay
	// within ClientRate whatever ids it sends.
	ClientRate float64
	// ClientBurst is the bucket size (default: max(1, ceil(ClientRate))).
	ClientBurst int
	// MaxClients bounds the number of buckets kept (default 10000); idle
	// full buckets are evicted first. With ClientKeys it bounds the
	// X-Client-Id buckets: each key keeps at most
	// max(1, MaxClients/len(ClientKeys)) of its own, and evicting them
	// never touches another key's buckets.
	MaxClients int
	// ClientIDRate, with ClientKeys and ClientRate, gives each X-Client-Id
	// of a key a bucket of its own at this rate (requests per second): a
	// request then needs a token from its key's bucket and from its id's
	// bucket. 0 (default) means ids do not sub-divide keys.
	ClientIDRate float64
	// ClientIDBurst is the size of an id's bucket (default:
	// max(1, ceil(ClientIDRate))).
	ClientIDBurst int

	// MaxInFlight caps the chat and embeddings requests served at once,
	// counted from before their body is read until their answer is
	// complete; beyond it a request is refused at once, unread, with 503
	// server_overloaded and Retry-After: 1 (load shedding instead of an
	// unbounded queue). 0 means no cap. A client uploading slowly holds its
	// place (and its share of MaxBufferedBodyBytes) for at most ReadTimeout.
	MaxInFlight int

	// ClientKeys, when non-empty, are the API keys clients must present as
	// "Authorization: Bearer <key>" on /v1/ endpoints (401 otherwise). Only
	// their SHA-256 digests are kept; comparison is constant-time. The key
	// is checked, and the per-client limit applied, before a body is read.
	ClientKeys []string
	// ClientBudget is each client key's spend budget (see ClientBudget);
	// it needs ClientKeys, and every chat scope needs prices and a limiter
	// that keeps budgets. A refused call gets 429 budget_exhausted with
	// Retry-After (the window's end).
	ClientBudget ClientBudget
	// ClientPriorities sets the default priority of client keys' calls,
	// by the key's digest id ("key-" and the first 12 hex digits of the
	// key's SHA-256, as budgets and metrics name it — never the key):
	// {"key-0123456789ab": polygateway.PriorityBatch}. A request's
	// X-PolyGateway-Priority header overrides it; a key without an entry
	// defaults to PriorityNormal (the default, nil, sets none). Every
	// entry must name a key of ClientKeys. The tenant of a keyed request is
	// its key's digest id (see docs/server.md).
	ClientPriorities map[string]polygateway.Priority

	// AdminToken guards POST /admin/breakers/{source}/reset (bearer token,
	// constant-time compare). Empty disables the admin endpoints (404). It
	// also opens /metrics and the /readyz details, as MetricsToken does, and
	// is the only token that sees the sources' base URLs in /v1/providers.
	AdminToken string

	// MetricsToken, when set, is the bearer token GET /metrics requires
	// (401 otherwise; the AdminToken is accepted too). Empty leaves
	// /metrics open. The details of GET /readyz (draining, the scopes that
	// are not ready and every source's availability) are shown only to a
	// request carrying MetricsToken or AdminToken; without one — or when
	// neither is configured — /readyz answers only {"ready": true|false}.
	MetricsToken string

	// Metrics, when set, is served at GET /metrics (e.g. a Prometheus
	// handler).
	Metrics http.Handler
	// Observer, when set, is told how every request ended and why a
	// request was refused before governance (the metrics package's
	// Gateway implements it).
	Observer RequestObserver

	// RequestTimeout is the deadline of every chat and embeddings request,
	// counted from its admission (default DefaultRequestTimeout, 600 s): the
	// governed call is cancelled when it passes, and the client gets 504
	// timeout (or, mid-stream, an error event). A client may ask for a
	// shorter deadline with the X-PolyGateway-Timeout header (seconds); a
	// longer one is clamped to RequestTimeout.
	RequestTimeout time.Duration

	// SharedCache, with ClientKeys and a response cache, lets every client
	// key be answered from the answers cached for any other key. The default
	// (false) keeps each key's cached answers its own: the cache namespace
	// of a call carries the key's digest id (never the key), so a tenant can
	// neither read another's answer nor learn that another sent a prompt.
	SharedCache bool

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

// Validate checks cfg as New does, without serving anything: its values,
// its Backends (every route and default names a client) and, with client
// budgets, what they need of every chat scope (a price for every source's
// model, a limiter that keeps budgets), and that every ClientPriorities
// entry names a client key and a priority. The error names every problem
// found. The gateway command runs it on every configuration it reads, for
// -check, at start and at every reload.
func Validate(cfg Config) error {
	c, err := cfg.withDefaults()
	if err != nil {
		return err
	}
	var hashes [][sha256.Size]byte
	for _, k := range c.ClientKeys {
		hashes = append(hashes, sha256.Sum256([]byte(k)))
	}
	budgets, berr := c.keyBudgets(hashes)
	_, perr := c.keyPriorities(hashes)
	return errors.Join(c.validate(), berr, perr, checkBudgets(budgets, &c.Backends))
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
	switch {
	case c.MaxBufferedBodyBytes < 0:
		return c, errors.New("proxy: MaxBufferedBodyBytes must not be negative")
	case c.MaxBufferedBodyBytes == 0:
		c.MaxBufferedBodyBytes = max(DefaultMaxBufferedBodyBytes, c.MaxBodyBytes)
	case c.MaxBufferedBodyBytes < c.MaxBodyBytes:
		return c, fmt.Errorf("proxy: MaxBufferedBodyBytes %d is smaller than MaxBodyBytes %d: a body of the maximum size could never be read",
			c.MaxBufferedBodyBytes, c.MaxBodyBytes)
	}
	if c.ClientRate < 0 || c.ClientBurst < 0 || c.MaxClients < 0 || c.MaxInFlight < 0 || c.ClientIDRate < 0 || c.ClientIDBurst < 0 {
		return c, errors.New("proxy: ClientRate, ClientBurst, ClientIDRate, ClientIDBurst, MaxClients and MaxInFlight must not be negative")
	}
	if c.ClientRate > 0 && c.ClientBurst == 0 {
		c.ClientBurst = max(1, int(c.ClientRate+0.999999))
	}
	if c.ClientIDRate > 0 {
		if len(c.ClientKeys) == 0 || c.ClientRate == 0 {
			return c, errors.New("proxy: ClientIDRate sub-divides the rate of a client key: it needs ClientKeys and ClientRate")
		}
		if c.ClientIDBurst == 0 {
			c.ClientIDBurst = max(1, int(c.ClientIDRate+0.999999))
		}
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
	switch {
	case c.RequestTimeout < 0:
		return c, errors.New("proxy: RequestTimeout must not be negative")
	case c.RequestTimeout == 0:
		c.RequestTimeout = DefaultRequestTimeout
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
