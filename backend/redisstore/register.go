package redisstore

import (
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/internal/registry"
)

func init() {
	registry.Register(registry.KindLimiter, "redis", func(a *registry.Assembly) (any, error) {
		c, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewLimiter(c), nil
	})
	registry.Register(registry.KindBreaker, "redis", func(a *registry.Assembly) (any, error) {
		c, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewBreaker(c), nil
	})
	registry.Register(registry.KindAdmitter, "redis", func(a *registry.Assembly) (any, error) {
		c, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewAdmitter(NewLimiter(c), NewBreaker(c)), nil
	})
	registry.Register(registry.KindCache, "redis", func(a *registry.Assembly) (any, error) {
		c, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewCache(c), nil
	})
}

// sharedClient returns the assembly's one Redis client for REDIS_URL,
// creating it on first use; the assembly closes it with the client. It does
// not connect: a Redis that is down at start surfaces on the first call.
// Options come from the URL (redis.ParseURL query parameters such as
// max_retries, dial_timeout, pool_size); dialling is tried once per
// command attempt.
// Errors never echo the URL, which may carry a password.
func sharedClient(a *registry.Assembly) (redis.UniversalClient, error) {
	url := a.Settings.RedisURL
	if url == "" {
		return nil, errors.New("polygateway: redisstore: REDIS_URL is required by the redis backends")
	}
	v, err := a.Shared("redis:"+url, func() (any, error) {
		opt, err := redis.ParseURL(url)
		if err != nil {
			return nil, errors.New("polygateway: redisstore: REDIS_URL is not a valid redis URL")
		}
		// go-redis retries a failed command MaxRetries times and, by default,
		// each of those dials five times: with Redis down a call would stall
		// for seconds before the governor can refuse it. One dial per attempt
		// keeps the failure prompt; the command retries still ride out a blip.
		opt.DialerRetries = 1
		return redis.NewClient(opt), nil
	})
	if err != nil {
		return nil, err
	}
	c, ok := v.(redis.UniversalClient)
	if !ok {
		return nil, errors.New("polygateway: redisstore: the shared redis resource is not a client")
	}
	return c, nil
}
