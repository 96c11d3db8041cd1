package bench

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	_ "github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/telemetry"
)

// BenchmarkClusterVsSingleRedis: one governed call at a time with the Redis
// limiter and breaker (the native Admitter, from REDIS_URL), on a private
// single redis-server and on a private Redis Cluster of three masters,
// both on loopback and started by the benchmark, beside a raw call. It
// reports each arm's time per call, each ratio to raw, and the
// cluster-to-single ratio of the governed calls, all in the same run.
func BenchmarkClusterVsSingleRedis(b *testing.B) {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			b.Skipf("%s is not on PATH: the benchmark starts its own servers", bin)
		}
	}
	dir := b.TempDir()
	ports := freePorts(b, 4)
	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	}()
	start := func(port int, cluster bool) {
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--loglevel", "warning"}
		if cluster {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, fmt.Sprintf("nodes-%d.conf", port)))
		}
		cmd := exec.Command("redis-server", args...)
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		procs = append(procs, cmd)
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
		defer c.Close()
		for deadline := time.Now().Add(10 * time.Second); c.Ping(context.Background()).Err() != nil; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				b.Fatalf("redis-server on %d does not answer", port)
			}
		}
	}
	start(ports[0], false)
	create := []string{"--cluster", "create"}
	for _, p := range ports[1:] {
		start(p, true)
		create = append(create, fmt.Sprintf("127.0.0.1:%d", p))
	}
	create = append(create, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", create...).CombinedOutput(); err != nil {
		b.Fatalf("redis-cli --cluster create: %v: %s", err, out)
	}
	for _, p := range ports[1:] {
		c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", p)})
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if info, _ := c.ClusterInfo(context.Background()).Result(); strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				b.Fatal("the cluster did not reach cluster_state:ok")
			}
		}
		_ = c.Close()
	}
	clusterURL := fmt.Sprintf("redis://127.0.0.1:%d?addr=127.0.0.1:%d&addr=127.0.0.1:%d", ports[1], ports[2], ports[3])
	singleURL := fmt.Sprintf("redis://127.0.0.1:%d/0", ports[0])

	srv := fake()
	defer srv.Close()
	client := func(url string) *polygateway.GatewayClient {
		env := map[string]string{
			"LLM__OPENAI__1__BASE_URL": srv.URL(), "LLM__OPENAI__1__API_KEY": "sk-bench", "LLM__OPENAI__1__MODEL": "bench-model",
			"LLM__OPENAI__1__TIMEOUT_S": "30", "LLM__OPENAI__1__MAX_CONCURRENCY": "1000", "LLM__OPENAI__1__RPM": "100000000",
			"LLM__OPENAI__1__TPM": "1000000000", "LLM__OPENAI__1__EST_TOKENS": "100",
			"PGW_LIMITER_BACKEND": "redis", "PGW_BREAKER_BACKEND": "redis", "REDIS_URL": url,
			"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		}
		c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithTelemetry(telemetry.Discard{}))
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	single, cluster := client(singleURL), client(clusterURL)
	defer single.Close()
	defer cluster.Close()
	ctx := context.Background()
	hc := rawClient()
	raw := func(int) error { _, err := rawChat(ctx, hc, srv.URL(), false, "hello"); return err }
	one := func(int) error { return govChat(single, false, "hello") }
	many := func(int) error { return govChat(cluster, false, "hello") }
	warm(b, 50, raw, one)
	warm(b, 50, raw, many)
	b.ResetTimer()
	var r, s, c arm
	per := max(b.N/4, 1)
	for range 4 { // interleaved, so that drift on the machine hits every arm alike
		for _, x := range []struct {
			f   func(int) error
			sum *arm
		}{{raw, &r}, {one, &s}, {many, &c}} {
			a, err := measure(per, 1, x.f)
			if err != nil {
				b.Fatal(err)
			}
			x.sum.elapsed, x.sum.ops = x.sum.elapsed+a.elapsed, x.sum.ops+a.ops
		}
	}
	b.ReportMetric(r.perOp(), "raw-µs/op")
	b.ReportMetric(s.perOp(), "single-µs/op")
	b.ReportMetric(c.perOp(), "cluster-µs/op")
	b.ReportMetric(s.perOp()/r.perOp(), "single/raw")
	b.ReportMetric(c.perOp()/r.perOp(), "cluster/raw")
	b.ReportMetric(c.perOp()/s.perOp(), "cluster/single")
}

// freePorts returns n free loopback ports whose cluster bus port (+10000)
// is free too.
func freePorts(b *testing.B, n int) []int {
	var ports []int
	for try := 0; try < 200 && len(ports) < n; try++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if p+10000 > 65535 {
			continue
		}
		bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		if err != nil {
			continue
		}
		_ = bus.Close()
		ports = append(ports, p)
	}
	if len(ports) < n {
		b.Fatal("no free ports")
	}
	return ports
}
