// Command polygateway serves the OpenAI-compatible gateway (package proxy)
// from the environment: every routed model becomes governed calls of the
// scope it names, configured by the library's usual keys
// ({SCOPE}__{PROVIDER}__{N}__{FIELD}, PGW_*_BACKEND, …) read from .env and
// the process environment (the environment wins).
//
//	PGW_ROUTES=gpt-4o=LLM,fast=FAST PGW_DEFAULT_SCOPE=LLM polygateway
//
// Server keys (all optional except that something must be routed):
//
//	PGW_LISTEN_ADDR            listen address (default 127.0.0.1:8400)
//	PGW_ROUTES                 chat routes model=SCOPE,… (reloadable)
//	PGW_DEFAULT_SCOPE          scope for chat models not in PGW_ROUTES (reloadable)
//	PGW_EMBED_ROUTES           embeddings routes model=SCOPE,… (reloadable)
//	PGW_DEFAULT_EMBED_SCOPE    scope for other embeddings models (reloadable)
//	PGW_STREAM_COMMIT          first_token (default) | buffer
//	PGW_ADMIN_TOKEN            bearer token of /admin/…; unset = admin endpoints off
//	PGW_METRICS_TOKEN          bearer token /metrics requires and /readyz details need
//	                           (the admin token works too); unset = /metrics open
//	PGW_CLIENT_KEYS            comma-separated client API keys; unset = no client auth
//	PGW_CLIENT_RATE            per-client requests per second (0/unset = off); with
//	                           client keys, per key
//	PGW_CLIENT_BURST           per-client burst (default ceil(rate))
//	PGW_CLIENT_ID_RATE         with client keys: requests per second of each X-Client-Id
//	                           within its key (0/unset = ids do not sub-divide keys)
//	PGW_CLIENT_ID_BURST        burst of each X-Client-Id within its key (default ceil(rate))
//	PGW_CLIENT_MAX             per-client buckets kept (default 10000; with keys, id
//	                           buckets, shared out evenly between the keys)
//	PGW_MAX_IN_FLIGHT          requests served at once, counted before their body is
//	                           read; beyond it 503 at once, unread (default 0 = no cap)
//	PGW_MAX_BODY_BYTES         request body limit (default 8 MiB)
//	PGW_MAX_BUFFERED_BODY_BYTES request body bytes held in memory at once (default
//	                           64 MiB or the body limit if larger); beyond it 503 at once
//	PGW_READ_HEADER_TIMEOUT_S  (default 10) PGW_READ_TIMEOUT_S (default 60, the request only)
//	PGW_WRITE_TIMEOUT_S        bound of every single write to a client (default 30)
//	PGW_IDLE_TIMEOUT_S         keep-alive idle timeout (default 120)
//	PGW_DRAIN_TIMEOUT_S        graceful-shutdown drain bound (default 30)
//	PGW_REQUEST_TIMEOUT_S      deadline of every chat and embeddings request (default
//	                           600); the most a client's X-PolyGateway-Timeout may ask
//	PGW_SHARED_CACHE           with client keys: share cached answers between keys
//	                           (default false: each key's are its own)
//	PGW_METRICS                serve /metrics (default true)
//	PGW_LOG_LEVEL              debug | info (default) | warn | error
//	PGW_LOG_FORMAT             json (default) | text
//
// Every PGW_* and flat LLM_* key must be known to the library or to the
// gateway (one key table holds both): an unknown one is an error with a
// suggestion (PGW_LISTEN_ADR: did you mean PGW_LISTEN_ADDR?). Keys of other
// software: PGW_X_…, or list them in PGW_ALLOW_KEYS.
//
// A config file replaces the keys: -config gateway.yaml reads the same
// settings from YAML (see docs/howto-config-file.md and the schema
// docs/polygateway.schema.json); ${NAME} in it is taken from the .env file
// and the environment, and errors name the file's path
// (scopes.LLM.sources[0].timeout_s). Without -config the environment is the
// configuration, as before.
//
// Tracing: with OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set, every call and upstream attempt
// is a span exported over OTLP/HTTP, configured by the other standard
// OTEL_* variables; a client's traceparent makes its calls part of its
// trace (see docs/server.md).
//
// Signals: SIGINT and SIGTERM drain in-flight calls and streams (at most
// PGW_DRAIN_TIMEOUT_S; /readyz and new requests answer 503 meanwhile, and
// the listener closes once the calls are done) and exit; SIGHUP re-reads the configuration (the
// environment file, or the config file) and swaps in freshly built clients
// and routes — in-flight calls finish on the old ones, which are closed once
// drained, and an invalid new configuration is logged and ignored. Server
// keys other than the routes need a restart (a change is logged). (The
// process environment of a running process does not change: edit the .env
// file or the config file.) With -config-poll 5s the config file is also
// reloaded when its modification time or size changes, looked at every 5s.
// Logs go to stderr through slog and never contain keys.
//
//	PGW_ADMIN_ADDR             opt-in admin listener serving net/http/pprof under
//	                           /debug/pprof/ (unset = none); keep it on loopback
//
// Flags: -env-file names the .env file (default ".env", optional unless
// given); -config names a YAML config file; -config-poll an interval (>= 1s)
// to watch it; -check validates the configuration, builds every client and
// exits; -version prints the build information (module version, Go
// version, VCS revision) and exits; -admin-addr overrides PGW_ADMIN_ADDR.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/polygateway/polygateway/internal/config"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, sigs))
}

