// Command polygateway serves the OpenAI-compatible gateway (package proxy)
// from the environment: every routed model becomes governed calls of the
// scope it names, configured by the library's usual keys
// ({SCOPE}__{PROVIDER}__{N}__{FIELD}, PGW_*_BACKEND, …) read from .env and
// the process environment (the environment wins).
//
//	PGW_ROUTES=gpt-4o=LLM,fast=FAST PGW_DEFAULT_SCOPE=LLM polygateway
//
// Server keys (PGW_LISTEN_ADDR, the routes, the client keys, rates and
// budgets, the body and time bounds, the tokens, logging and PGW_ADMIN_ADDR,
// a pprof listener to keep on loopback) are rows of the one key table, with
// their defaults: see docs/configuration.md, generated from it, and
// docs/server.md. Something must be routed.
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
// Flags: -env-file names the .env file (default ".env", optional unless
// given); -config names a YAML config file; -config-poll an interval (>= 1s)
// to watch it; -check validates the configuration, builds every client,
// checks them as start and reload do (one validation for the three, every
// problem reported at once) and exits; -version prints the build information (module version, Go
// version, VCS revision) and exits; -admin-addr overrides PGW_ADMIN_ADDR.
// Any other argument is refused (exit 2): the command takes flags only.
package main

import (
	"context"
	"flag"
	"fmt"
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

// flags are the command's flags.
type flags struct {
	envFile, configPath, adminAddr string
	poll                           time.Duration
	check, version                 bool
	// explicitEnv is true when -env-file was given.
	explicitEnv bool
}

// parseFlags reads args; false when they are invalid (the flag package has
// written why to stderr).
func parseFlags(args []string, stderr io.Writer) (flags, bool) {
	fs := flag.NewFlagSet("polygateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f flags
	fs.StringVar(&f.envFile, "env-file", ".env", "the .env file to read (optional unless set); with -config, the variables ${NAME} are taken from it and the environment")
	fs.StringVar(&f.configPath, "config", "", "a YAML configuration file to read instead of the environment's keys (see docs/howto-config-file.md)")
	fs.DurationVar(&f.poll, "config-poll", 0, "with -config: check the file for changes this often (at least 1s) and reload when it changed; 0 = only on SIGHUP")
	fs.BoolVar(&f.check, "check", false, "validate the configuration, build every client and exit")
	fs.BoolVar(&f.version, "version", false, "print the build information and exit")
	fs.StringVar(&f.adminAddr, "admin-addr", "", "serve pprof on this separate listener (overrides PGW_ADMIN_ADDR); never on the public one")
	if err := fs.Parse(args); err != nil {
		return f, false
	}
	if fs.NArg() > 0 {
		// Parsing stops at the first argument: the flags after it would be
		// ignored. Not shown: an argument may be anything, a key included.
		fmt.Fprintf(stderr, "polygateway: %d unexpected argument(s), not shown: the command takes flags only (e.g. -check, -config FILE); see -h\n", fs.NArg())
		return f, false
	}
	fs.Visit(func(fl *flag.Flag) { f.explicitEnv = f.explicitEnv || fl.Name == "env-file" })
	return f, true
}

// run is the command: it returns the exit code. -version writes to
// stdout, logs go to stderr; sigs delivers SIGHUP (reload), SIGINT and
// SIGTERM (drain and exit).
func run(args []string, stdout, stderr io.Writer, sigs <-chan os.Signal) int {
	f, ok := parseFlags(args, stderr)
	if !ok {
		return 2
	}
	if f.version {
		printVersion(stdout)
		return 0
	}
	readEnv := func() (map[string]string, error) { return config.ReadEnv(f.envFile, f.explicitEnv) }
	boot := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{ReplaceAttr: durationsAsText})) // until PGW_LOG_* are read
	if f.poll != 0 && (f.configPath == "" || f.poll < minPoll) {
		boot.Error("-config-poll needs -config and an interval of at least 1s", slog.Duration("config_poll", f.poll))
		return 2
	}
	source, origin := dotEnvLines(envSource(readEnv), f.envFile), "environment"
	if f.configPath != "" {
		source, origin = fileSource(f.configPath, readEnv), f.configPath
	}
	a := newApp(boot, source, nil)
	_, sc, err := a.load()
	if err != nil {
		// The server keys are bad: report every problem, the clients' too.
		if _, perr := a.prepare(); perr != nil {
			err = perr
		}
		boot.Error("configuration invalid", slog.String("config", origin), slog.String("error", err.Error()))
		return 1
	}
	if f.adminAddr != "" {
		sc.adminAddr = f.adminAddr
	}
	log := newLogger(stderr, sc)
	a, tracingOn, code := assemble(log, source, sc, readEnv, f.check)
	if code != 0 {
		return code
	}
	if tracingOn {
		defer a.flushTraces()
	}
	if f.check {
		return checkOnly(a, log, sc, origin)
	}
	return serveUntilSignal(a, log, sc, f, origin, sigs)
}

// assemble makes the app with its metrics and, unless only checking, its
// tracing; code is the exit code when that failed (0 otherwise).
func assemble(log *slog.Logger, source configSource, sc serverConfig, readEnv func() (map[string]string, error), check bool) (a *app, tracingOn bool, code int) {
	var hook metricsHook
	var err error
	if sc.metrics {
		if hook, err = newMetrics(); err != nil {
			log.Error("metrics", slog.String("error", err.Error()))
			return nil, false, 1
		}
	}
	a = newApp(log, source, hook)
	// OTEL_* come from the .env file and the environment, with a config
	// file too.
	otelEnv, err := readEnv()
	if err != nil {
		log.Error("configuration invalid", slog.String("error", err.Error()))
		return nil, false, 1
	}
	on, err := tracingEnabled(otelEnv)
	if err != nil {
		log.Error("configuration invalid", slog.String("error", err.Error()))
		return nil, false, 1
	}
	if !on || check {
		return a, false, 0
	}
	if a.tracing, err = newTracing(context.Background(), otelEnv, log); err != nil {
		log.Error("tracing", slog.String("error", err.Error()))
		return nil, false, 1
	}
	log.Info("tracing on: spans are exported over OTLP/HTTP")
	return a, true, 0
}

// checkOnly runs what start and reload run, without serving.
func checkOnly(a *app, log *slog.Logger, sc serverConfig, origin string) int {
	p, err := a.prepare()
	if err != nil {
		log.Error("configuration invalid", slog.String("config", origin), slog.String("error", err.Error()))
		return 1
	}
	closeBackends(p.cfg.Backends)
	log.Info("configuration valid", slog.String("config", origin),
		slog.Any("chat_scopes", sc.routing.chatScopes()), slog.Any("embedding_scopes", sc.routing.embedScopes()))
	return 0
}

// serveUntilSignal starts the gateway, reloads on SIGHUP (and on file changes with
// -config-poll), and drains and stops on the first other signal.
func serveUntilSignal(a *app, log *slog.Logger, sc serverConfig, f flags, origin string, sigs <-chan os.Signal) int {
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
		if f.poll > 0 {
			watchFile(ctx, f.configPath, f.poll, func() { a.reloadLogged("file changed") })
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
