// Package testenv builds the configurations of clients that the module's
// tests assemble with FromEnv, and makes their calls. It is part of the
// tests' kit (internal/testkit) but apart from it: it imports the root
// package, which the tests of the packages the root is made of (the
// engine, the middleware, the transport, ...) cannot import.
package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
)

// Env is a configuration of the scope LLM under construction, the map a
// client is assembled from with polygateway.WithEnv. Its methods change it
// in place and return it, so that calls chain. An Env is not safe for
// concurrent writes.
type Env map[string]string

// Base returns the assembly keys with memory backends and no cache or
// telemetry, plus fast retry settings (a backoff of 0.05 s to 0.2 s).
func Base() Env {
	return Env{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__RETRY__BACKOFF_BASE_S": "0.05", "LLM__RETRY__BACKOFF_MAX_S": "0.2",
	}
}

// Source adds the source {provider}_{n} of the scope LLM at url (a base
// URL ending in /v1), with the API key sk-test-{provider}, the model
// {provider}-model, a timeout of 5 s and the extra fields given as
// name, value pairs (PRIORITY, "1", ...).
func (e Env) Source(provider string, n int, url string, fields ...string) Env {
	p := fmt.Sprintf("LLM__%s__%d__", strings.ToUpper(provider), n)
	e[p+"BASE_URL"] = url
	e[p+"API_KEY"] = "sk-test-" + provider
	e[p+"MODEL"] = provider + "-model"
	e[p+"TIMEOUT_S"] = "5"
	for i := 0; i+1 < len(fields); i += 2 {
		e[p+fields[i]] = fields[i+1]
	}
	return e
}

// Set sets the keys and values given as pairs.
func (e Env) Set(kv ...string) Env {
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i]] = kv[i+1]
	}
	return e
}

// Client assembles a client of the scope LLM from e (and opts) and closes
// it when the test ends; an assembly error fails the test.
func (e Env) Client(t testing.TB, opts ...polygateway.Option) *polygateway.GatewayClient {
	t.Helper()
	c, err := polygateway.FromEnv("LLM", append([]polygateway.Option{polygateway.WithEnv(e)}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Ask makes one call of c with the prompt "hello", given 30 s.
func Ask(t testing.TB, c *polygateway.GatewayClient, opts ...polygateway.CallOption) (*polygateway.LLMResponse, error) {
	t.Helper()
	return AskContext(context.Background(), t, c, opts...)
}

// AskContext is Ask under ctx: the call has 30 s or what is left of ctx,
// whichever is shorter.
func AskContext(ctx context.Context, t testing.TB, c *polygateway.GatewayClient, opts ...polygateway.CallOption) (*polygateway.LLMResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return c.Chat(ctx, []polygateway.Message{polygateway.User("hello")}, opts...)
}
