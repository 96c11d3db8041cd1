package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/proxy"
)

// serverConfig is the server's own configuration, from PGW_* keys.
type serverConfig struct {
	addr         string
	adminAddr    string // PGW_ADMIN_ADDR: the pprof listener, off when empty
	drainTimeout time.Duration
	metrics      bool
	logLevel     slog.Level
	logFormat    string
	proxy        proxy.Config // everything but Backends, Metrics, Logger
	routing      routing
}

// routing is the reloadable part: which model goes to which scope.
type routing struct {
	routes, embedRoutes             map[string]string
	defaultScope, defaultEmbedScope string
}

// chatScopes and embedScopes list the scopes to build clients for.
func (r routing) chatScopes() []string  { return scopes(r.routes, r.defaultScope) }
func (r routing) embedScopes() []string { return scopes(r.embedRoutes, r.defaultEmbedScope) }

func scopes(routes map[string]string, def string) []string {
	out := []string{}
	for _, s := range routes {
		out = append(out, s)
	}
	if def != "" {
		out = append(out, def)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// configError is a bad server key: a *config.Error (polygateway.ConfigError),
// as the library's keys are, so that a config file can name its path.
func configError(key, problem string) error { return &config.Error{Key: key, Problem: problem} }

// keyReader reads the server keys of an environment and records which,
// so a test can hold them to the key table.
type keyReader struct {
	env  map[string]string
	read map[string]bool
}

// raw returns the value of k as set.
func (r *keyReader) raw(k string) (string, bool) {
	r.read[k] = true
	v, ok := r.env[k]
	return v, ok
}

// get returns the trimmed value of k and whether it is set and not empty.
func (r *keyReader) get(k string) (string, bool) {
	v, ok := r.raw(k)
	v = strings.TrimSpace(v)
	return v, ok && v != ""
}

// parseServerConfig reads the PGW_* server keys of env. Unset keys take
// their defaults; a bad value is an error naming the key. Every PGW_* and
// flat LLM_* key of env must be known to the library or the gateway (one
// table holds both; see config.CheckKeys).
func parseServerConfig(env map[string]string) (serverConfig, error) {
	return readServerConfig(&keyReader{env: env, read: map[string]bool{}})
}

func readServerConfig(r *keyReader) (serverConfig, error) {
	sc := serverConfig{addr: "127.0.0.1:8400", drainTimeout: 30 * time.Second, metrics: true, logFormat: "json"}
	if err := config.CheckKeys(r.env); err != nil {
		return sc, err
	}
	// PGW_CLIENT_KEY is the example client's key; alone it is most likely a
	// misspelt PGW_CLIENT_KEYS, which would leave the gateway open.
	if _, one := r.env["PGW_CLIENT_KEY"]; one {
		if _, keys := r.env["PGW_CLIENT_KEYS"]; !keys {
			return sc, configError("PGW_CLIENT_KEY", "is read by the example client, not the gateway (did you mean PGW_CLIENT_KEYS?); set PGW_CLIENT_KEYS, or unset this key")
		}
	}
	var err error
	get := r.get
	if v, ok := get("PGW_LISTEN_ADDR"); ok {
		sc.addr = v
	}
	if v, ok := get("PGW_ADMIN_ADDR"); ok {
		sc.adminAddr = v
	}
	if sc.routing, err = readRouting(r); err != nil {
		return sc, err
	}
	p := &sc.proxy
	if v, ok := get("PGW_STREAM_COMMIT"); ok {
		if v != proxy.CommitFirstToken && v != proxy.CommitBuffer {
			return sc, configError("PGW_STREAM_COMMIT", fmt.Sprintf("%q: want %s or %s", v, proxy.CommitFirstToken, proxy.CommitBuffer))
		}
		p.StreamCommit = v
	}
	p.AdminToken, _ = get("PGW_ADMIN_TOKEN")
	p.MetricsToken, _ = get("PGW_METRICS_TOKEN")
	if v, ok := get("PGW_CLIENT_KEYS"); ok {
		for k := range strings.SplitSeq(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				p.ClientKeys = append(p.ClientKeys, k)
			}
		}
	}
	floatKey := func(k string, dst *float64) error {
		if v, ok := get(k); ok {
			f, perr := strconv.ParseFloat(v, 64)
			if perr != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
				return configError(k, "want a number >= 0")
			}
			*dst = f
		}
		return nil
	}
	intKey := func(k string, dst *int) error {
		if v, ok := get(k); ok {
			n, perr := strconv.Atoi(v)
			if perr != nil || n < 0 {
				return configError(k, "want an integer >= 0")
			}
			*dst = n
		}
		return nil
	}
	secsKey := func(k string, dst *time.Duration) error {
		var f float64 = -1
		if err := floatKey(k, &f); err != nil {
			return err
		}
		if f >= 0 {
			if f == 0 {
				return configError(k, "want seconds > 0")
			}
			*dst = time.Duration(f * float64(time.Second))
		}
		return nil
	}
	var maxBody, maxBuffered, budgetWindow int
	for _, step := range []error{
		floatKey("PGW_CLIENT_BUDGET_USD", &p.ClientBudget.USD),
		intKey("PGW_CLIENT_BUDGET_WINDOW_S", &budgetWindow),
		floatKey("PGW_CLIENT_RATE", &p.ClientRate),
		intKey("PGW_CLIENT_BURST", &p.ClientBurst),
		floatKey("PGW_CLIENT_ID_RATE", &p.ClientIDRate),
		intKey("PGW_CLIENT_ID_BURST", &p.ClientIDBurst),
		intKey("PGW_CLIENT_MAX", &p.MaxClients),
		intKey("PGW_MAX_IN_FLIGHT", &p.MaxInFlight),
		intKey("PGW_MAX_BODY_BYTES", &maxBody),
		intKey("PGW_MAX_BUFFERED_BODY_BYTES", &maxBuffered),
		secsKey("PGW_READ_HEADER_TIMEOUT_S", &p.ReadHeaderTimeout),
		secsKey("PGW_READ_TIMEOUT_S", &p.ReadTimeout),
		secsKey("PGW_WRITE_TIMEOUT_S", &p.WriteTimeout),
		secsKey("PGW_IDLE_TIMEOUT_S", &p.IdleTimeout),
		secsKey("PGW_DRAIN_TIMEOUT_S", &sc.drainTimeout),
	} {
		if step != nil {
			return sc, step
		}
	}
	if err := readOperatorKeys(r, p); err != nil {
		return sc, err
	}
	p.MaxBodyBytes, p.MaxBufferedBodyBytes = int64(maxBody), int64(maxBuffered)
	if maxBuffered > 0 && int64(maxBuffered) < cmp.Or(p.MaxBodyBytes, proxy.DefaultMaxBodyBytes) {
		return sc, configError("PGW_MAX_BUFFERED_BODY_BYTES", fmt.Sprintf("%d is smaller than the body limit PGW_MAX_BODY_BYTES (%d)",
			maxBuffered, cmp.Or(p.MaxBodyBytes, proxy.DefaultMaxBodyBytes)))
	}
	switch b := &p.ClientBudget; {
	case b.USD > 0 && len(p.ClientKeys) == 0:
		return sc, configError("PGW_CLIENT_BUDGET_USD", "is a budget per client key: needs PGW_CLIENT_KEYS (an X-Client-Id is the client's own claim)")
	case b.USD == 0 && budgetWindow > 0:
		return sc, configError("PGW_CLIENT_BUDGET_WINDOW_S", "is set without PGW_CLIENT_BUDGET_USD")
	case b.USD > 0 && b.USD*1e6 < 1:
		return sc, configError("PGW_CLIENT_BUDGET_USD", "below one micro-USD")
	case budgetWindow > 0:
		b.Window = time.Duration(budgetWindow) * time.Second
	}
	if _, ok := get("PGW_CLIENT_BUDGET_WINDOW_S"); ok && budgetWindow == 0 {
		return sc, configError("PGW_CLIENT_BUDGET_WINDOW_S", "want an integer >= 1")
	}
	if p.ClientIDRate > 0 && (len(p.ClientKeys) == 0 || p.ClientRate == 0) {
		return sc, configError("PGW_CLIENT_ID_RATE", "sub-divides the rate of a client key: needs PGW_CLIENT_KEYS and PGW_CLIENT_RATE")
	}
	if v, ok := get("PGW_METRICS"); ok {
		b, perr := strconv.ParseBool(v)
		if perr != nil {
			return sc, configError("PGW_METRICS", "want true or false")
		}
		sc.metrics = b
	}
	if v, ok := get("PGW_LOG_LEVEL"); ok {
		if err := sc.logLevel.UnmarshalText([]byte(v)); err != nil {
			return sc, configError("PGW_LOG_LEVEL", "want debug, info, warn or error")
		}
	}
	if v, ok := get("PGW_LOG_FORMAT"); ok {
		if v != "json" && v != "text" {
			return sc, configError("PGW_LOG_FORMAT", "want json or text")
		}
		sc.logFormat = v
	}
	return sc, nil
}

