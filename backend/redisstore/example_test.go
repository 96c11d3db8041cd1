package redisstore_test

import (
	"log"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/redisstore"
)

// ExampleNewAdmitter builds the Redis backends and the native Admitter on
// a go-redis client of the program's own (here a cluster client; a single
// node or failover client works the same). Set ContextTimeoutEnabled, so
// that every command is bounded by the call's context, as the clients made
// from REDIS_URL are. Close the Admitter after the gateway client and
// before the go-redis client: its last reclaims need the connection.
func ExampleNewAdmitter() {
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000"},
		ContextTimeoutEnabled: true, // every command ends with the call's deadline
		DialerRetries:         1,    // with Redis down, fail in milliseconds, not seconds
	})
	limiter, breaker := redisstore.NewLimiter(rdb), redisstore.NewBreaker(rdb)
	defer rdb.Close() // last
	admitter := redisstore.NewAdmitter(limiter, breaker, redisstore.WithLogger(slog.Default()))
	defer admitter.Close() // after the client, before rdb
	client, err := polygateway.FromEnv("LLM",
		polygateway.WithLimiter(limiter),
		polygateway.WithBreaker(breaker),
		polygateway.WithAdmitter(admitter), // one round trip before each attempt, one after
	)
	if err != nil {
		log.Print(err)
		return
	}
	defer client.Close() //nolint:gocritic // first: the example shows the order of the three Close calls
}
