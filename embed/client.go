package embed

import (
	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Client is the EmbeddingClient of one scope. It is safe for concurrent
// use; make one per scope and process, and Close it at shutdown. Its Admin
// methods are the operators' controls of the scope's sources, as on
// polygateway.GatewayClient.
type Client struct {
	polygateway.Admin
	k     *kernel.Client
	up    *upstream
	cfg   Config
	scope string
}

// FromEnv assembles the embedding client of scope from the .env file and
// the process environment (the environment wins), or from WithEnv's map
// only — exactly as polygateway.FromEnv does, with the same options. The
// response cache is always off. The scope must set {SCOPE}__BATCH_SIZE;
// see the package documentation for the other keys.
func FromEnv(scope string, opts ...polygateway.Option) (*Client, error) {
	gc, err := polygateway.FromEnv(scope, withoutCache(opts)...)
	if err != nil {
		return nil, err
	}
	return finish(gc)
}

// FromSettings assembles an embedding client from already parsed settings
// (their Extra map holds BATCH_SIZE and the other embedding keys, without
// the "{SCOPE}__" prefix). The settings are copied.
func FromSettings(s polygateway.GatewaySettings, opts ...polygateway.Option) (*Client, error) {
	gc, err := polygateway.FromSettings(s, withoutCache(opts)...)
	if err != nil {
		return nil, err
	}
	return finish(gc)
}

// withoutCache returns opts with the response cache turned off:
// embeddings are never cached.
func withoutCache(opts []polygateway.Option) []polygateway.Option {
	return append(opts[:len(opts):len(opts)], func(o *kernel.Options) { o.NoCache = true })
}

// finish reads the embedding keys and completes the client on the
// scope's assembly; bad keys close it.
func finish(gc *polygateway.GatewayClient) (*Client, error) {
	k, err := kernel.Unwrap(gc)
	if err != nil {
		return nil, err
	}
	s := k.Settings()
	cfg, err := parseConfig(s.Scope, s.Extra)
	if err != nil {
		_ = k.Close()
		return nil, err
	}
	c := &Client{Admin: gc.Admin, k: k, cfg: cfg, scope: s.Scope}
	c.up = &upstream{t: k.Transport(), normalize: cfg.Normalize, format: cfg.EncodingFormat, check: c.check}
	return c, nil
}

// Config returns the client's embedding configuration.
func (c *Client) Config() Config { return c.cfg }

// Scope returns the client's scope name (upper case).
func (c *Client) Scope() string { return c.scope }
