package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/polygateway/polygateway/core"
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
func configError(key, problem string) *config.Error { return &config.Error{Key: key, Problem: problem} }

// keyReader reads the server keys of an environment and records which,
// so a test can hold them to the key table, and the problems found.
type keyReader struct {
	env  map[string]string
	read map[string]bool
	errs []*config.Error
}

// get parses the value of k into the field dst points to, by k's row of
// the key table (config.ReadKey), and reports whether k is set.
func (r *keyReader) get(k string, dst any) bool {
	r.read[k] = true
	set, err := config.ReadKey(r.env, k, dst)
	r.fail(err)
	return set
}

func (r *keyReader) fail(err *config.Error) {
	if err != nil {
		r.errs = append(r.errs, err)
	}
}

// parseServerConfig reads the PGW_* server keys of env, each by its row of
// the key table: unset keys take their defaults; the error names every bad
// key. Every PGW_* and flat LLM_* key of env must be known to the library
// or the gateway (one table holds both; see config.CheckKeys).
func parseServerConfig(env map[string]string) (serverConfig, error) {
	sc, err := readServerConfig(&keyReader{env: env, read: map[string]bool{}})
	if err != nil {
		return sc, err
	}
	return sc, nil
}

func readServerConfig(r *keyReader) (serverConfig, *config.Error) {
	var sc serverConfig
	var ce *config.Error
	if err := config.CheckKeys(r.env); errors.As(err, &ce) {
		r.fail(ce)
	}
	// PGW_CLIENT_KEY is the example client's key; alone it is most likely a
	// misspelt PGW_CLIENT_KEYS, which would leave the gateway open.
	if _, one := r.env["PGW_CLIENT_KEY"]; one {
		if _, keys := r.env["PGW_CLIENT_KEYS"]; !keys {
			r.fail(configError("PGW_CLIENT_KEY", "is read by the example client, not the gateway (did you mean PGW_CLIENT_KEYS?); set PGW_CLIENT_KEYS, or unset this key"))
		}
	}
	sc.addr, sc.adminAddr = readAddr(r, "PGW_LISTEN_ADDR", defaultAddr), readAddr(r, "PGW_ADMIN_ADDR", "")
	sc.routing = readRouting(r)
	p := &sc.proxy
	var clientKeys, logLevel string
	var budgetWindow int
	r.get("PGW_STREAM_COMMIT", &p.StreamCommit)
	p.AdminToken, p.MetricsToken = readToken(r, "PGW_ADMIN_TOKEN", "the admin endpoints off"), readToken(r, "PGW_METRICS_TOKEN", "/metrics open")
	r.get("PGW_CLIENT_KEYS", &clientKeys)
	for k := range strings.SplitSeq(clientKeys, ",") {
		if k = strings.TrimSpace(k); k != "" {
			p.ClientKeys = append(p.ClientKeys, k)
		}
	}
	p.ClientPriorities = readPriorities(r)
	r.get("PGW_CLIENT_BUDGET_USD", &p.ClientBudget.USD)
	windowSet := r.get("PGW_CLIENT_BUDGET_WINDOW_S", &budgetWindow)
	for _, f := range []struct {
		key string
		dst any
	}{
		{"PGW_CLIENT_RATE", &p.ClientRate}, {"PGW_CLIENT_BURST", &p.ClientBurst}, {"PGW_CLIENT_ID_RATE", &p.ClientIDRate},
		{"PGW_CLIENT_ID_BURST", &p.ClientIDBurst}, {"PGW_CLIENT_MAX", &p.MaxClients}, {"PGW_MAX_IN_FLIGHT", &p.MaxInFlight},
		{"PGW_MAX_BODY_BYTES", &p.MaxBodyBytes}, {"PGW_MAX_BUFFERED_BODY_BYTES", &p.MaxBufferedBodyBytes},
		{"PGW_READ_HEADER_TIMEOUT_S", &p.ReadHeaderTimeout}, {"PGW_READ_TIMEOUT_S", &p.ReadTimeout}, {"PGW_WRITE_TIMEOUT_S", &p.WriteTimeout},
		{"PGW_IDLE_TIMEOUT_S", &p.IdleTimeout}, {"PGW_DRAIN_TIMEOUT_S", &sc.drainTimeout}, {"PGW_METRICS", &sc.metrics},
		{"PGW_LOG_LEVEL", &logLevel}, {"PGW_LOG_FORMAT", &sc.logFormat},
		{"PGW_REQUEST_TIMEOUT_S", &p.RequestTimeout}, {"PGW_SHARED_CACHE", &p.SharedCache},
	} {
		r.get(f.key, f.dst)
	}
	_ = sc.logLevel.UnmarshalText([]byte(logLevel)) // one of the table's values
	if mb := p.MaxBufferedBodyBytes; mb > 0 && mb < cmp.Or(p.MaxBodyBytes, proxy.DefaultMaxBodyBytes) {
		r.fail(configError("PGW_MAX_BUFFERED_BODY_BYTES", fmt.Sprintf("%d is smaller than the body limit PGW_MAX_BODY_BYTES (%d)",
			mb, cmp.Or(p.MaxBodyBytes, proxy.DefaultMaxBodyBytes))))
	}
	switch b := &p.ClientBudget; {
	case b.USD > 0 && len(p.ClientKeys) == 0:
		r.fail(configError("PGW_CLIENT_BUDGET_USD", "is a budget per client key: needs PGW_CLIENT_KEYS (an X-Client-Id is the client's own claim)"))
	case b.USD == 0 && windowSet:
		r.fail(configError("PGW_CLIENT_BUDGET_WINDOW_S", "is set without PGW_CLIENT_BUDGET_USD"))
	case b.USD > config.MaxBudgetUSD:
		r.fail(configError("PGW_CLIENT_BUDGET_USD", fmt.Sprintf("invalid value %s: out of range; expected at most %g USD",
			strconv.FormatFloat(b.USD, 'f', -1, 64), float64(config.MaxBudgetUSD))))
	case b.USD > 0 && b.USD*1e6 < 1:
		r.fail(configError("PGW_CLIENT_BUDGET_USD", "below one micro-USD"))
	case b.USD > 0:
		w, werr := config.WholeSeconds("PGW_CLIENT_BUDGET_WINDOW_S", budgetWindow)
		if werr != nil {
			r.fail(werr)
		}
		b.Window = w
	}
	if p.ClientIDRate > 0 && (len(p.ClientKeys) == 0 || p.ClientRate == 0) {
		r.fail(configError("PGW_CLIENT_ID_RATE", "sub-divides the rate of a client key: needs PGW_CLIENT_KEYS and PGW_CLIENT_RATE"))
	}
	return sc, config.Join(r.errs...)
}

