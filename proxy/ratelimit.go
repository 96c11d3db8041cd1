package proxy

import (
	"sync"
	"time"
)

// clientLimiter is a per-client token bucket with a bounded number of
// buckets. A bucket that has been idle long enough to refill completely is
// indistinguishable from a new one, so such buckets are evicted first; when
// the map is still full an arbitrary bucket is dropped (that client starts
// over with a full bucket), which keeps memory bounded whatever clients
// claim to be.
type clientLimiter struct {
	rate  float64 // tokens per second
	burst float64
	max   int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newClientLimiter(rate float64, burst, maxClients int, now func() time.Time) *clientLimiter {
	return &clientLimiter{rate: rate, burst: float64(burst), max: maxClients, now: now, buckets: make(map[string]*bucket)}
}

// allow takes one token from key's bucket. When the bucket is empty it
// returns false and how long until a token is available.
func (l *clientLimiter) allow(key string) (bool, time.Duration) {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[key]
	if !ok {
		if len(l.buckets) >= l.max {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, last: now}
		l.buckets[key] = b
	} else if el := now.Sub(b.last); el > 0 {
		b.tokens = min(l.burst, b.tokens+el.Seconds()*l.rate)
		b.last = now
	}
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	wait := time.Duration((1 - b.tokens) / l.rate * float64(time.Second))
	return false, wait
}

// evict drops every bucket that has refilled completely; if none has, it
// drops one arbitrary bucket. Called with mu held.
func (l *clientLimiter) evict(now time.Time) {
	full := time.Duration(l.burst / l.rate * float64(time.Second))
	n := len(l.buckets)
	for k, b := range l.buckets {
		if now.Sub(b.last) >= full {
			delete(l.buckets, k)
		}
	}
	if len(l.buckets) < n {
		return
	}
	for k := range l.buckets {
		delete(l.buckets, k)
		return
	}
}

// size returns the number of buckets held.
func (l *clientLimiter) size() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}
