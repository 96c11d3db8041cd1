package embed

import (
	"context"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/kernel"
)

// Client is the EmbeddingClient of one scope. It is safe for concurrent
// use; make one per scope and process, and Close it at shutdown.
type Client struct {
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
	k, err := kernel.FromEnv(scope, opts, noCache)
	if err != nil {
		return nil, err
	}
	return finish(k)
}

// FromSettings assembles an embedding client from already parsed settings
// (their Extra map holds BATCH_SIZE and the other embedding keys, without
// the "{SCOPE}__" prefix). The settings are copied.
func FromSettings(s polygateway.GatewaySettings, opts ...polygateway.Option) (*Client, error) {
	k, err := kernel.FromSettings(s, opts, noCache)
	if err != nil {
		return nil, err
	}
	return finish(k)
}

// noCache turns the response cache off: embeddings are never cached.
func noCache(o *kernel.Options) { o.NoCache = true }

// finish reads the embedding keys and completes the client; bad keys
// close the inner client.
func finish(k *kernel.Client) (*Client, error) {
	s := k.Settings()
	cfg, err := parseConfig(s.Scope, s.Extra)
	if err != nil {
		_ = k.Close()
		return nil, err
	}
	c := &Client{k: k, cfg: cfg, scope: s.Scope}
	c.up = &upstream{t: k.Transport(), normalize: cfg.Normalize, format: cfg.EncodingFormat, check: c.check}
	return c, nil
}

// Config returns the client's embedding configuration.
func (c *Client) Config() Config { return c.cfg }

// Scope returns the client's scope name (upper case).
func (c *Client) Scope() string { return c.scope }

// Sources reports every source's breaker state, in-flight count, health
// and limits, as polygateway.GatewayClient.Sources does.
func (c *Client) Sources(ctx context.Context) []polygateway.SourceStatus {
	in := c.k.Sources(ctx)
	out := make([]polygateway.SourceStatus, len(in))
	for i := range in {
		out[i] = polygateway.SourceStatus(in[i])
	}
	return out
}

// ResetSource closes the breaker of the named source at once and clears
// its local health history.
func (c *Client) ResetSource(ctx context.Context, source string) error {
	if source == "" {
		return &polygateway.UnknownSourceError{Scope: c.k.Settings().Scope}
	}
	return c.k.Reset(ctx, source)
}

// ResetAllSources closes every source's breaker (see
// polygateway.GatewayClient.ResetAllSources).
func (c *Client) ResetAllSources(ctx context.Context) error {
	return c.k.Reset(ctx, "")
}

// DisableSource switches a source off at runtime, shared through the
// breaker backend (see polygateway.GatewayClient.DisableSource).
func (c *Client) DisableSource(ctx context.Context, source string) error {
	return c.k.SetEnabled(ctx, source, false)
}

// EnableSource switches a source DisableSource switched off on again.
func (c *Client) EnableSource(ctx context.Context, source string) error {
	return c.k.SetEnabled(ctx, source, true)
}

// Budgets reports the current window of the scope's spend budget (see
// polygateway.GatewayClient.Budgets).
func (c *Client) Budgets(ctx context.Context) ([]polygateway.BudgetUsage, error) {
	out, err := c.k.Budgets(ctx)
	return out, err
}

// Close releases connections and the backends the client created. It is
// idempotent; calls after Close fail with polygateway.ErrClientClosed.
func (c *Client) Close() error { return c.k.Close() }