// readAddr reads a listen address, host:port as net.Listen takes it (the
// port a number or a service name); def when key is unset. The host is not
// resolved here: the listener does that at start.
func readAddr(r *keyReader, key, def string) string {
	var v string
	if !r.get(key, &v) {
		return def
	}
	if v == "" {
		if def == "" {
			return "" // off, as unset
		}
		r.fail(configError(key, "empty value; expected host:port (remove the key to use the default "+def+")"))
		return def
	}
	_, port, err := net.SplitHostPort(v)
	if err == nil {
		_, err = net.LookupPort("tcp", port)
	}
	if err != nil {
		r.fail(configError(key, fmt.Sprintf("invalid value %q: expected host:port with a port 0-65535 or a service name (e.g. 127.0.0.1:8400, or :8400 for every interface)", v)))
		return def
	}
	return v
}

// readToken reads a bearer token: unset is off, set it must not be empty
// (an empty value, say from a secret that was not delivered, would leave
// open what the operator meant to close). It is never shown.
func readToken(r *keyReader, key, unset string) string {
	var v string
	if r.get(key, &v) && v == "" {
		r.fail(configError(key, "empty value; expected a non-empty token (remove the key to leave "+unset+")"))
	}
	return v
}

// readPriorities reads PGW_CLIENT_PRIORITIES, "key-<digest id>=priority,…":
// each key declared once, each priority one of the names (which keys the
// ids must name is checked with the keys, by proxy.Validate).
func readPriorities(r *keyReader) map[string]core.Priority {
	const key = "PGW_CLIENT_PRIORITIES"
	var v string
	if !r.get(key, &v) {
		return nil
	}
	out := map[string]core.Priority{}
	for item := range strings.SplitSeq(v, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		id, name, ok := strings.Cut(item, "=")
		id, name = strings.TrimSpace(id), strings.TrimSpace(name)
		p, err := core.ParsePriority(name)
		_, dup := out[id]
		switch {
		case !ok || !proxy.IsKeyID(id):
			// Not quoted: an operator may have written a key itself.
			r.fail(configError(key, "an entry is not key-<digest id>=priority (key- and the first 12 hex digits of the key's SHA-256; the entry is not shown)"))
		case err != nil:
			r.fail(configError(key, fmt.Sprintf("%s: %q is not a priority (interactive, normal or batch)", id, name)))
		case dup:
			r.fail(configError(key, fmt.Sprintf("%s is declared twice", id)))
		default:
			out[id] = p
		}
	}
	return out
}