// readRouting reads PGW_ROUTES, PGW_DEFAULT_SCOPE, PGW_EMBED_ROUTES and
// PGW_DEFAULT_EMBED_SCOPE. Scopes are upper-cased, as the library's keys are.
func readRouting(rd *keyReader) (routing, error) {
	var r routing
	var err error
	routes, _ := rd.raw("PGW_ROUTES")
	if r.routes, err = parseRoutes("PGW_ROUTES", routes); err != nil {
		return r, err
	}
	embedRoutes, _ := rd.raw("PGW_EMBED_ROUTES")
	if r.embedRoutes, err = parseRoutes("PGW_EMBED_ROUTES", embedRoutes); err != nil {
		return r, err
	}
	def, _ := rd.get("PGW_DEFAULT_SCOPE")
	embedDef, _ := rd.get("PGW_DEFAULT_EMBED_SCOPE")
	r.defaultScope, r.defaultEmbedScope = strings.ToUpper(def), strings.ToUpper(embedDef)
	if len(r.routes) == 0 && r.defaultScope == "" && len(r.embedRoutes) == 0 && r.defaultEmbedScope == "" {
		return r, configError("PGW_ROUTES", "nothing to serve: set PGW_ROUTES (e.g. gpt-4o=LLM,fast=FAST) and/or PGW_DEFAULT_SCOPE")
	}
	return r, nil
}

// parseRoutes parses "model=SCOPE,model2=SCOPE2".
func parseRoutes(key, v string) (map[string]string, error) {
	out := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, scope, ok := strings.Cut(item, "=")
		model, scope = strings.TrimSpace(model), strings.ToUpper(strings.TrimSpace(scope))
		if !ok || model == "" || scope == "" {
			return nil, configError(key, fmt.Sprintf("%q: want model=SCOPE", item))
		}
		if prev, dup := out[model]; dup && prev != scope {
			return nil, configError(key, fmt.Sprintf("model %q is routed twice", model))
		}
		out[model] = scope
	}
	return out, nil
}
