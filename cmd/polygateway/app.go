package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/configfile"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/internal/config"
	"github.com/polygateway/polygateway/proxy"
)

// metricsHook is what the server needs of a metrics collector; the metrics
// package's Collector implements it (see metrics.go).
type metricsHook interface {
	Options() []polygateway.Option
	Watch(*polygateway.GatewayClient)
	Unwatch(*polygateway.GatewayClient)
	// WatchBudgets reads the client budgets at every scrape.
	WatchBudgets(func(context.Context) ([]polygateway.BudgetUsage, error))
	Handler() http.Handler
	// Observer counts the server's requests and refusals.
	Observer() proxy.RequestObserver
	// Reloaded counts a reload, applied or refused.
	Reloaded(applied bool)
}

// snapshot is one reading of the configuration: the flat keys (from the
// environment, or translated from a config file) and how to word an error
// about them in the source's terms.
type snapshot struct {
	env map[string]string
	// explain rewrites a configuration error naming a key into one naming
	// the key's place in the source (a config file's path); the identity
	// for the environment.
	explain func(error) error
	// name says where a key is set, for logs (a path, or the key itself).
	name func(key string) string
	// route words a route to a scope without keys in the source's terms:
	// the key, or the file, line and path of the route.
	route func(routeProblem) error
}

// configSource reads the configuration, afresh at every call.
type configSource func() (snapshot, error)

// envSource reads the configuration from the environment (read returns
// the .env file overlaid by the process environment).
func envSource(read func() (map[string]string, error)) configSource {
	return func() (snapshot, error) {
		env, err := read()
		if err != nil {
			return snapshot{}, err
		}
		route := func(p routeProblem) error { return configError(p.key, p.problem) }
		return snapshot{env: env, explain: func(err error) error { return err }, name: func(k string) string { return k }, route: route}, nil
	}
}

// dotEnvLines is src, an environment source, whose route problems name the
// .env file at path and the line of the route's key when the file sets it
// and the process environment does not.
func dotEnvLines(src configSource, path string) configSource {
	return func() (snapshot, error) {
		snap, err := src()
		raw, rerr := os.ReadFile(path)
		if err != nil || rerr != nil {
			return snap, err
		}
		route := snap.route
		snap.route = func(p routeProblem) error {
			line := 0
			for i, l := range strings.Split(string(raw), "\n") {
				k, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(l), "export "), "=")
				if ok && strings.TrimSpace(k) == p.key {
					line = i + 1 // the last one counts, as for the parser
				}
			}
			if _, set := os.LookupEnv(p.key); line == 0 || set {
				return route(p)
			}
			return configError(p.key, fmt.Sprintf("%s (%s, line %d)", p.problem, path, line))
		}
		return snap, nil
	}
}

// fileSource reads the configuration from a config file; vars returns the
// variables its ${NAME}s are taken from (the .env file and the process
// environment).
func fileSource(path string, vars func() (map[string]string, error)) configSource {
	return func() (snapshot, error) {
		v, err := vars()
		if err != nil {
			return snapshot{}, err
		}
		cf, err := configfile.Load(path, configfile.WithVariables(v), configfile.WithoutScopeCheck())
		if err != nil {
			return snapshot{}, err
		}
		name := func(k string) string {
			if p, ok := cf.Path(k); ok {
				return p
			}
			return k
		}
		route := func(p routeProblem) error {
			if at, line, ok := cf.Route(p.key, p.model); ok {
				return configError(at, fmt.Sprintf("%s (%s, line %d)", p.problem, cf.Name(), line))
			}
			return configError(p.key, p.problem)
		}
		return snapshot{env: cf.Env(), explain: cf.Explain, name: name, route: route}, nil
	}
}

// app is one running gateway process: its configuration source, the
// state shared across reloads and the server.
type app struct {
	log     *slog.Logger
	source  configSource
	metrics metricsHook // nil without metrics
	// tracing is nil without tracing (see tracing.go).
	tracing *tracingHook

	// Memory governance backends live as long as the process, so that a
	// reload keeps breaker states, in-flight counts and cached answers, and
	// calls still running on the old clients count against the new ones'
	// limits. The limiter is made by the first build (limiterOnce), with
	// the queue settings of the first routed chat scope, in name order.
	limiterOnce sync.Once
	limiter     *memory.Limiter
	breaker     *memory.Breaker
	cache       *memory.Cache

	sc        serverConfig
	serverEnv map[string]string // the server keys the server started with
	srv       *proxy.Server
	hs        *http.Server

	mu      sync.Mutex // serialises reloads
	current proxy.Backends
	watched []*polygateway.GatewayClient
}

