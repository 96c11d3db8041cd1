package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os/signal"
	"syscall"
	"time"

	"github.com/polygateway/polygateway/cmd/polygateway/internal/gwproc"
)

// relay serves a bare reverse proxy (net/http/httputil, flushing every
// write) in front of one upstream: no parsing, no governance. It is the
// floor of any Go HTTP proxy on the machine, the bench's "relay" arm.
func relay(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	upstream := fs.String("upstream", "", "base URL of the upstream (loopback only)")
	maxRun := fs.Duration("max", 10*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := gwproc.CheckLoopback(*upstream); err != nil {
		return err
	}
	u, err := url.Parse(*upstream)
	if err != nil {
		return err
	}
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	rp.FlushInterval = -1
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.Transport = &http.Transport{MaxIdleConns: 8192, MaxIdleConnsPerHost: 8192, IdleConnTimeout: 90 * time.Second}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("http://%s%s\n", ln.Addr(), u.Path)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(*maxRun):
		}
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
