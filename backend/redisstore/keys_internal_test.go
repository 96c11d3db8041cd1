package redisstore

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

func TestKeyCacheIsBoundedAndShared(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, WithPrefix("p"))
	first := l.scriptKeys("S", "a:b", "")
	if again := l.scriptKeys("S", "a:b", ""); again != first {
		t.Fatal("the keys of one (scope, source) were built twice")
	}
	want := []string{"p:lim:{S}:src:a%3Ab:slots", "p:lim:{S}:src:a%3Ab:log", "p:lim:{S}:src:a%3Ab:tok",
		"p:lim:{S}:global:slots", "p:lim:{S}:global:log", "p:lim:{S}:global:tok", "p:brk:{S}:a%3Ab"}
	for i, k := range want {
		if first.keys[i] != k {
			t.Errorf("key %d = %q, want %q", i, first.keys[i], k)
		}
	}
	if m, g := first.member(42, levelSource), first.member(42, levelGlobal); m != "42" || g != "42/a%3Ab" {
		t.Errorf("members = %q, %q", m, g)
	}
	for i := range maxCachedKeys + 100 {
		l.scriptKeys("S"+strconv.Itoa(i), "a", "")
	}
	if n := len(l.keys.m); n != maxCachedKeys {
		t.Errorf("%d cached key sets, want the bound %d", n, maxCachedKeys)
	}
	// Past the bound keys are still right, only not kept.
	if sk := l.scriptKeys("late", "z", ""); sk.keys[0] != "p:lim:{late}:src:z:slots" {
		t.Errorf("keys past the bound = %v", sk.keys)
	}
}

// TestPooledKeysShareThePoolsTag: every key of a pooled scope, its circuit
// included, carries the pool's hash tag, and the names of scope and source
// stay apart from another scope's.
func TestPooledKeysShareThePoolsTag(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, WithPrefix("p"))
	sk := l.scriptKeys("S:1", "a", "P{x}")
	want := []string{"p:pool:{P%7Bx%7D}:src:S%3A1:a:slots", "p:pool:{P%7Bx%7D}:src:S%3A1:a:log", "p:pool:{P%7Bx%7D}:src:S%3A1:a:tok",
		"p:pool:{P%7Bx%7D}:global:slots", "p:pool:{P%7Bx%7D}:global:log", "p:pool:{P%7Bx%7D}:global:tok",
		"p:pool:{P%7Bx%7D}:brk:S%3A1:a"}
	for i, k := range want {
		if sk.keys[i] != k {
			t.Errorf("key %d = %q, want %q", i, sk.keys[i], k)
		}
	}
	if g := sk.member(7, levelGlobal); g != "7/S%3A1:a" {
		t.Errorf("global member = %q", g)
	}
	if k := usageKeys("p", "S:1", "", "P{x}"); k[0] != want[3] {
		t.Errorf("usage keys of the pool's global gates = %v", k)
	}
}

// TestAcquireRequestNamesEveryGate: the acquire request is JSON with one
// record per gate that is on, each naming its kind, level, limit, window
// and amount, and the levels the lease's low bits name.
func TestAcquireRequestNamesEveryGate(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil)
	req := core.PermitRequest{Scope: "S", Source: "we\"ird\n", SourceLimits: core.Limits{MaxConcurrency: 2, TPM: 1000},
		GlobalLimits: core.Limits{RPM: 5}, Tokens: 30, LeaseTTL: 65 * time.Second, Pool: "P"}
	lease := newLease(&req)
	if lease&leaseLevels != slotsBit(levelSource)|logBit(levelSource)|logBit(levelGlobal) || lease&leasePooled == 0 {
		t.Fatalf("lease bits %b", lease&leaseMeta)
	}
	if end, ok := leaseEnd(lease, time.Unix(0, 0)); !ok || end.Sub(time.Unix(0, 0)) < 65*time.Second || end.Sub(time.Unix(0, 0)) > 130*time.Second {
		t.Fatalf("lease end bound %v, %v", end, ok)
	}
	w := newRequest()
	w.open()
	l.writeAcquire(w, &req, l.scriptKeys("S", req.Source, "P"), lease)
	w.close()
	var got struct {
		LeaseTTL int64 `json:"lease_ttl"`
		Levels   []struct {
			Key    int
			Member string
		}
		Gates []struct {
			Gate                         int
			Kind                         string
			Level, Limit, Window, Amount int64
		}
	}
	if err := json.Unmarshal([]byte(w.String()), &got); err != nil {
		t.Fatalf("%s: %v", w.String(), err)
	}
	if got.LeaseTTL != 65_000_000 || len(got.Levels) != 2 || got.Levels[0].Key != 1 || got.Levels[1].Key != 4 ||
		got.Levels[1].Member != strconv.FormatUint(lease, 10)+"/S:we\"ird\n" {
		t.Fatalf("request %s", w.String())
	}
	type g = struct {
		Gate                         int
		Kind                         string
		Level, Limit, Window, Amount int64
	}
	want := []g{
		{int(core.GateSourceConcurrency), "conc", 1, 2, 0, 0},
		{int(core.GateSourceTPM), "sum", 1, 1000, 60_000_000, 30},
		{int(core.GateGlobalRPM), "rate", 2, 5, 60_000_000, 0},
	}
	if len(got.Gates) != len(want) {
		t.Fatalf("gates %+v", got.Gates)
	}
	for i := range want {
		if got.Gates[i] != want[i] {
			t.Errorf("gate %d = %+v, want %+v", i, got.Gates[i], want[i])
		}
	}
}

func TestBackoffDoublesToItsCap(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]time.Duration{1: 50 * time.Millisecond, 2: 100 * time.Millisecond, 5: 800 * time.Millisecond, 7: 2 * time.Second, 50: 2 * time.Second} {
		if got := backoff(n); got != want {
			t.Errorf("backoff(%d) = %v, want %v", n, got, want)
		}
	}
}
