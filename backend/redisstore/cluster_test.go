package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// localCluster is a Redis Cluster of three masters on free loopback ports,
// started at most once per test binary and shared by the tests, which
// keep apart by key prefix or scope.
type localCluster struct {
	dir   string
	ports []int
	procs []*exec.Cmd
}

// testCluster is the binary's cluster, started by the first test that
// needs one (so that a binary whose tests need none — a fuzz worker among
// them — starts none); clusterErr says why there is none.
var (
	clusterOnce sync.Once
	testCluster *localCluster
	clusterErr  error
)

// startCluster starts the cluster, or returns why it cannot.
func startCluster() (*localCluster, error) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s is not on PATH", bin)
		}
	}
	dir, err := os.MkdirTemp("", "pgw-cluster-")
	if err != nil {
		return nil, err
	}
	c := &localCluster{dir: dir}
	ports, err := freeClusterPorts(3)
	if err != nil {
		c.stop()
		return nil, err
	}
	c.ports = ports
	for _, p := range ports {
		cmd := exec.Command("redis-server", "--port", strconv.Itoa(p), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", p)),
			"--cluster-node-timeout", "2000", "--save", "", "--appendonly", "no", "--dir", dir, "--loglevel", "warning")
		if err := cmd.Start(); err != nil {
			c.stop()
			return nil, fmt.Errorf("start redis-server: %w", err)
		}
		c.procs = append(c.procs, cmd)
	}
	for _, p := range ports {
		if err := waitPing(fmt.Sprintf("127.0.0.1:%d", p)); err != nil {
			c.stop()
			return nil, err
		}
	}
	args := []string{"--cluster", "create"}
	for _, p := range ports {
		args = append(args, fmt.Sprintf("127.0.0.1:%d", p))
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		c.stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w: %s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, p := range ports {
		nc := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		for {
			info, err := nc.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = nc.Close()
				c.stop()
				return nil, fmt.Errorf("the cluster did not reach cluster_state:ok: %w %s", err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = nc.Close()
	}
	return c, nil
}

// freeClusterPorts finds n ports p free on loopback with p+10000 (the
// cluster bus) free too (loopbackPort's).
func freeClusterPorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		p, err := loopbackPort()
		if err != nil {
			return nil, err
		}
		ports[i] = p
	}
	return ports, nil
}

// waitPing waits until the server at addr answers.
func waitPing(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server at %s does not answer: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *localCluster) stop() {
	for _, p := range c.procs {
		if p.Process != nil {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}
	c.procs = nil
	_ = os.RemoveAll(c.dir)
}

// URL is the cluster's REDIS_URL: the first node, the others as addr.
func (c *localCluster) URL() string {
	u := fmt.Sprintf("redis://127.0.0.1:%d", c.ports[0])
	for i, p := range c.ports[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += fmt.Sprintf("%saddr=127.0.0.1:%d", sep, p)
	}
	return u
}

// needCluster returns the test binary's cluster, or skips the test (fails
// it with PGW_REQUIRE_SERVICES=1) when there is none.
func needCluster(t testing.TB) *localCluster {
	t.Helper()
	clusterOnce.Do(func() { testCluster, clusterErr = startCluster() })
	if testCluster == nil {
		msg := fmt.Sprintf("no local Redis Cluster: %v", clusterErr)
		if requireServices() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return testCluster
}

// newClusterClient returns a cluster client closed when the test ends.
func newClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	lc := needCluster(t)
	var addrs []string
	for _, p := range lc.ports {
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
