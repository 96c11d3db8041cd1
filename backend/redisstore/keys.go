package redisstore

import (
	"strconv"
	"sync"
)

// maxCachedKeys bounds each of a Limiter's key caches: configured scopes,
// sources and budgets are few, but a caller may name any.
const maxCachedKeys = 4096

// keyCache maps an ID to the keys built for it, keeping up to
// maxCachedKeys of them. It is safe for concurrent use; its zero value is
// empty and ready.
type keyCache[I comparable, K any] struct {
	mu sync.RWMutex
	m  map[I]K
}

// get returns the keys of id, from the cache when it has them, else built
// by build (and kept while the cache has room).
func (c *keyCache[I, K]) get(id I, build func() K) K {
	c.mu.RLock()
	k, ok := c.m[id]
	c.mu.RUnlock()
	if ok {
		return k
	}
	k = build()
	c.mu.Lock()
	if c.m == nil {
		c.m = make(map[I]K)
	}
	if len(c.m) < maxCachedKeys {
		c.m[id] = k
	}
	c.mu.Unlock()
	return k
}

// circuitIndex is the circuit's index (from 1, as in Lua) in the keys of a
// script that touches both the limiter and the circuit.
//
// The keys of a script are, in order: each level's slots, log and tok; the
// circuit (Admit, Finish, reclaims); the queue's four (Admit, Finish); each
// level's tombstone register (reclaims); then the hashes of the request's
// budgets, one per budget in the request's order (see budget.go for their
// names). Budget keys carry no hash tag on a single node or Sentinel, where
// a budget's spend is shared across scopes, and the scope's or pool's tag
// on a cluster, where every key of one script must lie in one slot: there
// a budget is counted per scope (or pool).
const circuitIndex = 3*numLevels + 1

// scriptKeys are the keys and member suffixes the scripts of one
// (scope, source, pool) need, built once.
type scriptKeys struct {
	// keys holds, for each level, its slots, log and tok key (level i's at
	// 3i..3i+2), then the circuit's key under the Limiter's own prefix.
	keys []string
	// gone holds each level's tombstone register, used by reclaims only.
	gone []string
	// suffix is what each level's member adds to the lease, and bsuffix
	// what the member on a budget adds: /scope:source, as budgets are
	// shared across scopes.
	suffix              [numLevels]string
	bsuffix             string
	scope, source, pool string
}

// scriptKeys returns the keys of (scope, source) in pool, from the cache
// when it has them. The slices are shared: callers only read them.
func (l *Limiter) scriptKeys(scope, source, pool string) *scriptKeys {
	return l.keys.get([3]string{scope, source, pool}, func() *scriptKeys {
		return l.buildScriptKeys(scope, source, pool)
	})
}

// buildScriptKeys builds the keys of (scope, source) in pool.
func (l *Limiter) buildScriptKeys(scope, source, pool string) *scriptKeys {
	sk := &scriptKeys{scope: scope, source: source, pool: pool}
	for i := range numLevels {
		base := levelBase(l.opt.prefix, scope, source, pool, i)
		sk.keys = append(sk.keys, base+"slots", base+"log", base+"tok")
		sk.gone = append(sk.gone, base+"gone")
	}
	ck := circuitKey(l.opt.prefix, scope, source, pool)
	sk.keys = append(sk.keys, ck)
	sk.suffix[levelGlobal] = "/" + escape(source)
	sk.bsuffix = "/" + escape(scope) + ":" + escape(source)
	if pool != "" {
		sk.suffix[levelGlobal] = sk.bsuffix
	}
	return sk
}

// levelBase returns the common start of a level's three keys.
//
// Without a pool every key of a scope carries the scope as its hash tag;
// in a pool every key of every scope of the pool carries the pool's, so
// that one script may touch a source's gates, the pool's global gates and
// the circuit in one Redis Cluster slot:
//
//	{prefix}:lim:{SCOPE}:src:{source}:      {prefix}:pool:{POOL}:src:{scope}:{source}:
//	{prefix}:lim:{SCOPE}:global:            {prefix}:pool:{POOL}:global:
func levelBase(prefix, scope, source, pool string, level int) string {
	var base string
	if pool == "" {
		base = prefix + ":lim:" + hashTag(scope) + ":"
		if level == levelSource {
			return base + "src:" + escape(source) + ":"
		}
	} else {
		base = prefix + ":pool:" + hashTag(pool) + ":"
		if level == levelSource {
			return base + "src:" + escape(scope) + ":" + escape(source) + ":"
		}
	}
	return base + "global:"
}

// usageKeys returns the slots, log and tok keys of one level: a source, or
// the global gates when source is "".
func usageKeys(prefix, scope, source, pool string) []string {
	level := levelSource
	if source == "" {
		level = levelGlobal
	}
	base := levelBase(prefix, scope, source, pool, level)
	return []string{base + "slots", base + "log", base + "tok"}
}

// withCircuit returns the keys of a Finish or reclaim script: the
// limiter's, then br's circuit of the same (scope, source, pool). The
// slice may be shared: callers copy it to add keys.
func (sk *scriptKeys) withCircuit(l *Limiter, br *Breaker) []string {
	if br == nil || br.opt.prefix == l.opt.prefix {
		return sk.keys[:circuitIndex:circuitIndex]
	}
	keys := append([]string(nil), sk.keys[:circuitIndex]...)
	keys[circuitIndex-1] = circuitKey(br.opt.prefix, sk.scope, sk.source, sk.pool)
	return keys
}

// reclaimKeys returns the keys of a reclaim script: withCircuit's, then
// each level's tombstone register (level i's at goneIndex(i)).
func (sk *scriptKeys) reclaimKeys(l *Limiter, br *Breaker) []string {
	return append(append([]string(nil), sk.withCircuit(l, br)...), sk.gone...)
}

// goneIndex is the index (from 1, as in Lua) of level i's tombstone
// register in the keys of a reclaim script.
func goneIndex(i int) int64 { return int64(circuitIndex + 1 + i) }

// member returns a permit's member on level i: the lease on its source's
// level and lease/source (lease/scope:source in a pool) on the global one,
// so that a release naming another source never frees the permit's global
// slot.
func (sk *scriptKeys) member(lease uint64, i int) string {
	return strconv.FormatUint(lease, 10) + sk.suffix[i]
}

// budgetMember returns a permit's member on its budgets: lease/scope:source.
func (sk *scriptKeys) budgetMember(lease uint64) string {
	return strconv.FormatUint(lease, 10) + sk.bsuffix
}

// circuitKey returns the key of the circuit of (scope, source) under
// prefix: {prefix}:brk:{SCOPE}:{source}, or in a pool
// {prefix}:pool:{POOL}:brk:{scope}:{source}.
func circuitKey(prefix, scope, source, pool string) string {
	if pool == "" {
		return prefix + ":brk:" + hashTag(scope) + ":" + escape(source)
	}
	return prefix + ":pool:" + hashTag(pool) + ":brk:" + escape(scope) + ":" + escape(source)
}
