package middleware

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

const testScope = "LLM"

// recordingSink is a core.TelemetrySink that keeps accepted rows; with err
// set it refuses every row.
type recordingSink struct {
	mu   sync.Mutex
	recs []core.TelemetryRecord
	err  error
	// tries counts Write calls, accepted or not.
	tries int
}

func (s *recordingSink) Write(_ context.Context, rec core.TelemetryRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries++
	if s.err != nil {
		return s.err
	}
	rec.Render()
	s.recs = append(s.recs, rec)
	return nil
}
func (s *recordingSink) Close(context.Context) error { return nil }
func (s *recordingSink) records() []core.TelemetryRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.recs)
}

// failingCache is a core.Cache whose backend is down.
type failingCache struct {
	mu         sync.Mutex
	gets, sets int
}

var errCacheDown = errors.New("cache backend down")

func (c *failingCache) Get(context.Context, string) ([]byte, bool, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return nil, false, errCacheDown
}

func (c *failingCache) Set(context.Context, string, []byte, time.Duration) error {
	c.mu.Lock()
	c.sets++
	c.mu.Unlock()
	return errCacheDown
}

// recordingCache wraps a core.Cache and keeps every key and value it sees.
type recordingCache struct {
	inner core.Cache
	mu    sync.Mutex
	keys  []string
	sets  map[string][]byte
}

func newRecordingCache() *recordingCache {
	return &recordingCache{inner: memory.NewCache(), sets: map[string][]byte{}}
}

func (c *recordingCache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	c.mu.Lock()
	c.keys = append(c.keys, key)
	c.mu.Unlock()
	return c.inner.Get(ctx, key)
}

func (c *recordingCache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	c.mu.Lock()
	c.keys = append(c.keys, key)
	c.sets[key] = slices.Clone(value)
	c.mu.Unlock()
	return c.inner.Set(ctx, key, value, ttl)
}

func (c *recordingCache) stored() map[string][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][]byte, len(c.sets))
	for k, v := range c.sets {
		out[k] = v
	}
	return out
}
