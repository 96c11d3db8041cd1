package polygateway

import (
	"context"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/kernel"
	"github.com/polygateway/polygateway/internal/transport"
)

// GatewayClient makes governed chat calls for one scope. It is safe for
// concurrent use; make one per scope and process, and Close it at shutdown.
// Its Admin methods (Sources, ResetSource, DisableSource, Budgets, …) are
// the operators' controls of the scope's sources.
type GatewayClient struct {
	Admin
	k       *kernel.Client
	schemas schemaCache
	// fallback is the scope's (WithFallback), which a structured call
	// takes only through its checks.
	fallback FallbackFunc
}

// FromEnv assembles the client of scope from the .env file and the process
// environment (the environment wins), or from WithEnv's map only.
func FromEnv(scope string, opts ...Option) (*GatewayClient, error) {
	o := kernel.Collect(opts)
	env, err := o.Environment()
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
	return assemble(s, kernel.Collect(opts))
}

func assemble(s GatewaySettings, o kernel.Options) (*GatewayClient, error) {
	k, err := kernel.Assemble(s, o)
	if err != nil {
		return nil, err
	}
	return &GatewayClient{Admin: Admin{k.Ref()}, k: k, fallback: o.Fallback}, nil
}

// Chat makes one governed chat call.
func (c *GatewayClient) Chat(ctx context.Context, msgs []Message, opts ...CallOption) (*LLMResponse, error) {
	if len(msgs) == 0 {
		return nil, &RequestRejectedError{Code: "empty_messages", Message: "no messages to send"}
	}
	co := kernel.ResolveCall(opts)
	if co.JSON {
		return c.chatStructured(ctx, msgs, co, nil, "")
	}
	return c.k.Handle(ctx, c.newCall(msgs, co))
}

// newCall returns the call the options shaped, with a fresh id, the
// client's scope and msgs.
func (c *GatewayClient) newCall(msgs []Message, co kernel.CallOptions) *core.Call {
	call := co.Call
	call.ID, call.Scope, call.Messages = kernel.NewCallID(), c.k.Settings().Scope, msgs
	return &call
}

// FallbackFunc is the scope's or a call's last-resort answer (WithFallback,
// WithCallFallback); go doc core.FallbackFunc says when it is called.
type FallbackFunc = core.FallbackFunc

// NewCallID returns a fresh random call id (128-bit hex), as used for
// telemetry rows.
func NewCallID() string { return kernel.NewCallID() }

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

// DefaultProfiles returns a fresh copy of the built-in provider profiles.
func DefaultProfiles() map[string]ProviderProfile { return transport.DefaultProfiles() }
