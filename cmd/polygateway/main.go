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
//	PGW_METRICS                serve /metrics (default true)
//	PGW_LOG_LEVEL              debug | info (default) | warn | error
//	PGW_LOG_FORMAT             json (default) | text
//
// Signals: SIGINT and SIGTERM drain in-flight calls and streams (at most
// PGW_DRAIN_TIMEOUT_S) and exit; SIGHUP re-reads the environment file and
// the routes and swaps in freshly built clients — in-flight calls finish on
// the old ones, and an invalid new configuration is logged and ignored.
// (The process environment of a running process does not change: edit the
// .env file to change sources.) Logs go to stderr through slog and never
// contain keys.
//
//	PGW_ADMIN_ADDR             opt-in admin listener serving net/http/pprof under
//	                           /debug/pprof/ (unset = none); keep it on loopback
//
// Flags: -env-file names the .env file (default ".env", optional unless
// given); -check validates the configuration, builds every client and exits;
// -version prints the build information (module version, Go version, VCS
// revision) and exits; -admin-addr overrides PGW_ADMIN_ADDR.
package main

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/polygateway/polygateway/internal/config"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("polygateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	envFile := fs.String("env-file", ".env", "the .env file to read (optional unless set)")
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

	boot := slog.New(slog.NewJSONHandler(stderr, nil)) // until PGW_LOG_* are read
	env, err := readEnv()
	if err != nil {
		boot.Error("reading the environment", slog.String("error", err.Error()))
		return 1
	}
	sc, err := parseServerConfig(env)
	if err != nil {
		boot.Error("configuration invalid", slog.String("error", err.Error()))
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
	a := newApp(log, readEnv, hook)
	if *check {
		b, err := a.build(env, sc.routing)
		if err != nil {
			log.Error("configuration invalid", slog.String("error", err.Error()))
			return 1
		}
		closeBackends(b)
		log.Info("configuration valid", slog.Any("chat_scopes", sc.routing.chatScopes()), slog.Any("embedding_scopes", sc.routing.embedScopes()))
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
		log.Error("start failed", slog.String("error", err.Error()))
		return 1
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	for sig := range sigs {
		if sig == syscall.SIGHUP {
			if err := a.reload(); err != nil {
				log.Error("reload failed; keeping the current configuration", slog.String("error", err.Error()))
			}
			continue
		}
		log.Info("signal received", slog.String("signal", sig.String()))
		break
	}
	if err := a.shutdown(context.Background()); err != nil {
		log.Warn("shutdown was not clean", slog.String("error", err.Error()))
		return 1
	}
	log.Info("stopped")
	return 0
}

// newLogger builds the process logger from PGW_LOG_LEVEL and PGW_LOG_FORMAT.
func newLogger(w io.Writer, sc serverConfig) *slog.Logger {
	opts := &slog.HandlerOptions{Level: sc.logLevel}
	if sc.logFormat == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}
