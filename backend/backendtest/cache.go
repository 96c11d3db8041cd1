package backendtest

import (
	"bytes"
	"testing"
	"time"

	"github.com/polygateway/polygateway/core"
)

// RunCacheSuite runs the core.Cache conformance suite. newCache is called
// once per subtest with that subtest's t and a fresh FakeClock; it may return
// the same shared backend every time, since each subtest uses its own keys.
//
// Semantics pinned by the suite, beyond the port contract: an entry set at t
// with ttl is a hit while now < t+ttl and a miss from t+ttl on; an overwrite
// replaces the value and restarts the ttl; a hit on an empty value returns a
// non-nil empty slice; the slice Get returns is the caller's to change.
func RunCacheSuite(t *testing.T, newCache func(t *testing.T, clk *FakeClock) core.Cache) {
	t.Helper()
	for _, tc := range cacheCases {
		t.Run(tc.name, func(t *testing.T) {
			clk := NewFakeClock(epoch())
			tc.run(&cacheHarness{t: t, c: newCache(t, clk), clk: clk, prefix: t.Name() + "/"})
		})
	}
}

var cacheCases = []struct {
	name string
	run  func(h *cacheHarness)
}{
	{"Miss", cacheMiss},
	{"RoundTrip", cacheRoundTrip},
	{"TTLExpiry", cacheTTL},
	{"Overwrite", cacheOverwrite},
	{"StoresACopy", cacheCopies},
	{"KeysAreIndependent", cacheIndependent},
	{"EmptyValue", cacheEmpty},
}

// cacheHarness carries one subtest's cache, clock and key prefix.
type cacheHarness struct {
	t      *testing.T
	c      core.Cache
	clk    *FakeClock
	prefix string
}

func (h *cacheHarness) set(key string, v []byte, ttl time.Duration) {
	h.t.Helper()
	if err := h.c.Set(h.t.Context(), h.prefix+key, v, ttl); err != nil {
		h.t.Fatalf("Set(%q): %v", key, err)
	}
}

func (h *cacheHarness) get(key string) ([]byte, bool) {
	h.t.Helper()
	v, ok, err := h.c.Get(h.t.Context(), h.prefix+key)
	if err != nil {
		h.t.Fatalf("Get(%q): %v", key, err)
	}
	if !ok && v != nil {
		h.t.Fatalf("Get(%q) missed but returned %q", key, v)
	}
	return v, ok
}

func (h *cacheHarness) hit(key, want string) []byte {
	h.t.Helper()
	v, ok := h.get(key)
	if !ok {
		h.t.Fatalf("Get(%q) at %v missed, want %q", key, h.clk.Now().Sub(epoch()), want)
	}
	if string(v) != want {
		h.t.Fatalf("Get(%q) = %q, want %q", key, v, want)
	}
	return v
}

func (h *cacheHarness) miss(key string) {
	h.t.Helper()
	if v, ok := h.get(key); ok {
		h.t.Fatalf("Get(%q) at %v hit %q, want a miss", key, h.clk.Now().Sub(epoch()), v)
	}
}

func cacheMiss(h *cacheHarness) {
	h.miss("absent")
	h.miss("")
}

func cacheRoundTrip(h *cacheHarness) {
	want := []byte("{\"content\":\"hello\",\"bytes\":\"\x00\xff\"}")
	h.set("k", want, time.Hour)
	got := h.hit("k", string(want))
	if !bytes.Equal(got, want) {
		h.t.Fatalf("round trip changed the bytes")
	}
	h.hit("k", string(want))
}

func cacheTTL(h *cacheHarness) {
	h.set("k", []byte("v"), 10*time.Second)
	h.clk.Advance(5 * time.Second)
	h.hit("k", "v")
	h.clk.Advance(5*time.Second - time.Millisecond)
	h.hit("k", "v")
	h.clk.Advance(time.Millisecond)
	h.miss("k")
	h.clk.Advance(time.Hour)
	h.miss("k")
	// Expiry is per entry.
	h.set("short", []byte("s"), time.Second)
	h.set("long", []byte("l"), time.Minute)
	h.clk.Advance(2 * time.Second)
	h.miss("short")
	h.hit("long", "l")
}

func cacheOverwrite(h *cacheHarness) {
	h.set("k", []byte("first"), 10*time.Second)
	h.clk.Advance(8 * time.Second)
	h.set("k", []byte("second, longer than the first"), 10*time.Second)
	h.hit("k", "second, longer than the first")
	h.clk.Advance(7 * time.Second) // past the first ttl, within the second
	h.hit("k", "second, longer than the first")
	h.set("k", []byte("3"), 10*time.Second)
	h.hit("k", "3")
	h.clk.Advance(10 * time.Second)
	h.miss("k")
	h.set("k", []byte("after expiry"), time.Minute)
	h.hit("k", "after expiry")
}

func cacheCopies(h *cacheHarness) {
	v := []byte("original")
	h.set("k", v, time.Hour)
	copy(v, "XXXXXXXX")
	got := h.hit("k", "original")
	copy(got, "YYYYYYYY")
	h.hit("k", "original")
	// A Set from a sub-slice does not expose the rest of the array.
	big := []byte("abcdefgh")
	h.set("sub", big[:3], time.Hour)
	got = h.hit("sub", "abc")
	_ = append(got, 'Z')
	copy(big, "12345678")
	h.hit("sub", "abc")
}

func cacheIndependent(h *cacheHarness) {
	h.set("a", []byte("A"), time.Hour)
	h.set("b", []byte("B"), time.Minute)
	h.hit("a", "A")
	h.hit("b", "B")
	h.miss("c")
	h.set("a", []byte("A2"), time.Hour)
	h.hit("b", "B")
	h.clk.Advance(2 * time.Minute)
	h.miss("b")
	h.hit("a", "A2")
}

func cacheEmpty(h *cacheHarness) {
	h.set("empty", []byte{}, time.Hour)
	v, ok := h.get("empty")
	if !ok || v == nil || len(v) != 0 {
		h.t.Fatalf("Get of an empty value = %q, %v; want a non-nil empty hit", v, ok)
	}
}
