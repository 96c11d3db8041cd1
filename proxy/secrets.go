package proxy

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// masked replaces a secret wherever a Config prints.
const masked = "***"

// configFields is Config without its methods, for printing.
type configFields Config

// masked returns a copy of c with ClientKeys and AdminToken masked (the
// caller's slice is not modified).
func (c Config) masked() configFields {
	if c.ClientKeys != nil {
		keys := make([]string, len(c.ClientKeys))
		for i := range keys {
			keys[i] = masked
		}
		c.ClientKeys = keys
	}
	if c.AdminToken != "" {
		c.AdminToken = masked
	}
	return configFields(c)
}

// String prints the config as %+v would, with the client keys and the
// admin token masked.
func (c Config) String() string { return fmt.Sprintf("%+v", c.masked()) }

// GoString prints the config as %#v would, with its secrets masked.
func (c Config) GoString() string {
	return "proxy.Config" + strings.TrimPrefix(fmt.Sprintf("%#v", c.masked()), "proxy.configFields")
}

// Format prints the config with its secrets masked for every verb.
func (c Config) Format(f fmt.State, verb rune) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = fmt.Fprint(f, c.GoString())
	case verb == 'q':
		_, _ = fmt.Fprint(f, strconv.Quote(c.String()))
	case verb == 'v' && f.Flag('+'):
		_, _ = fmt.Fprint(f, c.String())
	default:
		_, _ = fmt.Fprintf(f, "%v", c.masked())
	}
}

// LogValue is the config as a slog group, with its secrets masked.
func (c Config) LogValue() slog.Value {
	m := c.masked()
	return slog.GroupValue(
		slog.String("stream_commit", m.StreamCommit), slog.Int64("max_body_bytes", m.MaxBodyBytes),
		slog.Float64("client_rate", m.ClientRate), slog.Int("client_burst", m.ClientBurst), slog.Int("max_clients", m.MaxClients),
		slog.Int("max_in_flight", m.MaxInFlight), slog.Int("client_keys", len(m.ClientKeys)), slog.String("admin_token", m.AdminToken),
		slog.Duration("write_timeout", m.WriteTimeout), slog.Duration("read_header_timeout", m.ReadHeaderTimeout),
		slog.Duration("read_timeout", m.ReadTimeout), slog.Duration("idle_timeout", m.IdleTimeout), slog.Int("max_header_bytes", m.MaxHeaderBytes),
		slog.Duration("request_timeout", m.RequestTimeout), slog.Bool("shared_cache", m.SharedCache),
		slog.Any("routes", m.Routes), slog.Any("embed_routes", m.EmbedRoutes),
		slog.String("default_scope", m.DefaultScope), slog.String("default_embed_scope", m.DefaultEmbedScope),
	)
}

// MarshalJSON encodes the config's settings with its secrets masked (a
// Config holds clients and handlers, which have no JSON form: they are
// left out).
func (c Config) MarshalJSON() ([]byte, error) {
	m := c.masked()
	return json.Marshal(map[string]any{
		"StreamCommit": m.StreamCommit, "MaxBodyBytes": m.MaxBodyBytes, "ClientRate": m.ClientRate,
		"ClientBurst": m.ClientBurst, "MaxClients": m.MaxClients, "MaxInFlight": m.MaxInFlight,
		"ClientKeys": m.ClientKeys, "AdminToken": m.AdminToken, "WriteTimeout": m.WriteTimeout,
		"ReadHeaderTimeout": m.ReadHeaderTimeout, "ReadTimeout": m.ReadTimeout, "IdleTimeout": m.IdleTimeout,
		"MaxHeaderBytes": m.MaxHeaderBytes, "Routes": m.Routes, "EmbedRoutes": m.EmbedRoutes,
		"DefaultScope": m.DefaultScope, "DefaultEmbedScope": m.DefaultEmbedScope,
		"RequestTimeout": m.RequestTimeout, "SharedCache": m.SharedCache,
	})
}
