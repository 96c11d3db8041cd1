package proxy

import (
	"sync"
	"time"
)

// tokenRate is the refill rate (tokens per second) and size of a token
// bucket.
type tokenRate struct{ perSec, burst float64 }

type bucket struct {
	tokens float64
	last   time.Time
}

// refill brings b's tokens up to now.
func (r tokenRate) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(r.burst, b.tokens+el.Seconds()*r.perSec)
		b.last = now
	}
}

// wait returns how long until b holds one token (0 when it does).
func (r tokenRate) wait(b *bucket) time.Duration {
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / r.perSec * float64(time.Second))
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
	buckets map[string]*bucket
}

func newBucketSet(rate tokenRate, max int) bucketSet {
	return bucketSet{rate: rate, max: max, buckets: make(map[string]*bucket)}
}

// get returns name's bucket refilled up to now, creating a full one (and
// evicting to make room) when there is none.
func (s *bucketSet) get(name string, now time.Time) *bucket {
	b, ok := s.buckets[name]
	if !ok {
		if len(s.buckets) >= s.max {
			s.evict(now)
		}
		b = &bucket{tokens: s.rate.burst, last: now}
		s.buckets[name] = b
		return b
	}
	s.rate.refill(b, now)
	return b
}

// evict drops every bucket that has refilled completely; if none has, it
// drops one arbitrary bucket.
func (s *bucketSet) evict(now time.Time) {
	full := time.Duration(s.rate.burst / s.rate.perSec * float64(time.Second))
	n := len(s.buckets)
	for k, b := range s.buckets {
		if now.Sub(b.last) >= full {
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
	return &clientLimiter{now: now, set: newBucketSet(tokenRate{rate, float64(burst)}, maxClients)}
}

// allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is available.
func (l *clientLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.set.get(key, now)
	if wait := l.set.rate.wait(b); wait > 0 {
		return false, wait
	}
	b.tokens--
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
	total bucket
	ids   bucketSet
}

// newKeyLimiter makes the buckets of keys keys at rate; idRate.perSec 0
// means ids do not sub-divide a key. Each key keeps at most maxIDs id
// buckets.
func newKeyLimiter(keys int, rate, idRate tokenRate, maxIDs int, now func() time.Time) *keyLimiter {
	l := &keyLimiter{now: now, rate: rate, ids: idRate.perSec > 0, keys: make([]keyBuckets, keys)}
	start := now()
	for i := range l.keys {
		l.keys[i].total = bucket{tokens: rate.burst, last: start}
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
	l.rate.refill(&k.total, now)
	wait := l.rate.wait(&k.total)
	var ib *bucket
	if l.ids && id != "" {
		ib = k.ids.get(id, now)
		wait = max(wait, k.ids.rate.wait(ib))
	}
	if wait > 0 {
		return false, wait
	}
	k.total.tokens--
	if ib != nil {
		ib.tokens--
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
