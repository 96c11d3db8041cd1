package redisstore

import (
	"errors"
	"io"
	"net/url"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/internal/registry"
)

func init() {
	registry.Register(registry.KindLimiter, "redis", func(a *registry.Assembly) (any, error) {
		r, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewLimiter(r.c), nil
	})
	registry.Register(registry.KindBreaker, "redis", func(a *registry.Assembly) (any, error) {
		r, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewBreaker(r.c), nil
	})
	registry.Register(registry.KindAdmitter, "redis", func(a *registry.Assembly) (any, error) {
		r, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		opts := []Option{WithLogger(a.Logger)}
		if a.Settings.GlobalPool == "" {
			// An assembled Admitter queues: the clients of every process
			// on one REDIS_URL wait in one fair line per scope. A scope in
			// a pool does not: a slot a call frees is handed on within
			// its scope's line, so waiters of the pool's other scopes
			// would not hear of it.
			bp := a.Settings.Backpressure
			opts = append(opts, WithQueue(QueueConfig{Share: bp.QueueShare, ClaimTTL: bp.QueueClaimTTL, Lease: bp.QueueLease}))
		}
		adm := NewAdmitter(NewLimiter(r.c), NewBreaker(r.c), opts...)
		r.own(adm)
		return adm, nil
	})
	registry.Register(registry.KindCache, "redis", func(a *registry.Assembly) (any, error) {
		r, err := sharedClient(a)
		if err != nil {
			return nil, err
		}
		return NewCache(r.c), nil
	})
}

// sharedRedis is an assembly's one Redis client and the closers that use
// it; the assembly closes it with the client: the Admitters first (their
// last reclaims need the client), then the client.
type sharedRedis struct {
	c redis.UniversalClient

	mu    sync.Mutex
	users []io.Closer
}

func (r *sharedRedis) own(c io.Closer) {
	r.mu.Lock()
	r.users = append(r.users, c)
	r.mu.Unlock()
}

// Close closes the users, then the client.
func (r *sharedRedis) Close() error {
	r.mu.Lock()
	users := r.users
	r.users = nil
	r.mu.Unlock()
	var errs []error
	for _, u := range users {
		errs = append(errs, u.Close())
	}
	errs = append(errs, r.c.Close())
	return errors.Join(errs...)
}

// sharedClient returns the assembly's one Redis client for REDIS_URL,
// creating it on first use (see NewClientFromURL); the assembly closes it
// with the client. It does not connect: a Redis that is down at start
// surfaces on the first call.
func sharedClient(a *registry.Assembly) (*sharedRedis, error) {
	u := a.Settings.RedisURL
	if u == "" {
		return nil, errors.New("polygateway: redisstore: REDIS_URL is required by the redis backends")
	}
	v, err := a.Shared("redis:"+u, func() (any, error) {
		c, err := NewClientFromURL(u)
		if err != nil {
			return nil, err
		}
		return &sharedRedis{c: c}, nil
	})
	if err != nil {
		return nil, err
	}
	r, ok := v.(*sharedRedis)
	if !ok {
		return nil, errors.New("polygateway: redisstore: the shared redis resource is not a client")
	}
	return r, nil
}

// NewClientFromURL returns the client REDIS_URL names, configured as the
// registered backends use it. Three forms are understood:
//
//   - one node: redis://[user:password@]host:port[/db], rediss://… (TLS)
//     or unix:///path/to/socket (go-redis's redis.ParseURL);
//   - a Redis Cluster: redis://[user:password@]host:port?addr=host2:port2&addr=host3:port3
//     — any addr parameter makes the URL a cluster's, whose seed nodes are
//     the host and every addr (redis.ParseClusterURL; no db);
//   - Sentinel: redis://[user:password@]sentinel:port[/db]?master_name=NAME[&addr=sentinel2:port2…]
//     — a master_name parameter makes the host (and every addr) a
//     Sentinel, the userinfo the Sentinels' credentials, and the
//     password and username parameters the master's
//     (redis.ParseFailoverURL).
//
// go-redis's other query parameters (pool_size, dial_timeout, max_retries,
// read_timeout, …) apply. Every command is bounded by its context
// (ContextTimeoutEnabled), and a failed dial is not retried within one
// command attempt (go-redis dials up to five times by default), so with
// Redis down a call fails within milliseconds rather than seconds; the
// command retries still ride out a blip. Errors never echo the URL, which
// may carry a password.
func NewClientFromURL(raw string) (redis.UniversalClient, error) {
	bad := errors.New("polygateway: redisstore: REDIS_URL is not a valid redis URL")
	u, err := url.Parse(raw)
	if err != nil {
		return nil, bad
	}
	q := u.Query()
	switch {
	case q.Has("master_name"):
		opt, err := redis.ParseFailoverURL(raw)
		if err != nil {
			return nil, errors.New("polygateway: redisstore: REDIS_URL is not a valid redis sentinel URL")
		}
		opt.ContextTimeoutEnabled = true
		opt.DialerRetries = 1
		return redis.NewFailoverClient(opt), nil
	case q.Has("addr"):
		opt, err := redis.ParseClusterURL(raw)
		if err != nil {
			return nil, errors.New("polygateway: redisstore: REDIS_URL is not a valid redis cluster URL")
		}
		opt.ContextTimeoutEnabled = true
		opt.DialerRetries = 1
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(raw)
	if err != nil {
		return nil, bad
	}
	opt.ContextTimeoutEnabled = true
	opt.DialerRetries = 1
	return redis.NewClient(opt), nil
}
