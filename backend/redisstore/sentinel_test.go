package redisstore_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// startSentinel starts a Sentinel on a free port watching the master on
// masterPort as "mymaster", and stops it when the test ends.
func startSentinel(t *testing.T, masterPort int) int {
	t.Helper()
	port, err := loopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	body := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster 127.0.0.1 %d 1\nsentinel down-after-milliseconds mymaster 5000\n",
		port, dir, masterPort)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel", "--loglevel", "warning")
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the sentinel: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := redis.NewSentinelClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer s.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		addr, err := s.GetMasterAddrByName(context.Background(), "mymaster").Result()
		if err == nil && len(addr) == 2 {
			return port
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sentinel does not know the master: %v", err)
		}
	}
}

// TestSentinel: a REDIS_URL naming a Sentinel and a master_name reaches the
// master through it; the Limiter and Admitter suites pass there, and so do
// governed calls of two clients assembled from that URL.
func TestSentinel(t *testing.T) {
	rs := startPrivateRedis(t)
	sp := startSentinel(t, rs.port)
	url := fmt.Sprintf("redis://127.0.0.1:%d/0?master_name=mymaster", sp)
	c, err := redisstore.NewClientFromURL(url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, ok := c.(*redis.Client); !ok {
		t.Fatalf("the client of a Sentinel URL is a %T", c)
	}
	backendtest.RunLimiterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) core.Limiter {
		return redisstore.NewLimiter(c, redisstore.WithClock(clk))
	})
	backendtest.RunAdmitterSuite(t, func(t *testing.T, clk *backendtest.FakeClock) backendtest.AdmitterBackend {
		l, b := redisstore.NewLimiter(c, redisstore.WithClock(clk)), redisstore.NewBreaker(c, redisstore.WithClock(clk))
		a := redisstore.NewAdmitter(l, b)
		t.Cleanup(func() { _ = a.Close() })
		return backendtest.AdmitterBackend{Admitter: a, Limiter: l, Breaker: b}
	})
	// The keys are on the master the Sentinel names.
	if n := countKeys(t, privateClient(t, rs), "pgw:*"); n == 0 {
		t.Fatal("no key on the master")
	}
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(30*time.Millisecond)))
	env := newGWEnv("SENT", url, srv).set("FAKE__1__MAX_CONCURRENCY", "2")
	a, b := env.client(t), env.client(t)
	done := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := chat([]*polygateway.GatewayClient{a, b}[i%2], fmt.Sprintf("sentinel %d", i))
			done <- err
		}()
	}
	for range 8 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if m := srv.MaxInFlight(); m > 2 {
		t.Fatalf("the upstream saw %d requests at once, want at most 2", m)
	}
}

// TestClientFromURLForms: the three forms of REDIS_URL give the client of
// their kind, and a bad URL's error never repeats it (it may carry a
// password).
func TestClientFromURLForms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string
	}{
		{"redis://:pw@127.0.0.1:6379/2", "*redis.Client"},
		{"unix:///tmp/redis.sock", "*redis.Client"},
		{"redis://:pw@127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", "*redis.ClusterClient"},
		{"redis://:pw@127.0.0.1:26379/0?master_name=mymaster&addr=127.0.0.1:26380", "*redis.Client"},
	} {
		c, err := redisstore.NewClientFromURL(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		if got := fmt.Sprintf("%T", c); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.url, got, tc.want)
		}
		_ = c.Close()
	}
	for _, bad := range []string{
		"redis://:s3cret@127.0.0.1:6379/x",
		"redis://:s3cret@127.0.0.1:7000?addr=bad&addr=127.0.0.1:7001",
		"redis://:s3cret@127.0.0.1:26379?master_name=m&bogus=1",
		"ftp://:s3cret@host",
		"redis://:s3cret@[::1",
	} {
		_, err := redisstore.NewClientFromURL(bad)
		if err == nil {
			t.Errorf("%s was accepted", bad)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.HasPrefix(err.Error(), "polygateway: redisstore: ") {
			t.Errorf("error %q", err)
		}
	}
}
