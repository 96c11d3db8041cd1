package polygateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// env is a test configuration under construction.
type env map[string]string

// baseEnv returns the assembly keys with memory backends and no cache or
// telemetry, plus fast retry settings.
func baseEnv() env {
	return env{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__RETRY__BACKOFF_BASE_S": "0.05", "LLM__RETRY__BACKOFF_MAX_S": "0.2",
	}
}

// source adds source {provider}_{n} pointing at srv, with extra fields.
func (e env) source(provider string, n int, srv *fakeupstream.Server, fields ...string) env {
	p := fmt.Sprintf("LLM__%s__%d__", strings.ToUpper(provider), n)
	e[p+"BASE_URL"] = srv.URL()
	e[p+"API_KEY"] = "sk-test-" + provider
	e[p+"MODEL"] = provider + "-model"
	e[p+"TIMEOUT_S"] = "5"
	for i := 0; i+1 < len(fields); i += 2 {
		e[p+fields[i]] = fields[i+1]
	}
	return e
}

// set sets key=value pairs.
func (e env) set(kv ...string) env {
	for i := 0; i+1 < len(kv); i += 2 {
		e[kv[i]] = kv[i+1]
	}
	return e
}

// client assembles a client from e and closes it when the test ends.
func (e env) client(t testing.TB, opts ...polygateway.Option) *polygateway.GatewayClient {
	t.Helper()
	c, err := polygateway.FromEnv("LLM", append([]polygateway.Option{polygateway.WithEnv(e)}, opts...)...)
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ask makes one call with a short prompt.
func ask(t testing.TB, c *polygateway.GatewayClient, opts ...polygateway.CallOption) (*polygateway.LLMResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.Chat(ctx, []polygateway.Message{polygateway.User("hello")}, opts...)
}

// tokens returns the fake upstream's answer of n tokens.
func tokens(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "tok%d", i)
	}
	return b.String()
}
