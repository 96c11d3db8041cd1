package redisstore

import (
	"strconv"
	"testing"
)

func TestKeyCacheIsBoundedAndShared(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, WithPrefix("p"))
	first := l.scriptKeys("S", "a:b")
	if again := l.scriptKeys("S", "a:b"); again != first {
		t.Fatal("the keys of one (scope, source) were built twice")
	}
	want := []string{"p:lim:{S}:src:a%3Ab:slots", "p:lim:{S}:src:a%3Ab:log", "p:lim:{S}:src:a%3Ab:tok",
		"p:lim:{S}:global:slots", "p:lim:{S}:global:log", "p:lim:{S}:global:tok", "p:brk:{S}:a%3Ab"}
	for i, k := range want {
		if first.circuit[i] != k {
			t.Errorf("key %d = %q, want %q", i, first.circuit[i], k)
		}
	}
	if len(first.limiter) != 6 || first.limiter[5] != want[5] {
		t.Errorf("limiter keys = %v", first.limiter)
	}
	if m, g := first.members(42); m != "42" || g != "42/a%3Ab" {
		t.Errorf("members = %q, %q", m, g)
	}
	for i := range maxCachedKeys + 100 {
		l.scriptKeys("S"+strconv.Itoa(i), "a")
	}
	if n := len(l.keys.m); n != maxCachedKeys {
		t.Errorf("%d cached key sets, want the bound %d", n, maxCachedKeys)
	}
	// Past the bound keys are still right, only not kept.
	if sk := l.scriptKeys("late", "z"); sk.limiter[0] != "p:lim:{late}:src:z:slots" {
		t.Errorf("keys past the bound = %v", sk.limiter)
	}
}
