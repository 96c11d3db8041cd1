package redisstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

// valueTag starts every value the Cache writes. A value without it was
// written by something else (or is corrupt) and reads as a miss.
const valueTag = "pgw\x00c1"

// headerLen is the tag plus the 8-byte expiry that follows it.
const headerLen = len(valueTag) + 8

// Cache is the core.Cache on Redis: every entry is a string key under the
// prefix ("{prefix}:cache:{key}") set with PX ttl, so Redis expires it.
//
// A stored value is valueTag, an 8-byte expiry and the caller's bytes. The
// expiry is zero unless the Cache reads a test clock (WithClock): then it is
// the entry's end on that clock and Get checks it, since Redis expires keys
// on its own clock. A value that does not start with the tag (corrupt, or
// another program's), or a key of another type than a string, reads as a
// miss, not an error.
//
// Set with a ttl that is not positive deletes the key. Redis failures are
// returned as errors; the cache layer degrades them to a miss. A Cache is
// safe for concurrent use. It does not own its client. Create one with
// NewCache.
type Cache struct {
	c   redis.UniversalClient
	opt options
}

var _ core.Cache = (*Cache)(nil)

// NewCache returns a Cache on c. WithPrefix and WithClock apply.
func NewCache(c redis.UniversalClient, opts ...Option) *Cache {
	return &Cache{c: c, opt: buildOptions(opts)}
}

func (c *Cache) key(key string) string { return c.opt.prefix + ":cache:" + key }

// Get returns the value stored under key, or (nil, false, nil) on a miss.
// The returned slice is the caller's. An error means Redis failed.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	b, err := c.c.Get(ctx, c.key(key)).Bytes()
	if errors.Is(err, redis.Nil) || redis.HasErrorPrefix(err, "WRONGTYPE") {
		// No key, or one another program made of another type: a miss.
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("polygateway: redisstore: cache get: %w", err)
	}
	if len(b) < headerLen || string(b[:len(valueTag)]) != valueTag {
		return nil, false, nil
	}
	if exp := int64(binary.BigEndian.Uint64(b[len(valueTag):headerLen])); exp != 0 && c.opt.clock != nil {
		if c.opt.clock.Now().UnixMicro() >= exp {
			return nil, false, nil
		}
	}
	return b[headerLen:len(b):len(b)], true, nil
}

// Set stores value under key for ttl; a ttl that is not positive deletes
// the key. An error means Redis failed.
func (c *Cache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	k := c.key(key)
	if ttl <= 0 {
		if err := c.c.Del(ctx, k).Err(); err != nil {
			return fmt.Errorf("polygateway: redisstore: cache set: %w", err)
		}
		return nil
	}
	buf := make([]byte, headerLen+len(value))
	copy(buf, valueTag)
	if c.opt.clock != nil {
		binary.BigEndian.PutUint64(buf[len(valueTag):], uint64(c.opt.clock.Now().Add(ttl).UnixMicro()))
	}
	copy(buf[headerLen:], value)
	// PX has millisecond resolution: round up so the key never goes before ttl.
	px := (ttl + time.Millisecond - 1) / time.Millisecond * time.Millisecond
	if err := c.c.Set(ctx, k, buf, px).Err(); err != nil {
		return fmt.Errorf("polygateway: redisstore: cache set: %w", err)
	}
	return nil
}