// minPoll is the shortest -config-poll interval.
const minPoll = time.Second

// run is the command: it returns the exit code. -version writes to
// stdout, logs go to stderr; sigs delivers SIGHUP (reload), SIGINT and
// SIGTERM (drain and exit).
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	fs := flag.NewFlagSet("polygateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envFile := fs.String("env-file", ".env", "the .env file to read (optional unless set); with -config, the variables ${NAME} are taken from it and the environment")
	configPath := fs.String("config", "", "a YAML configuration file to read instead of the environment's keys (see docs/howto-config-file.md)")
	poll := fs.Duration("config-poll", 0, "with -config: check the file for changes this often (at least 1s) and reload when it changed; 0 = only on SIGHUP")
	check := fs.Bool("check", false, "validate the configuration, build every client and exit")
	version := fs.Bool("version", false, "print the build information and exit")
	adminAddr := fs.String("admin-addr", "", "serve pprof on this separate listener (overrides PGW_ADMIN_ADDR); never on the public one")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *version {
		printVersion(stdout)
		return 0
	}
	explicit := false
	fs.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "env-file" })
	readEnv := func() (map[string]string, error) { return config.ReadEnv(*envFile, explicit) }
	boot := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: durationsAsText})) // until PGW_LOG_* are read
	if *poll != 0 && (*configPath == "" || *poll < minPoll) {
		boot.Error("-config-poll needs -config and an interval of at least 1s", slog.Duration("config_poll", *poll))
		return 2
	}
	source, origin := envSource(readEnv), "environment"
	if *configPath != "" {
		source, origin = fileSource(*configPath, readEnv), *configPath
	}

	a := newApp(boot, source, nil)
	snap, sc, err := a.load()
	if err != nil {
		boot.Error("configuration invalid", slog.String("config", origin), slog.String("error", err.Error()))
		return 1
	}
	if *adminAddr != "" {
		sc.adminAddr = *adminAddr
	}
	log := newLogger(stderr, sc)
	var hook metricsHook
	if sc.metrics {
		if hook, err = newMetrics(); err != nil {
			log.Error("metrics", slog.String("error", err.Error()))
			return 1
		}
	}
	a = newApp(log, source, hook)
	// OTEL_* come from the .env file and the environment, with a config
	// file too.
	otelEnv, err := readEnv()
	if err != nil {
		log.Error("configuration invalid", slog.String("error", err.Error()))
		return 1
	}
	tracingOn, err := tracingEnabled(otelEnv)
	if err != nil {
		log.Error("configuration invalid", slog.String("error", err.Error()))
		return 1
	}
	if tracingOn && !*check {
		if a.tracing, err = newTracing(context.Background(), otelEnv, log); err != nil {
			log.Error("tracing", slog.String("error", err.Error()))
			return 1
		}
		defer a.flushTraces()
		log.Info("tracing on: spans are exported over OTLP/HTTP")
	}
	if *check {
		b, err := a.build(snap, sc.routing)
		if err != nil {
			log.Error("configuration invalid", slog.String("config", origin), slog.String("error", err.Error()))
			return 1
		}
		closeBackends(b)
		log.Info("configuration valid", slog.String("config", origin),
			slog.Any("chat_scopes", sc.routing.chatScopes()), slog.Any("embedding_scopes", sc.routing.embedScopes()))
		return 0
	}
	if sc.adminAddr != "" {
		admin, _, err := startAdmin(log, sc.adminAddr)
		if err != nil {
			log.Error("start failed", slog.String("error", err.Error()))
			return 1
		}
		defer admin.Close()
	}
	if _, err := a.start(); err != nil {
		log.Error("start failed", slog.String("config", origin), slog.String("error", err.Error()))
		return 1
	}
	ctx, stopWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		if *poll > 0 {
			watchFile(ctx, *configPath, *poll, func() { a.reloadLogged("file changed") })
		}
	}()
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			a.reloadLogged("SIGHUP")
			continue
		}
		log.Info("signal received", slog.String("signal", sig.String()))
		break
	}
	stopWatch()
	<-watched
	if err := a.shutdown(context.Background()); err != nil {
		log.Warn("shutdown was not clean", slog.String("error", err.Error()))
		return 1
	}
	log.Info("stopped")
	return 0
}

// watchFile calls changed whenever the file at path has a different
// modification time or size than at the previous look, looking every
// interval, until ctx ends. A file that cannot be read (an editor replacing
// it) is looked at again next time. One reload runs at a time: changed is
// called from this goroutine.
func watchFile(ctx context.Context, path string, interval time.Duration, changed func()) {
	type stamp struct {
		mod  time.Time
		size int64
	}
	look := func() (stamp, bool) {
		fi, err := os.Stat(path)
		if err != nil {
			return stamp{}, false
		}
		return stamp{fi.ModTime(), fi.Size()}, true
	}
	last, _ := look()
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, ok := look()
		if !ok || (now.mod.Equal(last.mod) && now.size == last.size) {
			continue
		}
		last = now
		changed()
	}
}

// newLogger builds the process logger from PGW_LOG_LEVEL and PGW_LOG_FORMAT.
// Durations read as durations ("1.5s"), in JSON too, whoever logs them.
func newLogger(w io.Writer, sc serverConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: sc.logLevel, ReplaceAttr: durationsAsText}
	if sc.logFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationsAsText renders a time.Duration attribute as its String ("250ms",
// "30s") instead of the integer nanoseconds the JSON handler writes.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}
