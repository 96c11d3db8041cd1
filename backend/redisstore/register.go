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
