package memory_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
)

func TestCacheEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := context.Background()
	c := memory.NewCache(memory.WithMaxEntries(3), memory.WithClock(backendtest.NewFakeClock(allocEpoch)))
	for _, k := range []string{"a", "b", "c"} {
		_ = c.Set(ctx, k, []byte(k), time.Hour)
	}
	if _, ok, _ := c.Get(ctx, "a"); !ok { // a is now the most recent
		t.Fatal("a missing")
	}
	_ = c.Set(ctx, "d", []byte("d"), time.Hour) // evicts b
	if _, ok, _ := c.Get(ctx, "b"); ok {
		t.Fatal("b survived: the least recently used entry should have been evicted")
	}
	_ = c.Set(ctx, "c", []byte("c2"), time.Hour) // an overwrite is a use and evicts nothing
	_ = c.Set(ctx, "e", []byte("e"), time.Hour)  // evicts a
	for k, want := range map[string]bool{"a": false, "c": true, "d": true, "e": true} {
		if _, ok, _ := c.Get(ctx, k); ok != want {
			t.Errorf("Get(%s) hit = %v, want %v", k, ok, want)
		}
	}
	if n := c.Len(); n != 3 {
		t.Fatalf("Len = %d, want 3", n)
	}
}

func TestCacheDefaultBound(t *testing.T) {
	ctx := context.Background()
	for _, c := range []*memory.Cache{memory.NewCache(), memory.NewCache(memory.WithMaxEntries(0))} {
		for i := range memory.DefaultMaxEntries + 10 {
			_ = c.Set(ctx, strconv.Itoa(i), nil, time.Hour)
		}
		if n := c.Len(); n != memory.DefaultMaxEntries {
			t.Fatalf("Len = %d, want the default bound %d", n, memory.DefaultMaxEntries)
		}
	}
}

func TestCacheExpiredGetDeletes(t *testing.T) {
	ctx := context.Background()
	clk := backendtest.NewFakeClock(allocEpoch)
	c := memory.NewCache(memory.WithClock(clk))
	_ = c.Set(ctx, "k", []byte("v"), time.Second)
	clk.Advance(time.Second)
	if n := c.Len(); n != 1 {
		t.Fatalf("Len = %d before the Get, want 1", n)
	}
	if v, ok, err := c.Get(ctx, "k"); ok || v != nil || err != nil {
		t.Fatalf("Get = %q, %v, %v; want a miss", v, ok, err)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d after the expired Get, want 0", n)
	}
}

func TestCacheNonPositiveTTLDeletes(t *testing.T) {
	ctx := context.Background()
	c := memory.NewCache()
	_ = c.Set(ctx, "k", []byte("v"), time.Hour)
	for _, ttl := range []time.Duration{0, -time.Second} {
		if err := c.Set(ctx, "k", []byte("w"), ttl); err != nil {
			t.Fatal(err)
		}
		if _, ok, _ := c.Get(ctx, "k"); ok {
			t.Fatalf("Set with ttl %v left the key readable", ttl)
		}
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("Len = %d, want 0", n)
	}
}
