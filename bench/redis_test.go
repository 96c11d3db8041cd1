package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/redisstore"
	fu "github.com/polygateway/polygateway/internal/fakeupstream"
	"github.com/polygateway/polygateway/telemetry"
)

// BenchmarkSequentialRedis: one call at a time with the Redis limiter and
// breaker on loopback, beside a raw call and one bare Redis round trip. It
// reports the bound 1 + 3·RTT/raw + 0.15 next to the measured ratio.
func BenchmarkSequentialRedis(b *testing.B) {
	url := os.Getenv("PGW_TEST_REDIS_URL")
	if url == "" {
		url = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	rc := redis.NewClient(opt)
	defer rc.Close()
	ctx := context.Background()
	if err := rc.Ping(ctx).Err(); err != nil {
		b.Skipf("redis at %s does not answer: %v", url, err)
	}
	prefix := fmt.Sprintf("pgwbench%d", rand.Int64())
	defer func() {
		keys, _ := rc.Keys(ctx, prefix+"*").Result()
		if len(keys) > 0 {
			rc.Del(ctx, keys...)
		}
	}()

	srv := fu.New()
	defer srv.Close()
	hc := rawClient()
	env := map[string]string{
		"LLM__OPENAI__1__BASE_URL": srv.URL(), "LLM__OPENAI__1__API_KEY": "sk-bench", "LLM__OPENAI__1__MODEL": "bench-model",
		"LLM__OPENAI__1__TIMEOUT_S": "30", "LLM__OPENAI__1__MAX_CONCURRENCY": "1000", "LLM__OPENAI__1__RPM": "100000000",
		"LLM__OPENAI__1__TPM": "1000000000", "LLM__OPENAI__1__EST_TOKENS": "100",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithTelemetry(telemetry.Discard{}),
		polygateway.WithLimiter(redisstore.NewLimiter(rc, redisstore.WithPrefix(prefix))),
		polygateway.WithBreaker(redisstore.NewBreaker(rc, redisstore.WithPrefix(prefix))))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	// One bare round trip, measured in the same run.
	const pings = 2000
	start := time.Now()
	for range pings {
		if err := rc.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	rtt := float64(time.Since(start)) / 1e3 / pings

	var r, g arm
	raw := func(int) error { _, err := rawChat(ctx, hc, srv.URL(), false, "hello"); return err }
	gov := func(int) error { return govChat(c, false, "hello") }
	warm(b, 50, raw, gov)
	b.ResetTimer()
	per := max(b.N/4, 1)
	for range 4 {
		ra, err := measure(per, 1, raw)
		if err != nil {
			b.Fatal(err)
		}
		ga, err := measure(per, 1, gov)
		if err != nil {
			b.Fatal(err)
		}
		r.elapsed, r.allocs, r.bytes, r.ops = r.elapsed+ra.elapsed, r.allocs+ra.allocs, r.bytes+ra.bytes, r.ops+ra.ops
		g.elapsed, g.allocs, g.bytes, g.ops = g.elapsed+ga.elapsed, g.allocs+ga.allocs, g.bytes+ga.bytes, g.ops+ga.ops
	}
	report(b, r, g)
	b.ReportMetric(rtt, "redis-rtt-µs")
	b.ReportMetric(1+3*rtt/r.perOp()+0.15, "bound")
}
