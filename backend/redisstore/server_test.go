package redisstore_test

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// privateRedis is a redis-server of one test's own, on a spare port, that
// the test may stop and start again.
type privateRedis struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	// persist makes every write durable before its reply (AOF, fsync
	// always), so that a restart keeps exactly what was acknowledged.
	persist bool
}

// startPrivateRedis starts a redis-server on a spare port and stops it when
// the test ends. Without a redis-server binary it skips the test (fails it
// with PGW_REQUIRE_SERVICES=1).
func startPrivateRedis(t testing.TB) *privateRedis {
	t.Helper()
	return startPrivateRedisWith(t, false)
}

// startPrivateRedisWith is startPrivateRedis, durable when persist is set.
func startPrivateRedisWith(t testing.TB, persist bool) *privateRedis {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if requireServices() {
			t.Fatal("redis-server is not on PATH")
		}
		t.Skip("redis-server is not on PATH: the test needs a private Redis it can stop")
	}
	port, err := loopbackPort() // a restart listens on it again
	if err != nil {
		t.Fatal(err)
	}
	r := &privateRedis{t: t, port: port, dir: t.TempDir(), persist: persist}
	t.Cleanup(r.stop)
	r.start()
	return r
}

// URL is the server's redis:// URL.
func (r *privateRedis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// start starts the server and waits until it answers.
func (r *privateRedis) start() {
	r.t.Helper()
	aof := "no"
	if r.persist {
		aof = "yes"
	}
	r.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", aof, "--appendfsync", "always", "--dir", r.dir, "--loglevel", "warning",
		"--enable-debug-command", "local")
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("private redis-server on port %d does not answer: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// restart kills the server and starts it again on the same port, with
// its data when it is durable (persist) and empty otherwise.
func (r *privateRedis) restart() {
	r.t.Helper()
	r.stop()
	r.start()
}

// stop kills the server and waits for it to exit.
func (r *privateRedis) stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	_ = r.cmd.Process.Kill()
	_ = r.cmd.Wait()
	r.cmd = nil
}
