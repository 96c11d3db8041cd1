// Package gwproc runs the gateway binary (cmd/polygateway) as a process of
// its own on loopback, for the programs that measure it from outside
// (loadgen, faultbench): a free address, a clean environment, a log file,
// and a stop that drains it.
package gwproc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// StartTimeout bounds how long Start waits for the gateway's /healthz.
const StartTimeout = 10 * time.Second

// Gateway is a running gateway process.
type Gateway struct {
	// Addr is its listen address, host:port on loopback.
	Addr string
	cmd  *exec.Cmd
	log  *os.File
}

// Environ returns env as a process environment ("KEY=value", sorted),
// with PATH and HOME of this process and nothing else of it: the gateway
// refuses unknown PGW_* and LLM_* keys, so the caller's own environment
// must not leak in.
func Environ(env map[string]string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// Check runs bin -check with env (and no .env file): nil when the gateway
// accepts the configuration, else an error with its output.
func Check(bin string, env map[string]string) error {
	cmd := exec.Command(bin, "-check", "-env-file", os.DevNull)
	cmd.Env = Environ(env)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s -check: %w\n%s", bin, err, out)
	}
	return nil
}

// Start starts bin with env (and no .env file) on a free loopback
// address, which it sets as PGW_LISTEN_ADDR, and waits until /healthz
// answers. The process's output goes to a temporary log file (LogPath).
func Start(bin string, env map[string]string) (*Gateway, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	log, err := os.CreateTemp("", "polygateway-*.log")
	if err != nil {
		return nil, err
	}
	e := make(map[string]string, len(env)+1)
	for k, v := range env {
		e[k] = v
	}
	e["PGW_LISTEN_ADDR"] = addr
	cmd := exec.Command(bin, "-env-file", os.DevNull)
	cmd.Env = Environ(e)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		os.Remove(log.Name())
		return nil, err
	}
	g := &Gateway{Addr: addr, cmd: cmd, log: log}
	if err := WaitHealthy(g.URL()+"/healthz", StartTimeout); err != nil {
		b, _ := os.ReadFile(log.Name())
		_ = g.Stop()
		os.Remove(log.Name())
		return nil, fmt.Errorf("gateway did not come up: %w\n%s", err, b)
	}
	return g, nil
}

// URL returns the gateway's base URL, http://host:port.
func (g *Gateway) URL() string { return "http://" + g.Addr }

// Pid returns the process id.
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// LogPath returns the path of the process's log file; it stays after Stop
// (remove it when done).
func (g *Gateway) LogPath() string { return g.log.Name() }

// Stop sends SIGTERM, which drains the gateway, and waits for it to exit:
// at most drain plus a few seconds, after which it is killed.
func (g *Gateway) Stop() error {
	defer g.log.Close()
	if g.cmd.ProcessState != nil {
		return nil
	}
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- g.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(40 * time.Second):
		_ = g.cmd.Process.Kill()
		// Wait's error after the kill ("signal: killed") says how it ended.
		if werr := <-done; werr != nil {
			return fmt.Errorf("gateway did not stop after SIGTERM: killed: %w", werr)
		}
		return errors.New("gateway did not stop after SIGTERM: killed")
	}
}

// FreeAddr returns a free loopback address.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// WaitHealthy polls url until it answers 200, for at most d.
func WaitHealthy(url string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// CheckLoopback refuses a base URL whose host is not a loopback address.
func CheckLoopback(base string) error {
	u, err := url.Parse(base)
	if err != nil || u.Hostname() == "" {
		return fmt.Errorf("bad url %q", base)
	}
	if ip := net.ParseIP(u.Hostname()); u.Hostname() != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("url must be a loopback address, got %s", u.Hostname())
	}
	return nil
}