func newApp(log *slog.Logger, source configSource, m metricsHook) *app {
	return &app{
		log: log, source: source, metrics: m,
		breaker: memory.NewBreaker(), cache: memory.NewCache(),
	}
}

// load reads the configuration and parses the server keys; errors are in
// the source's terms.
func (a *app) load() (snapshot, serverConfig, error) {
	snap, err := a.source()
	if err != nil {
		return snap, serverConfig{}, err
	}
	sc, err := parseServerConfig(snap.env)
	if err != nil {
		return snap, sc, snap.explain(err)
	}
	return snap, sc, nil
}

// prepared is a configuration read, built and checked as the server takes
// it.
type prepared struct {
	snap snapshot
	sc   serverConfig
	cfg  proxy.Config // sc.proxy with the clients built
}

// prepare reads the configuration, builds the client of every routed scope
// and checks the whole as the server takes it (proxy.Validate): the one
// validation of -check, start and reload, which therefore refuse the same
// configurations with the same messages. The error lists every problem
// found (server keys, routes to scopes without keys, every scope's keys,
// what the server needs of the clients), in the source's terms. On error
// the clients built are closed.
func (a *app) prepare() (prepared, error) {
	snap, err := a.source()
	if err != nil {
		return prepared{}, err
	}
	var errs []error
	sc, err := parseServerConfig(snap.env)
	if err != nil {
		errs = append(errs, snap.explain(err))
	}
	for _, p := range sc.routing.unroutable(snap.env) {
		errs = append(errs, snap.route(p))
	}
	b, err := a.build(snap, sc.routing)
	if err != nil {
		errs = append(errs, err)
	}
	cfg := sc.proxy
	cfg.Backends = b
	if len(errs) == 0 {
		errs = append(errs, proxy.Validate(cfg))
	}
	if err := errors.Join(errs...); err != nil {
		closeBackends(b)
		return prepared{}, err
	}
	return prepared{snap: snap, sc: sc, cfg: cfg}, nil
}

// restartKeys are the server keys a reload does not apply (all but the
// routes).
var restartKeys = func() []string {
	var out []string
	for _, d := range config.Keys() {
		if d.Reader == config.ReaderGateway && !slices.Contains(routingKeys, d.Pattern) {
			out = append(out, d.Pattern)
		}
	}
	return out
}()

// routingKeys are the server keys a reload applies.
var routingKeys = []string{"PGW_ROUTES", "PGW_DEFAULT_SCOPE", "PGW_EMBED_ROUTES", "PGW_DEFAULT_EMBED_SCOPE"}

// serverKeys returns the values of the keys a reload does not apply.
func serverKeys(env map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range restartKeys {
		if v, ok := env[k]; ok {
			out[k] = v
		}
	}
	return out
}

// memLimiter returns the process's memory limiter, made on the first call
// with the admission queue settings (BACKPRESSURE__QUEUE_*) of the first
// of scopes whose settings load, the defaults when none does. It is shared
// by every scope and lives as long as the process: a reload does not
// change its queue settings.
func (a *app) memLimiter(env map[string]string, scopes []string) *memory.Limiter {
	a.limiterOnce.Do(func() {
		var qc memory.QueueConfig
		for _, scope := range scopes {
			if s, err := polygateway.LoadSettings(scope, env); err == nil {
				qc = memory.QueueConfig{Share: s.Backpressure.QueueShare, ClaimTTL: s.Backpressure.QueueClaimTTL}
				break
			}
		}
		a.limiter = memory.NewLimiter(memory.WithQueue(qc))
	})
	return a.limiter
}

