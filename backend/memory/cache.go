package memory

import (
	"context"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// Cache is the in-process core.Cache: a map with a time-to-live per entry
// and a bound on the number of entries.
//
// Values are copied on Set and on Get, so neither side can change what the
// other holds. An entry set at t with ttl is a hit while now < t+ttl; a Get
// that finds it expired deletes it and misses. Set with a ttl that is not
// positive stores nothing and deletes the key. When a Set of a new key finds
// the cache full, the least recently used entry (by Get or Set) is evicted,
// expired or not.
//
// A Cache is safe for concurrent use; one lock guards it. Create one with
// NewCache; the zero value is not usable.
type Cache struct {
	clk elapsed // times are kept as nanoseconds since its base
	max int

	mu    sync.Mutex
	items map[string]*cacheEntry
	lru   cacheEntry // sentinel of the recency list: lru.next is the newest
}

var _ core.Cache = (*Cache)(nil)

// cacheEntry is one stored value and its place in the recency list.
type cacheEntry struct {
	key        string
	value      []byte
	expires    int64
	prev, next *cacheEntry
}

// NewCache returns an empty Cache. WithClock and WithMaxEntries apply.
func NewCache(opts ...Option) *Cache {
	o := buildOptions(opts)
	c := &Cache{clk: newElapsed(o.clock), max: o.maxEntries, items: make(map[string]*cacheEntry)}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	return c
}

// Get returns a copy of the value stored under key, or (nil, false, nil) on
// a miss. It never fails; ctx is not used.
func (c *Cache) Get(_ context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[key]
	if e == nil {
		return nil, false, nil
	}
	if c.now() >= e.expires {
		c.remove(e)
		return nil, false, nil
	}
	c.unlink(e)
	c.pushFront(e)
	out := make([]byte, len(e.value))
	copy(out, e.value)
	return out, true, nil
}

// Set stores a copy of value under key for ttl. It never fails; ctx is not used.
func (c *Cache) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	stored := make([]byte, len(value))
	copy(stored, value)
	c.mu.Lock()
	defer c.mu.Unlock()
	if ttl <= 0 {
		if e := c.items[key]; e != nil {
			c.remove(e)
		}
		return nil
	}
	expires := addSat(c.now(), ttl)
	if e := c.items[key]; e != nil {
		e.value, e.expires = stored, expires
		c.unlink(e)
		c.pushFront(e)
		return nil
	}
	for len(c.items) >= c.max && c.lru.prev != &c.lru {
		c.remove(c.lru.prev)
	}
	e := &cacheEntry{key: key, value: stored, expires: expires}
	c.items[key] = e
	c.pushFront(e)
	return nil
}

// Len returns the number of entries held, expired ones not yet removed included.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items)
}

func (c *Cache) now() int64 { return c.clk.now() }

func (c *Cache) remove(e *cacheEntry) {
	c.unlink(e)
	delete(c.items, e.key)
}

func (c *Cache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}
