package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
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

// deleteKeys deletes the keys matching pattern.
func deleteKeys(t testing.TB, c redis.UniversalClient, pattern string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Logf("cleanup scan %s: %v", pattern, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Logf("cleanup del: %v", err)
			return
		}
		keys = keys[n:]
	}
}

// countKeys returns how many keys match pattern.
func countKeys(t testing.TB, c redis.UniversalClient, pattern string) int {
	t.Helper()
	ctx := context.Background()
	n := 0
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		n++
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scan %s: %v", pattern, err)
	}
	return n
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
