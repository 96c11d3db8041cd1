package core

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Masked replaces a secret wherever a config prints.
const Masked = "***"

// maskSecret masks a secret that is set; "none" (no key) stays readable.
func maskSecret(s string) string {
	if s == "" || strings.EqualFold(strings.TrimSpace(s), "none") {
		return s
	}
	return Masked
}

// maskURL masks the password of a URL's user info and every query value
// but api-version (where some providers' gateways take keys); text that
// does not parse as a URL with a scheme is masked whole when it looks
// like a key=value DSN with a password, else kept.
func maskURL(raw string) string {
	if raw == "" {
		return raw
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || u.Scheme == "" {
		return maskDSN(raw)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Masked)
		} else if u.Opaque == "" && u.Host != "" && strings.Contains(strings.ToLower(u.Scheme), "redis") {
			// A Redis address whose user info has no colon (secret@host):
			// the user info alone is the password.
			u.User = url.User(Masked)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			if !strings.EqualFold(k, "api-version") {
				q[k] = []string{Masked}
			}
		}
		u.RawQuery = q.Encode()
	}
	return strings.NewReplacer("%2A%2A%2A", Masked, "%2a%2a%2a", Masked).Replace(u.String())
}

// maskDSN masks the value of every password=… field of a key=value DSN
// ("host=db user=app password=secret").
func maskDSN(dsn string) string {
	fields := strings.Fields(dsn)
	changed := false
	for i, f := range fields {
		k, _, ok := strings.Cut(f, "=")
		if ok && strings.Contains(strings.ToLower(k), "password") {
			fields[i], changed = k+"="+Masked, true
		}
	}
	if !changed {
		return dsn
	}
	return strings.Join(fields, " ")
}

