package embed

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/transport"
)

// Client is the EmbeddingClient of one scope. It is safe for concurrent
// use; make one per scope and process, and Close it at shutdown.
type Client struct {
	gw     *polygateway.GatewayClient
	cfg    Config
	scope  string
	closed atomic.Bool
}

// FromEnv assembles the embedding client of scope from the .env file and
// the process environment (the environment wins), or from WithEnv's map
// only — exactly as polygateway.FromEnv does, with the same options (a
// polygateway.WithUpstream among them replaces the embeddings protocol,
// which tests may use). The response cache is always off. The scope must
// set {SCOPE}__BATCH_SIZE; see the package documentation for the other
// keys.
func FromEnv(scope string, opts ...polygateway.Option) (*Client, error) {
	up := &upstream{}
	gw, err := polygateway.FromEnv(scope, withEmbedding(opts, up)...)
	if err != nil {
		return nil, err
	}
	return finish(gw, up)
}

// FromSettings assembles an embedding client from already parsed settings
// (their Extra map holds BATCH_SIZE and the other embedding keys, without
// the "{SCOPE}__" prefix). The settings are copied.
func FromSettings(s polygateway.GatewaySettings, opts ...polygateway.Option) (*Client, error) {
	up := &upstream{}
	gw, err := polygateway.FromSettings(s, withEmbedding(opts, up)...)
	if err != nil {
		return nil, err
	}
	return finish(gw, up)
}

// withEmbedding appends the options that put the embedding protocol under
// the client's governance and turn the response cache off.
func withEmbedding(opts []polygateway.Option, up *upstream) []polygateway.Option {
	return append(slices.Clip(opts),
		polygateway.WithUpstreamFrom(func(t *transport.Client) polygateway.Upstream {
			up.t = t
			return up
		}),
		polygateway.WithoutCache(),
	)
}

// finish reads the embedding keys and completes the client; bad keys
// close the inner client.
func finish(gw *polygateway.GatewayClient, up *upstream) (*Client, error) {
	s := gw.Settings()
	cfg, err := parseConfig(s.Scope, s.Extra)
	if err != nil {
		_ = gw.Close()
		return nil, err
	}
	up.normalize, up.format = cfg.Normalize, cfg.EncodingFormat
	return &Client{gw: gw, cfg: cfg, scope: s.Scope}, nil
}

// Config returns the client's embedding configuration.
func (c *Client) Config() Config { return c.cfg }

// Scope returns the client's scope name (upper case).
func (c *Client) Scope() string { return c.scope }

// Sources reports every source's breaker state, in-flight count, health
// and limits, as polygateway.GatewayClient.Sources does.
func (c *Client) Sources(ctx context.Context) []polygateway.SourceStatus {
	return c.gw.Sources(ctx)
}

// ResetSource closes the breaker of the named source at once and clears
// its local health history.
func (c *Client) ResetSource(ctx context.Context, source string) error {
	return c.gw.ResetSource(ctx, source)
}

// Close releases connections and the backends the client created. It is
// idempotent; calls after Close fail with polygateway.ErrClientClosed.
func (c *Client) Close() error {
	c.closed.Store(true)
	return c.gw.Close()
}
