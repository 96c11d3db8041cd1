// Command redisworker is the program of docs/howto-redis.md: one worker
// process of a fleet that shares its rate limits, circuit breakers and
// response cache through Redis. Start two of them at once against the same
// Redis and watch them share one RPM budget:
//
//	export REDIS_URL=redis://localhost:6379/0
//	go run ./examples/redisworker -name a & go run ./examples/redisworker -name b; wait
//
// Each worker starts its own fake provider on localhost (so the program
// needs nothing but Redis); the limits are keyed by scope and source name,
// not by URL, so the two workers still count against the same gates.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/redisstore" // registers the "redis" backends
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/examples/internal/fakellm"
)

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	name := flag.String("name", "a", "this worker's name, for the output")
	calls := flag.Int("calls", 20, "calls to make")
	ownClient := flag.Bool("own-client", false, "build the backends on a go-redis client of our own")
	flag.Parse()
	redisURL := os.Getenv("REDIS_URL")
	if redisURL == "" {
		return errors.New("set REDIS_URL, e.g. redis://localhost:6379/0")
	}

	provider := fakellm.New(nil)
	defer provider.Close()

	env := map[string]string{
		"LLM__OPENAI__1__BASE_URL":  provider.BaseURL(),
		"LLM__OPENAI__1__API_KEY":   "sk-example",
		"LLM__OPENAI__1__MODEL":     "gpt-4o-mini",
		"LLM__OPENAI__1__TIMEOUT_S": "60",
		"LLM__OPENAI__1__RPM":       "30", // for the whole fleet, not per process
		"LLM__QUOTA_FULL":           "fail_fast",

		"PGW_LIMITER_BACKEND":   "redis",
		"PGW_BREAKER_BACKEND":   "redis",
		"PGW_CACHE_BACKEND":     "none",
		"PGW_TELEMETRY_BACKEND": "none",
		"REDIS_URL":             redisURL,
	}
	opts := []polygateway.Option{polygateway.WithEnv(env)}
	if *ownClient {
		rdb, backends, err := ownRedisBackends(redisURL)
		if err != nil {
			return err
		}
		defer rdb.Close() // after client.Close, which does not close it
		opts = append(opts, backends...)
		// A cache given with WithCache is on whatever PGW_CACHE_BACKEND
		// says, and still needs its namespace and TTL.
		env["PGW_CACHE_NAMESPACE"], env["PGW_CACHE_TTL_S"] = "fleet", "3600"
		opts[0] = polygateway.WithEnv(env)
	}
	client, err := polygateway.FromEnv("LLM", opts...)
	if err != nil {
		return err // e.g. a ConfigError naming REDIS_URL
	}
	defer client.Close()

	ctx := context.Background()
	ok, limited := 0, 0
	for range *calls {
		_, err := client.Chat(ctx, []polygateway.Message{polygateway.User("ping")})
		var unavailable *polygateway.GatewayUnavailableError
		var backend *polygateway.GovernanceBackendError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &unavailable) && unavailable.Reason == core.ReasonRateLimited:
			limited++ // the fleet's RPM is spent: reschedule after unavailable.RetryAfter
		case errors.As(err, &backend):
			return fmt.Errorf("redis is unreachable, no call was sent unprotected: %w", err)
		default:
			return err
		}
	}
	for _, s := range client.Sources(ctx) {
		fmt.Printf("worker %s: %d answered, %d refused by the shared RPM; %s has %d requests in the fleet's window\n",
			*name, ok, limited, s.Name, s.Usage.Requests)
	}
	return nil
}

// ownRedisBackends builds the three Redis backends on a go-redis client the
// program owns (for a cluster or failover client, or custom pool settings).
// The program closes that client itself; GatewayClient.Close does not.
func ownRedisBackends(redisURL string) (*redis.Client, []polygateway.Option, error) {
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return nil, nil, err
	}
	rdb := redis.NewClient(opt)
	prefix := redisstore.WithPrefix("pgw") // the default; give each deployment that must not share its own
	return rdb, []polygateway.Option{
		polygateway.WithLimiter(redisstore.NewLimiter(rdb, prefix)),
		polygateway.WithBreaker(redisstore.NewBreaker(rdb, prefix)),
		polygateway.WithCache(redisstore.NewCache(rdb, prefix)),
	}, nil
}
