package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strings"
	"time"
)

// adminMux serves the opt-in admin listener: the runtime profiles of
// net/http/pprof under /debug/pprof/. It is never mounted on the public
// listener.
func adminMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("GET /debug/pprof/", pprof.Index)
	m.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	m.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return m
}

// startAdmin opens the admin listener on addr and serves it in the
// background; the returned server is closed at shutdown.
func startAdmin(log *slog.Logger, addr string) (*http.Server, net.Addr, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, fmt.Errorf("admin listener: %w", err)
	}
	hs := &http.Server{
		Handler:           adminMux(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a CPU profile or trace runs for its ?seconds=.
	}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin listener failed", slog.String("error", err.Error()))
		}
	}()
	log.Info("admin listener (pprof)", slog.String("addr", ln.Addr().String()))
	return hs, ln.Addr(), nil
}

// printVersion writes the build information of the binary: module
// version, Go version and the VCS settings the toolchain stamped.
func printVersion(w io.Writer) {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		fmt.Fprintln(w, "polygateway (no build information)")
		return
	}
	fmt.Fprintf(w, "polygateway %s %s\n", bi.Main.Version, bi.GoVersion)
	fmt.Fprintf(w, "module %s\n", bi.Main.Path)
	for _, s := range bi.Settings {
		if strings.HasPrefix(s.Key, "vcs") || s.Key == "GOOS" || s.Key == "GOARCH" || s.Key == "CGO_ENABLED" || s.Key == "-tags" {
			fmt.Fprintf(w, "%s=%s\n", s.Key, s.Value)
		}
	}
}