// clientOptions are the assembly options of every client built from env
// for the routed chat scopes.
func (a *app) clientOptions(env map[string]string, chatScopes []string) []polygateway.Option {
	opts := []polygateway.Option{polygateway.WithEnv(env), polygateway.WithLogger(a.log)}
	if env["PGW_LIMITER_BACKEND"] == "memory" {
		opts = append(opts, polygateway.WithLimiter(a.memLimiter(env, chatScopes)))
	}
	if env["PGW_BREAKER_BACKEND"] == "memory" {
		opts = append(opts, polygateway.WithBreaker(a.breaker))
	}
	if env["PGW_CACHE_BACKEND"] == "memory" {
		opts = append(opts, polygateway.WithCache(a.cache))
	}
	if a.metrics != nil {
		opts = append(opts, a.metrics.Options()...)
	}
	if a.tracing != nil {
		opts = append(opts, polygateway.WithTracer(a.tracing.tr))
	}
	return opts
}

// build assembles the clients of every routed scope the snapshot has keys
// of (routes to others are reported by prepare), every problem of every
// scope in the error. On error the clients already built are closed.
func (a *app) build(snap snapshot, r routing) (b proxy.Backends, err error) {
	env := snap.env
	b = proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{}, Embedders: map[string]proxy.Embedder{},
		Routes: r.routes, EmbedRoutes: r.embedRoutes, DefaultScope: r.defaultScope, DefaultEmbedScope: r.defaultEmbedScope,
	}
	opts, have := a.clientOptions(env, r.chatScopes()), config.Scopes(env)
	var errs []error
	for _, scope := range r.chatScopes() {
		if slices.Contains(have, scope) {
			c, cerr := polygateway.FromEnv(scope, opts...)
			if cerr != nil {
				errs = append(errs, fmt.Errorf("scope %s: %w", scope, snap.explain(cerr)))
				continue
			}
			b.Clients[scope] = c
		}
	}
	for _, scope := range r.embedScopes() {
		if slices.Contains(have, scope) {
			c, cerr := embed.FromEnv(scope, opts...)
			if cerr != nil {
				errs = append(errs, fmt.Errorf("embeddings scope %s: %w", scope, snap.explain(cerr)))
				continue
			}
			b.Embedders[scope] = c
		}
	}
	if err = errors.Join(errs...); err != nil {
		closeBackends(b)
	}
	return b, err
}

func closeBackends(b proxy.Backends) {
	for _, c := range b.Clients {
		_ = c.Close()
	}
	for _, e := range b.Embedders {
		_ = e.Close()
	}
}

// start reads the configuration, builds the clients and the server and
// starts listening. It returns once the listener is open.
func (a *app) start() (net.Addr, error) {
	p, err := a.prepare()
	if err != nil {
		return nil, err
	}
	sc, b, cfg := p.sc, p.cfg.Backends, p.cfg
	a.sc, a.serverEnv = sc, serverKeys(p.snap.env)
	cfg.Logger = a.log
	if a.metrics != nil && sc.metrics {
		cfg.Metrics, cfg.Observer = a.metrics.Handler(), a.metrics.Observer()
	}
	srv, err := proxy.New(cfg)
	if err != nil {
		closeBackends(b)
		return nil, err
	}
	a.srv = srv
	a.current = b
	if a.metrics != nil {
		a.metrics.WatchBudgets(srv.ClientBudgets)
	}
	a.watch(b)
	a.hs = srv.HTTPServer(sc.addr)
	if a.tracing != nil {
		a.hs.Handler = a.tracing.tr.Handler(a.hs.Handler) // calls continue the clients' traces
	}
	ln, err := net.Listen("tcp", sc.addr)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return nil, err
	}
	go func() {
		if err := a.hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Error("serve failed", slog.String("error", err.Error()))
		}
	}()
	a.log.Info("polygateway listening", slog.String("addr", ln.Addr().String()),
		slog.Any("chat_scopes", sc.routing.chatScopes()), slog.Any("embedding_scopes", sc.routing.embedScopes()),
		slog.String("stream_commit", cmp.Or(cfg.StreamCommit, proxy.CommitFirstToken)), slog.Bool("admin", cfg.AdminToken != ""),
		slog.Int("client_keys", len(cfg.ClientKeys)), slog.Float64("client_rate", cfg.ClientRate),
		slog.Bool("metrics", cfg.Metrics != nil), slog.Bool("metrics_token", cfg.MetricsToken != ""),
		slog.Duration("request_timeout", cmp.Or(cfg.RequestTimeout, proxy.DefaultRequestTimeout)), slog.Bool("shared_cache", cfg.SharedCache))
	warnIfOpen(a.log, ln.Addr(), cfg)
	return ln.Addr(), nil
}