// secretName reports whether a configuration key names a secret.
func secretName(key string) bool {
	k := strings.ToUpper(key)
	for _, w := range [...]string{"KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "DSN", "CREDENTIAL", "AUTH"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// sourceConfigFields is SourceConfig without its methods, for printing.
type sourceConfigFields SourceConfig

// gatewaySettingsFields is GatewaySettings without its methods.
type gatewaySettingsFields GatewaySettings

// masked returns a copy of s whose secrets are masked.
func (s SourceConfig) masked() sourceConfigFields {
	s.APIKey = maskSecret(s.APIKey)
	s.BaseURL = maskURL(s.BaseURL)
	return sourceConfigFields(s)
}

// String prints the source's fields as %+v would, with APIKey (and any
// password or query value of BaseURL) masked.
func (s SourceConfig) String() string { return fmt.Sprintf("%+v", s.masked()) }

// GoString prints the source as %#v would, with its secrets masked.
func (s SourceConfig) GoString() string {
	return "core.SourceConfig" + strings.TrimPrefix(fmt.Sprintf("%#v", s.masked()), "core.sourceConfigFields")
}

// Format prints the source with its secrets masked for every verb: %v,
// %+v and %s show its fields, %#v its Go syntax, %q the quoted String.
func (s SourceConfig) Format(f fmt.State, verb rune) { format(f, verb, s.masked(), s.GoString) }

// LogValue is the source as a slog group, with its secrets masked.
func (s SourceConfig) LogValue() slog.Value {
	m := s.masked()
	attrs := []slog.Attr{
		slog.String("name", m.Name), slog.String("provider", m.Provider), slog.Int("index", m.Index),
		slog.String("base_url", m.BaseURL), slog.String("api_key", m.APIKey), slog.String("model", m.Model),
		slog.Duration("timeout", m.Timeout),
		slog.Int("max_concurrency", m.Limits.MaxConcurrency), slog.Int("rpm", m.Limits.RPM), slog.Int("tpm", m.Limits.TPM),
		slog.Int("priority", m.Priority), slog.Float64("weight", m.Weight),
	}
	if m.Region != "" {
		attrs = append(attrs, slog.String("region", m.Region))
	}
	return slog.GroupValue(attrs...)
}

// MarshalJSON encodes the source with its secrets masked, so that a JSON
// log handler (which encodes a slice or struct holding sources with
// encoding/json) never shows them. Sources are configuration, never
// serialized to be read back.
func (s SourceConfig) MarshalJSON() ([]byte, error) { return json.Marshal(s.masked()) }

// masked returns a copy of g whose secrets are masked: every source's,
// the Redis URL's and the telemetry DSN's passwords, and the values of
// Extra keys that name a secret (…KEY…, …TOKEN…, …SECRET…, …PASSWORD…,
// …DSN…, …AUTH…). The caller's slices and maps are not modified.
func (g GatewaySettings) masked() gatewaySettingsFields {
	g.Sources = slices.Clone(g.Sources)
	for i := range g.Sources {
		g.Sources[i].APIKey = maskSecret(g.Sources[i].APIKey)
		g.Sources[i].BaseURL = maskURL(g.Sources[i].BaseURL)
	}
	g.RedisURL = maskURL(g.RedisURL)
	g.TelemetryPGDSN = maskURL(g.TelemetryPGDSN)
	if g.Extra != nil {
		extra := make(map[string]string, len(g.Extra))
		for k, v := range g.Extra {
			if secretName(k) {
				v = maskSecret(v)
			}
			extra[k] = v
		}
		g.Extra = extra
	}
	return gatewaySettingsFields(g)
}

// String prints the settings as %+v would, with every secret masked.
func (g GatewaySettings) String() string { return fmt.Sprintf("%+v", g.masked()) }

// GoString prints the settings as %#v would, with every secret masked.
func (g GatewaySettings) GoString() string {
	return "core.GatewaySettings" + strings.TrimPrefix(fmt.Sprintf("%#v", g.masked()), "core.gatewaySettingsFields")
}

// Format prints the settings with every secret masked, for every verb.
func (g GatewaySettings) Format(f fmt.State, verb rune) { format(f, verb, g.masked(), g.GoString) }

// LogValue is the settings as a slog group, with every secret masked.
func (g GatewaySettings) LogValue() slog.Value {
	m := g.masked()
	sources := make([]slog.Attr, len(m.Sources))
	for i, s := range m.Sources {
		sources[i] = slog.Attr{Key: s.Name, Value: s.LogValue()}
	}
	extra := make([]slog.Attr, 0, len(m.Extra))
	for _, k := range slices.Sorted(maps.Keys(m.Extra)) {
		extra = append(extra, slog.String(k, m.Extra[k]))
	}
	return slog.GroupValue(
		slog.String("scope", m.Scope),
		slog.Attr{Key: "sources", Value: slog.GroupValue(sources...)},
		slog.Int("global_max_concurrency", m.Global.MaxConcurrency), slog.Int("global_rpm", m.Global.RPM), slog.Int("global_tpm", m.Global.TPM),
		slog.String("global_pool", m.GlobalPool), slog.String("selector", string(m.Selector)),
		slog.String("limiter_backend", m.LimiterBackend), slog.String("breaker_backend", m.BreakerBackend),
		slog.String("cache_backend", m.CacheBackend), slog.String("telemetry_backend", m.TelemetryBackend),
		slog.String("redis_url", m.RedisURL), slog.String("telemetry_pg_dsn", m.TelemetryPGDSN),
		slog.Attr{Key: "extra", Value: slog.GroupValue(extra...)},
	)
}

// MarshalJSON encodes the settings with every secret masked (see
// SourceConfig.MarshalJSON).
func (g GatewaySettings) MarshalJSON() ([]byte, error) { return json.Marshal(g.masked()) }

// format writes fields (a method-less copy with the secrets masked) for
// verb: %#v as goString returns it, %v and %s as %v, %+v as %+v, %q the
// quoted %+v text, any other verb as %v (never the raw fields).
func format(f fmt.State, verb rune, fields any, goString func() string) {
	switch {
	case verb == 'v' && f.Flag('#'):
		_, _ = fmt.Fprint(f, goString())
	case verb == 'v' && f.Flag('+'):
		_, _ = fmt.Fprintf(f, "%+v", fields)
	case verb == 'q':
		_, _ = fmt.Fprint(f, strconv.Quote(fmt.Sprintf("%+v", fields)))
	default:
		_, _ = fmt.Fprintf(f, "%v", fields)
	}
}
