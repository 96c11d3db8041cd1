package redisstore

import (
	"strconv"
	"sync"
)

// maxCachedKeys bounds a Limiter's key cache: configured scopes and
// sources are few, but a caller may name any.
const maxCachedKeys = 4096

// scriptKeys are the keys and names the scripts of one (scope, source)
// need, built once.
type scriptKeys struct {
	// limiter holds the six limiter keys: the source's level, then the
	// scope's global one.
	limiter []string
	// circuit is limiter followed by the circuit's key under the Limiter's
	// own prefix, for a Breaker that shares it.
	circuit []string
	// scope and source name the pair; esc is the source escaped, for
	// global members.
	scope, source, esc string
}

// keyCache maps (scope, source) to its scriptKeys. It is safe for
// concurrent use; its zero value is empty and ready.
type keyCache struct {
	mu sync.RWMutex
	m  map[[2]string]*scriptKeys
}

// scriptKeys returns the keys of (scope, source), from the cache when it
// has them. The slices are shared: callers only read them.
func (l *Limiter) scriptKeys(scope, source string) *scriptKeys {
	id := [2]string{scope, source}
	l.keys.mu.RLock()
	sk := l.keys.m[id]
	l.keys.mu.RUnlock()
	if sk != nil {
		return sk
	}
	s, g := l.levelKeys(scope, source), l.levelKeys(scope, "")
	limiter := []string{s[0], s[1], s[2], g[0], g[1], g[2]}
	sk = &scriptKeys{
		limiter: limiter,
		circuit: append(limiter[:6:6], circuitKey(l.opt.prefix, scope, source)),
		scope:   scope,
		source:  source,
		esc:     escape(source),
	}
	l.keys.mu.Lock()
	if l.keys.m == nil {
		l.keys.m = make(map[[2]string]*scriptKeys)
	}
	if len(l.keys.m) < maxCachedKeys {
		l.keys.m[id] = sk
	}
	l.keys.mu.Unlock()
	return sk
}

// levelKeys returns the slots, log and tok keys of a level: a source, or
// the scope's global gates when source is "".
func (l *Limiter) levelKeys(scope, source string) [3]string {
	base := l.opt.prefix + ":lim:" + scopeTag(scope) + ":"
	if source == "" {
		base += "global:"
	} else {
		base += "src:" + escape(source) + ":"
	}
	return [3]string{base + "slots", base + "log", base + "tok"}
}

// withCircuit returns the seven keys of an Admit or Finish script: the
// limiter's six, then br's circuit for (scope, source).
func (sk *scriptKeys) withCircuit(l *Limiter, br *Breaker, scope, source string) []string {
	if br.opt.prefix == l.opt.prefix && scope == sk.scope && source == sk.source {
		return sk.circuit
	}
	return append(sk.limiter[:6:6], circuitKey(br.opt.prefix, scope, source))
}

// members returns a permit's member on its source's level (the lease) and
// on the scope's global level (lease/source), so that a release naming
// another source never frees the permit's global slot.
func (sk *scriptKeys) members(lease uint64) (string, string) {
	m := strconv.FormatUint(lease, 10)
	return m, m + "/" + sk.esc
}

// circuitKey returns the key of the circuit of (scope, source) under prefix.
func circuitKey(prefix, scope, source string) string {
	return prefix + ":brk:" + scopeTag(scope) + ":" + escape(source)
}
