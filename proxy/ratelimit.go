package proxy

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// The per-client buckets are golang.org/x/time/rate limiters: a
// maintained token bucket whose every method takes the time explicitly
// (TokensAt, AllowN), so the server's clock (Config.Now) drives it and tests
// step it by hand. The server only adds what rate does not do: a bounded
// set of buckets by name, and two buckets taken together or not at all.

// tokenRate is the refill rate (tokens per second) and size of a token
// bucket.
type tokenRate struct {
	perSec float64
	burst  int
}

// bucket returns a full bucket of r.
func (r tokenRate) bucket() *rate.Limiter { return rate.NewLimiter(rate.Limit(r.perSec), r.burst) }

// wait returns how long from now until b holds one token (0 when it does).
func (r tokenRate) wait(b *rate.Limiter, now time.Time) time.Duration {
	tokens := b.TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / r.perSec * float64(time.Second))
}

// full reports whether b holds a whole burst at now: it is then no
// different from a new bucket.
func (r tokenRate) full(b *rate.Limiter, now time.Time) bool {
	return b.TokensAt(now) >= float64(r.burst)
}

// bucketSet is a bounded set of buckets by name. A bucket that has been
// idle long enough to refill completely is indistinguishable from a new
// one, so such buckets are evicted first; when the set is still full an
// arbitrary bucket is dropped (its owner starts over with a full bucket),
// which keeps memory bounded whatever names clients claim. It is not safe
// for concurrent use: its owner locks.
type bucketSet struct {
	rate    tokenRate
	max     int
	buckets map[string]*rate.Limiter
}

func newBucketSet(r tokenRate, max int) bucketSet {
	return bucketSet{rate: r, max: max, buckets: make(map[string]*rate.Limiter)}
}

// get returns name's bucket, creating a full one (and evicting to make
// room) when there is none.
func (s *bucketSet) get(name string, now time.Time) *rate.Limiter {
	b, ok := s.buckets[name]
	if !ok {
		if len(s.buckets) >= s.max {
			s.evict(now)
		}
		b = s.rate.bucket()
		s.buckets[name] = b
	}
	return b
}

// evict drops every bucket that has refilled completely; if none has, it
// drops one arbitrary bucket.
func (s *bucketSet) evict(now time.Time) {
	n := len(s.buckets)
	for k, b := range s.buckets {
		if s.rate.full(b, now) {
			delete(s.buckets, k)
		}
	}
	if len(s.buckets) < n {
		return
	}
	for k := range s.buckets {
		delete(s.buckets, k)
		return
	}
}

// clientLimiter is the per-client limit without client keys: one token
// bucket per X-Client-Id or peer address, at most max of them.
type clientLimiter struct {
	now func() time.Time
	mu  sync.Mutex
	set bucketSet
}

func newClientLimiter(rate float64, burst, maxClients int, now func() time.Time) *clientLimiter {
	return &clientLimiter{now: now, set: newBucketSet(tokenRate{rate, burst}, maxClients)}
}

// allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is available.
func (l *clientLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.set.get(key, now)
	if wait := l.set.rate.wait(b, now); wait > 0 {
		return false, wait
	}
	b.AllowN(now, 1)
	return true, 0
}

// size returns the number of buckets held.
func (l *clientLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.set.buckets)
}

// keyLimiter is the per-client limit with client keys. Every configured
// key has one bucket of its own, made at construction and never evicted:
// a key's requests, whatever X-Client-Id values they carry, never exceed
// its rate, and no traffic of one key touches another key's bucket. When
// an id rate is set, X-Client-Id sub-divides a key: each (key, id) pair
// also has a bucket, and a request needs a token from both. Id buckets are
// bounded per key, so a key flooding fresh ids only evicts its own.
type keyLimiter struct {
	now  func() time.Time
	rate tokenRate
	ids  bool // id buckets are kept (an id rate is set)
	keys []keyBuckets
}

type keyBuckets struct {
	mu    sync.Mutex
	total *rate.Limiter
	ids   bucketSet
}

// newKeyLimiter makes the buckets of keys keys at rate; idRate.perSec 0
// means ids do not sub-divide a key. Each key keeps at most maxIDs id
// buckets.
func newKeyLimiter(keys int, keyRate, idRate tokenRate, maxIDs int, now func() time.Time) *keyLimiter {
	l := &keyLimiter{now: now, rate: keyRate, ids: idRate.perSec > 0, keys: make([]keyBuckets, keys)}
	for i := range l.keys {
		l.keys[i].total = keyRate.bucket()
		if l.ids {
			l.keys[i].ids = newBucketSet(idRate, maxIDs)
		}
	}
	return l
}

// allow takes one token from key's bucket and, when ids sub-divide keys
// and id is not empty, one from (key, id)'s bucket — both or neither. On
// refusal it returns how long until both hold a token.
func (l *keyLimiter) allow(key int, id string) (bool, time.Duration) {
	now := l.now()
	k := &l.keys[key]
	k.mu.Lock()
	defer k.mu.Unlock()
	wait := l.rate.wait(k.total, now)
	var ib *rate.Limiter
	if l.ids && id != "" {
		ib = k.ids.get(id, now)
		wait = max(wait, k.ids.rate.wait(ib, now))
	}
	if wait > 0 {
		return false, wait
	}
	// Both hold a token at now (checked under k.mu): both are taken.
	k.total.AllowN(now, 1)
	if ib != nil {
		ib.AllowN(now, 1)
	}
	return true, 0
}

// idBuckets returns the number of id buckets key holds.
func (l *keyLimiter) idBuckets(key int) int {
	k := &l.keys[key]
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.ids.buckets)
}
