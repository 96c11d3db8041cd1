package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// circuitKeyOf returns the one circuit key under prefix.
func circuitKeyOf(t *testing.T, c *redis.Client, prefix string) string {
	t.Helper()
	keys, err := c.Keys(t.Context(), prefix+":brk:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("circuit keys under %s: %v %v", prefix, keys, err)
	}
	return keys[0]
}

// TestAPushbackOutlivesEveryWriteOfItsCircuit: the pushback is a field
// of the circuit's hash, so the key must last until the pushback ends.
// A pushback of two days — longer than the day an idle circuit is kept —
// survives each write that sets the circuit's TTL: a failure (the full
// path), a success after it and a windowed success (the fast paths), a
// reset, and switching the source off and on. After each, the key's TTL
// still covers the pushback and Allow still refuses with PushedBack.
func TestAPushbackOutlivesEveryWriteOfItsCircuit(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	prefix := freshPrefix(t, c)
	ctx := t.Context()
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	const pushback = 48 * time.Hour
	plain := core.BreakerConfig{FailThreshold: 3, Cooldown: time.Second}
	windowed := core.BreakerConfig{FailThreshold: 3, Cooldown: time.Second, FailRate: 0.5, Window: time.Minute, MinCalls: 100}
	if err := br.PushBack(ctx, "PB", "s", plain, pushback); err != nil {
		t.Fatal(err)
	}
	key := circuitKeyOf(t, c, prefix)
	record := func(cfg core.BreakerConfig, o core.Outcome) func() error {
		return func() error {
			snap, err := br.Snapshot(ctx, "PB", "s", cfg)
			if err != nil {
				return err
			}
			_, err = br.Record(ctx, "PB", "s", core.Admission{Allowed: true, Epoch: snap.Epoch}, o, cfg)
			return err
		}
	}
	steps := []struct {
		name  string
		write func() error
		off   bool // the source is switched off: Allow answers Disabled first
	}{
		{"the pushback itself", func() error { return nil }, false},
		{"a failure", record(plain, core.OutcomeFailure), false},
		{"a success after a failure", record(plain, core.OutcomeSuccess), false},
		{"a first windowed success", record(windowed, core.OutcomeSuccess), false},
		{"a second windowed success", record(windowed, core.OutcomeSuccess), false},
		{"a reset", func() error { return br.Reset(ctx, "PB", "s", plain) }, false},
		{"switching off", func() error { return br.SetEnabled(ctx, "PB", "s", plain, false) }, true},
		{"switching on", func() error { return br.SetEnabled(ctx, "PB", "s", plain, true) }, false},
	}
	for _, s := range steps {
		if err := s.write(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		ttl, err := c.PTTL(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if ttl >= 0 && ttl < pushback-time.Hour {
			t.Fatalf("after %s the circuit's key expires in %v, before its %v pushback ends", s.name, ttl, pushback)
		}
		a, err := br.Allow(ctx, "PB", "s", plain)
		if err != nil {
			t.Fatal(err)
		}
		if s.off && (a.Allowed || !a.Disabled) {
			t.Fatalf("after %s Allow = %+v, want disabled", s.name, a)
		}
		if !s.off && (a.Allowed || !a.PushedBack || a.RetryAfter < pushback-time.Hour) {
			t.Fatalf("after %s Allow = %+v, want pushed back for about %v", s.name, a, pushback)
		}
	}
}

// TestAPushbackOnAnUnknownSourceLeavesNothingBehind: a pushback on a
// source no call has touched makes its circuit's key, which expires about
// a second after the pushback ends, not a day later.
func TestAPushbackOnAnUnknownSourceLeavesNothingBehind(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	prefix := freshPrefix(t, c)
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix))
	if err := br.PushBack(t.Context(), "PB", "s", core.BreakerConfig{}, 2*time.Second); err != nil {
		t.Fatal(err)
	}
	ttl, err := c.PTTL(t.Context(), circuitKeyOf(t, c, prefix)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if ttl <= 2*time.Second || ttl > 3*time.Second {
		t.Fatalf("the circuit made by a 2 s pushback expires in %v, want within 2–3 s", ttl)
	}
}

// TestAnEndedPushbackIsDroppedByTheNextAllow: once the pushback has ended
// (on the breaker's clock), Allow admits and drops the field, so later
// calls read no clock for it.
func TestAnEndedPushbackIsDroppedByTheNextAllow(t *testing.T) {
	t.Parallel()
	c := newClient(t)
	prefix := freshPrefix(t, c)
	clk := backendtest.NewFakeClock(clockEpoch)
	br := redisstore.NewBreaker(c, redisstore.WithPrefix(prefix), redisstore.WithClock(clk))
	ctx := context.Background()
	if err := br.PushBack(ctx, "PB", "s", core.BreakerConfig{}, time.Second); err != nil {
		t.Fatal(err)
	}
	key := circuitKeyOf(t, c, prefix)
	if a, err := br.Allow(ctx, "PB", "s", core.BreakerConfig{}); err != nil || a.Allowed || !a.PushedBack {
		t.Fatalf("Allow during the pushback = %+v %v, want pushed back", a, err)
	}
	clk.Advance(time.Second)
	if a, err := br.Allow(ctx, "PB", "s", core.BreakerConfig{}); err != nil || !a.Allowed || a.PushedBack {
		t.Fatalf("Allow after the pushback = %+v %v, want allowed", a, err)
	}
	if n, err := c.HExists(ctx, key, "pb").Result(); err != nil || n {
		t.Fatalf("the ended pushback's field is still there (%v %v)", n, err)
	}
}
