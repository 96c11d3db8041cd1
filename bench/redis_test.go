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
	"github.com/polygateway/polygateway/telemetry"
)

// BenchmarkSequentialRedis: one call at a time with the Redis limiter and
// breaker on loopback, the admitter keeping its queue (a call that does not
// wait), beside a raw call and one bare Redis round trip. It
// reports the target 1 + 3·RTT/raw + 0.15 next to the measured ratio, with
// RTT measured back to back (bound) and right after a raw call
// (bound-after-call), and the floor 1 + 2·noop/raw: the ratio of a call
// whose two scripts did nothing and whose own code took no time, noop being
// a script that returns at once, run right after a raw call.
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

	srv := fake()
	defer srv.Close()
	hc := rawClient()
	env := map[string]string{
		"LLM__OPENAI__1__BASE_URL": srv.URL(), "LLM__OPENAI__1__API_KEY": "sk-bench", "LLM__OPENAI__1__MODEL": "bench-model",
		"LLM__OPENAI__1__TIMEOUT_S": "30", "LLM__OPENAI__1__MAX_CONCURRENCY": "1000", "LLM__OPENAI__1__RPM": "100000000",
		"LLM__OPENAI__1__TPM": "1000000000", "LLM__OPENAI__1__EST_TOKENS": "100",
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
	}
	lim := redisstore.NewLimiter(rc, redisstore.WithPrefix(prefix))
	br := redisstore.NewBreaker(rc, redisstore.WithPrefix(prefix))
	adm := redisstore.NewAdmitter(lim, br, redisstore.WithQueue(redisstore.QueueConfig{}))
	defer adm.Close()
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithTelemetry(telemetry.Discard{}),
		polygateway.WithLimiter(lim), polygateway.WithBreaker(br), polygateway.WithAdmitter(adm))
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()

	// One bare round trip, measured in the same run in two ways: PINGs back
	// to back (the client, the connection and Redis all busy), and a PING
	// made right after a raw upstream call, as the governed call makes its
	// round trips (Redis idle meanwhile, so woken by the request).
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
	// afterCall times op made right after a raw call.
	afterCall := func(op func() error) (func(int) error, func() float64) {
		var total time.Duration
		var n int
		f := func(int) error {
			if err := raw(0); err != nil {
				return err
			}
			t := time.Now()
			err := op()
			total += time.Since(t)
			n++
			return err
		}
		return f, func() float64 { return float64(total) / 1e3 / float64(max(n, 1)) }
	}
	rawPing, pingMean := afterCall(func() error { return rc.Ping(ctx).Err() })
	// A script that does nothing, with the governed scripts' keys and
	// arguments: the least any two-script call can cost on this machine.
	noop := redis.NewScript("return {1, 0, 0, 0, 0, 1, 0, 0, 0}")
	noopKeys := []string{prefix + ":{S}:1", prefix + ":{S}:2", prefix + ":{S}:3", prefix + ":{S}:4", prefix + ":{S}:5", prefix + ":{S}:6", prefix + ":{S}:7"}
	noopArgs := []any{`{"breaker":{"key":7,"probe_ttl":30000000,"holder":"12345678901234567890"},"limiter":{"lease_ttl":35000000,` +
		`"levels":[{"key":1,"member":"12345678901234567890"}],"gates":[{"gate":1,"kind":"conc","level":1,"limit":1000},` +
		`{"gate":2,"kind":"rate","level":1,"limit":100000000,"window":60000000},` +
		`{"gate":3,"kind":"sum","level":1,"limit":1000000000,"window":60000000,"amount":100}]}}`}
	rawNoop, noopMean := afterCall(func() error { return noop.Run(ctx, rc, noopKeys, noopArgs...).Err() })
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
		for _, f := range []func(int) error{rawPing, rawNoop} {
			if _, err := measure(max(per/4, 1), 1, f); err != nil {
				b.Fatal(err)
			}
		}
		r.elapsed, r.allocs, r.bytes, r.ops = r.elapsed+ra.elapsed, r.allocs+ra.allocs, r.bytes+ra.bytes, r.ops+ra.ops
		g.elapsed, g.allocs, g.bytes, g.ops = g.elapsed+ga.elapsed, g.allocs+ga.allocs, g.bytes+ga.bytes, g.ops+ga.ops
	}
	report(b, r, g)
	b.ReportMetric(rtt, "redis-rtt-µs")
	b.ReportMetric(pingMean(), "redis-rtt-after-call-µs")
	b.ReportMetric(noopMean(), "noop-script-after-call-µs")
	b.ReportMetric(1+3*rtt/r.perOp()+0.15, "bound")
	b.ReportMetric(1+3*pingMean()/r.perOp()+0.15, "bound-after-call")
	b.ReportMetric(1+2*noopMean()/r.perOp(), "floor")
	// The queue's target: within 10 % of a raw call plus two round trips.
	b.ReportMetric((1+2*pingMean()/r.perOp())*1.10, "raw+2rtt+10%")
}
