package polygateway

import (
	"context"
	"fmt"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/internal/kernel"
	"github.com/polygateway/polygateway/transport"
)

// GatewayClient makes governed chat calls for one scope. It is safe for
// concurrent use; make one per scope and process, and Close it at shutdown.
type GatewayClient struct {
	k       *kernel.Client
	schemas schemaCache
}

// FromEnv assembles the client of scope from the .env file and the process
// environment (the environment wins), or from WithEnv's map only.
func FromEnv(scope string, opts ...Option) (*GatewayClient, error) {
	o := collect(opts)
	env, err := o.environment()
	if err != nil {
		return nil, err
	}
	s, err := LoadSettings(scope, env)
	if err != nil {
		return nil, err
	}
	return assemble(s, o)
}

// FromSettings assembles a client from already parsed settings. The
// settings are copied, and validated as LoadSettings validates what it
// parses: settings that break an invariant (a TPM gate without EST_TOKENS,
// a TIMEOUT_S beyond PGW_LEASE_TTL_S, a TTFT timeout not below TIMEOUT_S,
// …) are refused with the *ConfigError LoadSettings gives for the same
// values, naming the key of the offending value. Settings made by hand may
// leave optional values at zero; the config reference
// (docs/configuration.md, "Settings made by hand") lists what each zero
// means.
func FromSettings(s GatewaySettings, opts ...Option) (*GatewayClient, error) {
	return assemble(s, collect(opts))
}

func assemble(s GatewaySettings, o *options) (*GatewayClient, error) {
	k, err := kernel.Assemble(s, o.kernel())
	if err != nil {
		return nil, err
	}
	return &GatewayClient{k: k}, nil
}

// environment returns the keys FromEnv reads.
func (o *options) environment() (map[string]string, error) {
	if o.envSet {
		return o.env, nil
	}
	path, explicit := ".env", false
	if o.dotenvSet {
		path, explicit = o.dotenv, true
	}
	return config.ReadEnv(path, explicit)
}

// Chat makes one governed chat call.
func (c *GatewayClient) Chat(ctx context.Context, msgs []Message, opts ...CallOption) (*LLMResponse, error) {
	if len(msgs) == 0 {
		return nil, &RequestRejectedError{Code: "empty_messages", Message: "no messages to send"}
	}
	co := resolveCall(opts)
	if co.jsonMode {
		return c.chatStructured(ctx, msgs, co, nil, "")
	}
	resp, err := c.k.Handle(ctx, c.newCall(msgs, co))
	return resp, err
}

// newCall builds the core call of a chat.
func (c *GatewayClient) newCall(msgs []Message, co callOptions) *core.Call {
	return &core.Call{
		ID:             kernel.NewCallID(),
		Scope:          c.k.Settings().Scope,
		Messages:       msgs,
		Params:         co.params,
		Stream:         co.stream,
		SessionID:      co.sessionID,
		ParentCallID:   co.parentCallID,
		CacheSalt:      co.cacheSalt,
		CacheNamespace: co.cacheNamespace,
		Fallback:       co.fallback,
		Events:         co.events,
		Budgets:        co.budgets,
		NoPushbackWait: co.noPushbackWait,
		Place:          co.place,
	}
}

// FallbackFunc is the last step of the degradation chain: called when no
// source produced an answer (GatewayUnavailableError, GovernanceBackendError,
// or a TransientError/SourceDeadError with a budget of one attempt) and no
// stale cache entry could stand in — never for a rejected request, an
// invalid result or a cancellation. Its answer is returned marked Degraded
// (DegradedBy "fallback") and recorded in telemetry as such; an error from
// it is ignored and the original error returned.
type FallbackFunc = func(ctx context.Context, msgs []Message, cause error) (*LLMResponse, error)

// NewCallID returns a fresh random call id (128-bit hex), as used for
// telemetry rows.
func NewCallID() string { return kernel.NewCallID() }

// Sources reports every source's breaker state, in-flight count, health and
// limits. It never includes API keys.
func (c *GatewayClient) Sources(ctx context.Context) []SourceStatus {
	return c.k.Sources(ctx)
}

// ResetSource closes the breaker of the named source at once and clears its
// local health history: the operators' emergency key after fixing a source.
func (c *GatewayClient) ResetSource(ctx context.Context, source string) error {
	if source == "" {
		return &UnknownSourceError{Scope: c.k.Settings().Scope}
	}
	return c.k.Reset(ctx, source)
}

// ResetAllSources closes the breaker of every source of the scope and
// clears their local health history. It tries every source and returns the
// first failure. A switched-off source stays off.
func (c *GatewayClient) ResetAllSources(ctx context.Context) error {
	return c.k.Reset(ctx, "")
}

// DisableSource switches the named source off at runtime: no request goes
// to it until EnableSource, from this client and, with a shared breaker
// backend (Redis), from every process using it (they see it within a
// second). Its circuit's state and history are kept. A call whose sources
// are all off fails with a GatewayUnavailableError of reason disabled.
func (c *GatewayClient) DisableSource(ctx context.Context, source string) error {
	return c.k.SetEnabled(ctx, source, false)
}

// EnableSource switches a source DisableSource switched off on again.
func (c *GatewayClient) EnableSource(ctx context.Context, source string) error {
	return c.k.SetEnabled(ctx, source, true)
}

// Budgets reports the current window of the scope's spend budget
// ({SCOPE}__BUDGET__USD): its limit, what is spent (settled costs plus the
// reservations of calls in flight, across every process on a shared
// backend) and when the window ends. Nil without a budget.
func (c *GatewayClient) Budgets(ctx context.Context) ([]BudgetUsage, error) {
	return c.k.Budgets(ctx)
}

// Settings returns a copy of the client's settings with API keys redacted.
func (c *GatewayClient) Settings() GatewaySettings {
	s := *c.k.Settings()
	s.Sources = append([]SourceConfig(nil), s.Sources...)
	for i := range s.Sources {
		if s.Sources[i].APIKey != "" {
			s.Sources[i].APIKey = "***"
		}
	}
	return s
}

// Close releases connections and the backends the client created (not
// those given through options); queued telemetry is flushed. It is
// idempotent; calls after Close fail with ErrClientClosed.
func (c *GatewayClient) Close() error { return c.k.Close() }

// Closed reports whether Close was called.
func (c *GatewayClient) Closed() bool { return c.k.Closed() }

// ErrClientClosed is returned by calls on a closed client.
var ErrClientClosed = kernel.ErrClosed

// DefaultProfiles returns a fresh copy of the built-in provider profiles.
func DefaultProfiles() map[string]ProviderProfile { return transport.DefaultProfiles() }

func init() {
	kernel.Resolve = func(opts any) kernel.Options {
		os, _ := opts.([]Option)
		return collect(os).kernel()
	}
	kernel.ResolveCall = func(opts any) kernel.CallOptions {
		os, _ := opts.([]CallOption)
		return resolveCall(os).kernel()
	}
	kernel.Unwrap = func(gw any) (*kernel.Client, error) {
		c, ok := gw.(*GatewayClient)
		if !ok || c == nil {
			return nil, fmt.Errorf("%w: not a *GatewayClient (%T)", core.ErrGateway, gw)
		}
		return c.k, nil
	}
}