// warnIfOpen logs one warning when the server listens beyond loopback with
// something open to anyone who reaches it: the API without client keys,
// /metrics without a metrics token.
func warnIfOpen(log *slog.Logger, addr net.Addr, cfg proxy.Config) {
	if ta, ok := addr.(*net.TCPAddr); ok && ta.IP.IsLoopback() {
		return
	}
	var open []string
	if len(cfg.ClientKeys) == 0 {
		open = append(open, "/v1/ (no PGW_CLIENT_KEYS)")
	}
	if cfg.Metrics != nil && cfg.MetricsToken == "" {
		open = append(open, "/metrics (no PGW_METRICS_TOKEN)")
	}
	if len(open) == 0 {
		return
	}
	log.Warn("listening beyond loopback with endpoints open to anyone who can reach it; set the keys named, or listen on 127.0.0.1 behind a proxy that authenticates",
		slog.String("addr", addr.String()), slog.Any("open", open))
}

// watch hands the new chat clients to the metrics collector and forgets
// the old ones.
func (a *app) watch(b proxy.Backends) {
	if a.metrics == nil {
		return
	}
	for _, c := range a.watched {
		a.metrics.Unwatch(c)
	}
	a.watched = a.watched[:0]
	for _, c := range b.Clients {
		a.metrics.Watch(c)
		a.watched = append(a.watched, c)
	}
}

// reload re-reads the configuration (the .env file and the environment,
// or the config file) and swaps in freshly built clients and routes. Calls
// in flight finish on the old clients, which are closed once drained.
// Server keys other than the routes (address, timeouts, tokens, rates) need
// a restart: a change to them is logged as such. On any error (the server
// keys included; see prepare) the server keeps serving its current
// configuration.
func (a *app) reload() (err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.metrics != nil {
		defer func() { a.metrics.Reloaded(err == nil) }()
	}
	p, err := a.prepare()
	if err != nil {
		return err
	}
	snap, r, b := p.snap, p.sc.routing, p.cfg.Backends
	if err := a.srv.Swap(b); err != nil {
		closeBackends(b)
		return err
	}
	a.current = b
	a.watch(b)
	a.log.Info("configuration reloaded", slog.Any("chat_scopes", r.chatScopes()), slog.Any("embedding_scopes", r.embedScopes()))
	next := serverKeys(snap.env)
	var changed []string
	for _, k := range restartKeys {
		if next[k] != a.serverEnv[k] {
			changed = append(changed, snap.name(k))
		}
	}
	if len(changed) > 0 {
		a.log.Warn("server keys changed; they take effect at the next restart", slog.Any("keys", changed))
	}
	return nil
}

// reloadLogged reloads and logs a failure; why says what asked for it.
func (a *app) reloadLogged(why string) {
	if err := a.reload(); err != nil {
		a.log.Error("reload failed; keeping the current configuration", slog.String("trigger", why), slog.String("error", err.Error()))
	}
}

// shutdown drains as a load balancer expects: at once /readyz answers 503
// and new requests get 503 with Retry-After, while the calls in flight
// (streams included) finish, for at most the drain timeout; the listener
// stays open meanwhile, so a request arriving during the drain is answered
// rather than refused, and closes once they have. What is left at the
// deadline is cancelled, and every client closed.
func (a *app) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.sc.drainTimeout)
	defer cancel()
	a.log.Info("shutting down", slog.Duration("drain_timeout", a.sc.drainTimeout), slog.Int("in_flight", a.srv.InFlight()))
	// Answers sent during the drain close their connections, so that
	// clients reconnect to another instance.
	a.hs.SetKeepAlivesEnabled(false)
	perr := a.srv.Shutdown(ctx)
	hctx := ctx
	if ctx.Err() != nil {
		// The drain ran out and the calls left were cancelled: their
		// handlers get a moment to send their last bytes (an error event).
		var hcancel context.CancelFunc
		hctx, hcancel = context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer hcancel()
	}
	herr := a.hs.Shutdown(hctx)
	if herr != nil {
		// Handlers that outlived the deadline were cancelled by the proxy;
		// drop whatever connections remain.
		_ = a.hs.Close()
	}
	return errors.Join(perr, herr)
}
