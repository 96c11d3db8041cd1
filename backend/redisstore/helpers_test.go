package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
)

// redisURL is the Redis the tests use.
func redisURL() string {
	if u := os.Getenv("PGW_TEST_REDIS_URL"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// requireServices reports whether a missing Redis fails the tests instead
// of skipping them.
func requireServices() bool { return os.Getenv("PGW_REQUIRE_SERVICES") == "1" }

// newClient connects to the test Redis and closes the client when the test
// ends. Without a Redis it skips the test (fails it with PGW_REQUIRE_SERVICES=1).
func newClient(t testing.TB, hooks ...redis.Hook) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(redisURL())
	if err != nil {
		t.Fatalf("PGW_TEST_REDIS_URL is not a redis URL")
	}
	opt.DialerRetries = 1 // like the registered backends: fail fast without a server
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		msg := "no Redis at PGW_TEST_REDIS_URL (default redis://127.0.0.1:6379/0): " + err.Error() +
			"; start one with `redis-server --daemonize yes --port 6379 --save \"\" --appendonly no`"
		if requireServices() {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, h := range hooks {
		c.AddHook(h)
	}
	return c
}

// randomID returns n random bytes in lower-case hex.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freshPrefix returns a key prefix of the test's own and deletes every key
// under it when the test ends.
func freshPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	p := "pgwtest" + randomID(6)
	t.Cleanup(func() { deleteKeys(t, c, p+":*") })
	return p
}

// deleteKeys deletes the keys matching pattern (on every master of a cluster).
func deleteKeys(t testing.TB, c redis.UniversalClient, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := eachNode(ctx, c, func(ctx context.Context, n redis.UniversalClient) error {
		var keys []string
		iter := n.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return err
		}
		// One key per DEL: the keys of a node may lie in many cluster slots.
		pipe := n.Pipeline()
		for _, k := range keys {
			pipe.Del(ctx, k)
		}
		if len(keys) > 0 {
			_, err := pipe.Exec(ctx)
			return err
		}
		return nil
	})
	if err != nil {
		t.Logf("cleanup %s: %v", pattern, err)
	}
}

// eachNode runs f on the node of a single-node client, or on every master
// of a cluster.
func eachNode(ctx context.Context, c redis.UniversalClient, f func(context.Context, redis.UniversalClient) error) error {
	if cc, ok := c.(*redis.ClusterClient); ok {
		return cc.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return f(ctx, n) })
	}
	return f(ctx, c)
}

// countKeys returns how many keys match pattern.
func countKeys(t testing.TB, c redis.UniversalClient, pattern string) int {
	t.Helper()
	ctx := context.Background()
	var mu sync.Mutex
	n := 0
	err := eachNode(ctx, c, func(ctx context.Context, node redis.UniversalClient) error {
		iter := node.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatalf("scan %s: %v", pattern, err)
	}
	return n
}

// target is a Redis the tests run against: the single node, or the local
// cluster.
type target struct {
	name   string
	url    string
	client redis.UniversalClient
}

// targets returns the single node and, where there is one, the cluster.
// Without the single node the test skips (fails with PGW_REQUIRE_SERVICES=1);
// without the cluster only its subtests skip.
func forEachTarget(t *testing.T, run func(t *testing.T, tg target)) {
	t.Helper()
	t.Run("single", func(t *testing.T) { run(t, target{name: "single", url: redisURL(), client: newClient(t)}) })
	t.Run("cluster", func(t *testing.T) {
		lc := needCluster(t)
		run(t, target{name: "cluster", url: lc.URL(), client: newClusterClient(t)})
	})
}

// upper returns s in upper case (scope names are upper case).
func upper(s string) string { return strings.ToUpper(s) }

// clockEpoch is where the fake clocks of these tests start.
var clockEpoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// clocked is a Limiter on the test Redis, under a fresh prefix, whose time
// is a fake clock starting at clockEpoch.
type clocked struct {
	c      *redis.Client
	prefix string
	clk    *backendtest.FakeClock
	l      *redisstore.Limiter
}

func newClocked(t *testing.T) clocked {
	t.Helper()
	c := newClient(t)
	prefix := freshPrefix(t, c)
	clk := backendtest.NewFakeClock(clockEpoch)
	return clocked{c: c, prefix: prefix, clk: clk, l: redisstore.NewLimiter(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))}
}