// defaultAddr is PGW_LISTEN_ADDR's default.
const defaultAddr = "127.0.0.1:8400"

// readRouting reads PGW_ROUTES, PGW_DEFAULT_SCOPE, PGW_EMBED_ROUTES and
// PGW_DEFAULT_EMBED_SCOPE. Scopes are upper-cased, as the library's keys are.
func readRouting(rd *keyReader) routing {
	var r routing
	var routes, embedRoutes string
	rd.get("PGW_ROUTES", &routes)
	rd.get("PGW_EMBED_ROUTES", &embedRoutes)
	r.routes = parseRoutes(rd, "PGW_ROUTES", routes)
	r.embedRoutes = parseRoutes(rd, "PGW_EMBED_ROUTES", embedRoutes)
	rd.get("PGW_DEFAULT_SCOPE", &r.defaultScope)
	rd.get("PGW_DEFAULT_EMBED_SCOPE", &r.defaultEmbedScope)
	r.defaultScope, r.defaultEmbedScope = strings.ToUpper(r.defaultScope), strings.ToUpper(r.defaultEmbedScope)
	if len(r.routes) == 0 && r.defaultScope == "" && len(r.embedRoutes) == 0 && r.defaultEmbedScope == "" {
		rd.fail(configError("PGW_ROUTES", "nothing to serve: set PGW_ROUTES (e.g. gpt-4o=LLM,fast=FAST) and/or PGW_DEFAULT_SCOPE"))
	}
	return r
}

// parseRoutes parses "model=SCOPE,model2=SCOPE2".
func parseRoutes(rd *keyReader, key, v string) map[string]string {
	out := map[string]string{}
	for item := range strings.SplitSeq(v, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		model, scope, ok := strings.Cut(item, "=")
		model, scope = strings.TrimSpace(model), strings.ToUpper(strings.TrimSpace(scope))
		switch prev, dup := out[model]; {
		case !ok || model == "" || scope == "":
			rd.fail(configError(key, fmt.Sprintf("%q: want model=SCOPE", item)))
		case dup && prev != scope:
			rd.fail(configError(key, fmt.Sprintf("model %q is routed twice", model)))
		default:
			out[model] = scope
		}
	}
	return out
}

// unroutable returns the problems of the routes and defaults of r that name
// a scope env has no keys of, each with the nearest scope that has.
func (r routing) unroutable(env map[string]string) []routeProblem {
	have := config.Scopes(env)
	var out []routeProblem
	check := func(key, model, scope string) {
		if slices.Contains(have, scope) {
			return
		}
		p := routeProblem{key: key, model: model, problem: fmt.Sprintf("scope %s has no keys (no %s__…)", scope, scope)}
		if model != "" {
			p.problem = fmt.Sprintf("route %s=%s: %s", model, scope, p.problem)
		}
		if best := config.Suggest(scope, have); best != "" {
			p.problem += " (did you mean " + best + "?)"
		} else if len(have) > 0 {
			p.problem += "; the scopes configured are " + strings.Join(have, ", ")
		}
		out = append(out, p)
	}
	for _, rs := range []struct {
		key    string
		routes map[string]string
		def    string
		defKey string
	}{{"PGW_ROUTES", r.routes, r.defaultScope, "PGW_DEFAULT_SCOPE"}, {"PGW_EMBED_ROUTES", r.embedRoutes, r.defaultEmbedScope, "PGW_DEFAULT_EMBED_SCOPE"}} {
		for _, model := range slices.Sorted(maps.Keys(rs.routes)) {
			check(rs.key, model, rs.routes[model])
		}
		if rs.def != "" {
			check(rs.defKey, "", rs.def)
		}
	}
	return out
}

// routeProblem is a route (or a default scope: model "") to a scope
// without keys.
type routeProblem struct {
	key, model, problem string
}
