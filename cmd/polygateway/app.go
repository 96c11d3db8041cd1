package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/embed"
	"github.com/polygateway/polygateway/proxy"
)

// metricsHook is what the server needs of a metrics collector; the metrics
// package's Collector implements it (see metrics.go).
type metricsHook interface {
	Options() []polygateway.Option
	Watch(*polygateway.GatewayClient)
	Unwatch(*polygateway.GatewayClient)
	Handler() http.Handler
}

// app is one running gateway process: its configuration source, the
// state shared across reloads and the server.
type app struct {
	log     *slog.Logger
	readEnv func() (map[string]string, error)
	metrics metricsHook // nil without metrics
	// tracing is nil without tracing (see tracing.go).
	tracing *tracingHook

	// Memory governance backends live as long as the process, so that a
	// reload keeps breaker states, in-flight counts and cached answers, and
	// calls still running on the old clients count against the new ones'
	// limits.
	limiter *memory.Limiter
	breaker *memory.Breaker
	cache   *memory.Cache

	sc  serverConfig
	srv *proxy.Server
	hs  *http.Server

	mu      sync.Mutex // serialises reloads
	watched []*polygateway.GatewayClient
}

func newApp(log *slog.Logger, readEnv func() (map[string]string, error), m metricsHook) *app {
	return &app{
		log: log, readEnv: readEnv, metrics: m,
		limiter: memory.NewLimiter(), breaker: memory.NewBreaker(), cache: memory.NewCache(),
	}
}

// clientOptions are the assembly options of every client built from env.
func (a *app) clientOptions(env map[string]string) []polygateway.Option {
	opts := []polygateway.Option{polygateway.WithEnv(env), polygateway.WithLogger(a.log)}
	if env["PGW_LIMITER_BACKEND"] == "memory" {
		opts = append(opts, polygateway.WithLimiter(a.limiter))
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

// build assembles the clients of every routed scope from env. On error the
// clients already built are closed.
func (a *app) build(env map[string]string, r routing) (b proxy.Backends, err error) {
	b = proxy.Backends{
		Clients: map[string]*polygateway.GatewayClient{}, Embedders: map[string]proxy.Embedder{},
		Routes: r.routes, EmbedRoutes: r.embedRoutes, DefaultScope: r.defaultScope, DefaultEmbedScope: r.defaultEmbedScope,
	}
	defer func() {
		if err != nil {
			closeBackends(b)
		}
	}()
	opts := a.clientOptions(env)
	for _, scope := range r.chatScopes() {
		c, cerr := polygateway.FromEnv(scope, opts...)
		if cerr != nil {
			return b, fmt.Errorf("scope %s: %w", scope, cerr)
		}
		b.Clients[scope] = c
	}
	for _, scope := range r.embedScopes() {
		c, cerr := embed.FromEnv(scope, opts...)
		if cerr != nil {
			return b, fmt.Errorf("embeddings scope %s: %w", scope, cerr)
		}
		b.Embedders[scope] = c
	}
	return b, nil
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
	env, err := a.readEnv()
	if err != nil {
		return nil, err
	}
	sc, err := parseServerConfig(env)
	if err != nil {
		return nil, err
	}
	a.sc = sc
	b, err := a.build(env, sc.routing)
	if err != nil {
		return nil, err
	}
	cfg := sc.proxy
	cfg.Backends, cfg.Logger = b, a.log
	if a.metrics != nil && sc.metrics {
		cfg.Metrics = a.metrics.Handler()
	}
	srv, err := proxy.New(cfg)
	if err != nil {
		closeBackends(b)
		return nil, err
	}
	a.srv = srv
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
		slog.Bool("metrics", cfg.Metrics != nil), slog.Bool("metrics_token", cfg.MetricsToken != ""))
	return ln.Addr(), nil
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

// reload re-reads the environment and the .env file and swaps in freshly
// built clients and routes. Calls in flight finish on the old clients,
// which are closed once drained. Server keys other than the routes
// (address, timeouts, tokens, rates) need a restart. On any error the
// server keeps serving its current configuration.
func (a *app) reload() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	env, err := a.readEnv()
	if err != nil {
		return err
	}
	r, err := parseRouting(env)
	if err != nil {
		return err
	}
	b, err := a.build(env, r)
	if err != nil {
		return err
	}
	if err := a.srv.Swap(b); err != nil {
		closeBackends(b)
		return err
	}
	a.watch(b)
	a.log.Info("configuration reloaded", slog.Any("chat_scopes", r.chatScopes()), slog.Any("embedding_scopes", r.embedScopes()))
	return nil
}

// shutdown stops accepting connections, drains in-flight calls (streams
// included) for at most the drain timeout, then cancels what is left and
// closes every client.
func (a *app) shutdown(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, a.sc.drainTimeout)
	defer cancel()
	a.log.Info("shutting down", slog.Duration("drain_timeout", a.sc.drainTimeout), slog.Int("in_flight", a.srv.InFlight()))
	// Both drains run at once: the proxy refuses new calls with 503 while
	// http.Server waits for the handlers of the running ones.
	errc := make(chan error, 1)
	go func() { errc <- a.srv.Shutdown(ctx) }()
	herr := a.hs.Shutdown(ctx)
	perr := <-errc
	if herr != nil {
		// Handlers that outlived the deadline were cancelled by the proxy;
		// drop whatever connections remain.
		_ = a.hs.Close()
	}
	return errors.Join(perr, herr)
}
