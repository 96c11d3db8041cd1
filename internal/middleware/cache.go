package middleware

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/core"
)

// cacheFormat tags stored values; a value with another tag reads as a miss.
const cacheFormat = 0xC2

// CacheConfig configures the cache layer.
type CacheConfig struct {
	// Cache is the backend (required).
	Cache core.Cache
	// Namespace is the default namespace (required: a cache without one
	// would let tenants read each other's answers).
	Namespace string
	// TTL of stored answers (required, > 0).
	TTL time.Duration
	// Scope and Models identify the scope's configuration in the key: the
	// same prompt to a scope with other models is another entry.
	Scope  string
	Models []string
	// Clock defaults to the wall clock; Logger to a discarding logger.
	Clock  core.Clock
	Logger *slog.Logger
	// Stale is how long past TTL an entry is kept to be served, marked
	// degraded, when no source could answer (unavailable scope, backend
	// down, transient failure with a budget of one). 0 = off.
	Stale time.Duration
}

// cacheEntry is the stored form of an answer.
type cacheEntry struct {
	// FreshUntil is when the answer stops being a hit (unix nanoseconds);
	// it is stored until FreshUntil + the stale window.
	FreshUntil                                                   int64
	Content, Thinking, Model, Provider, SourceName, FinishReason string
	ToolCalls                                                    []core.ToolCall
}

// encode renders e as: the format tag, FreshUntil as a varint, then each
// string field as a uvarint
// length and its bytes, then the tool calls as JSON (empty when none).
func (e *cacheEntry) encode() ([]byte, error) {
	var tools []byte
	if len(e.ToolCalls) > 0 {
		var err error
		if tools, err = json.Marshal(e.ToolCalls); err != nil {
			return nil, err
		}
	}
	fields := [...]string{e.Content, e.Thinking, e.Model, e.Provider, e.SourceName, e.FinishReason, string(tools)}
	size := 1 + binary.MaxVarintLen64
	for _, f := range fields {
		size += binary.MaxVarintLen64 + len(f)
	}
	b := make([]byte, 0, size)
	b = append(b, cacheFormat)
	b = binary.AppendVarint(b, e.FreshUntil)
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b, nil
}

// decode parses what encode wrote; anything else (a corrupt or foreign
// value) is reported as not ok and read as a miss.
func (e *cacheEntry) decode(b []byte) bool {
	if len(b) == 0 || b[0] != cacheFormat {
		return false
	}
	b = b[1:]
	fresh, k := binary.Varint(b)
	if k <= 0 {
		return false
	}
	e.FreshUntil, b = fresh, b[k:]
	var fields [7]string
	for i := range fields {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return false
		}
		fields[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	if len(b) != 0 {
		return false
	}
	e.Content, e.Thinking, e.Model, e.Provider, e.SourceName, e.FinishReason = fields[0], fields[1], fields[2], fields[3], fields[4], fields[5]
	e.ToolCalls = nil
	if fields[6] != "" && json.Unmarshal([]byte(fields[6]), &e.ToolCalls) != nil {
		return false
	}
	return true
}

// Cache returns the cache layer, the outermost of the onion. A hit travels
// inward as the call's Served answer, so that the telemetry layer records it
// and no source is asked (CacheHit=true, zero usage and cost); an expired
// entry within the stale window travels as the call's Stale answer, for the
// degradation step. Only complete answers (a finish_reason present) that a
// source gave are stored. A backend failure degrades to a miss and is
// logged once.
func Cache(cfg CacheConfig) core.Middleware {
	if cfg.Clock == nil {
		cfg.Clock = core.SystemClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	models := slices.Clone(cfg.Models)
	slices.Sort(models)
	prefix := "pgw:v1:" + cfg.Scope + ":" + strings.Join(models, ",")
	var warned atomic.Bool
	warn := func(op string, err error) {
		if warned.CompareAndSwap(false, true) {
			cfg.Logger.Warn("polygateway: cache backend failed; serving as miss", "op", op, "err", err)
		}
	}
	return func(next core.Handler) core.Handler {
		return func(ctx context.Context, call *core.Call) (*core.LLMResponse, error) {
			start := cfg.Clock.Now()
			key, cacheable := cacheKey(prefix, cfg.Namespace, call)
			if !cacheable {
				return next(ctx, call)
			}
			raw, ok, err := cfg.Cache.Get(ctx, key)
			var stale *core.LLMResponse
			if err != nil {
				if ctx.Err() != nil {
					return nil, &core.CanceledError{Err: ctx.Err()}
				}
				warn("get", err)
			} else if ok {
				var e cacheEntry
				if e.decode(raw) {
					zero := 0.0
					resp := &core.LLMResponse{
						Content: e.Content, Thinking: e.Thinking, Model: e.Model, Provider: e.Provider,
						SourceName: e.SourceName, FinishReason: e.FinishReason, ToolCalls: e.ToolCalls,
						CacheHit: true, CallID: call.ID, Cost: &zero, UsageSource: core.UsageMeasured,
					}
					// A structured call's check runs on the hit too; a stored
					// answer that no longer passes reads as a miss.
					if call.Check == nil || call.Check(resp) == nil {
						if start.UnixNano() < e.FreshUntil {
							call.Served = resp
							return next(ctx, call)
						}
						// Past the stale window (at once when it is 0) the
						// entry is no answer, though the backend may still
						// hold it (its own clock, a TTL rounded up).
						if start.UnixNano() < e.FreshUntil+int64(cfg.Stale) {
							stale = resp
						}
					}
				}
			}
			call.Stale = stale
			resp, err := next(ctx, call)
			if err != nil || resp == nil || resp.FinishReason == "" || resp.Degraded || resp.CacheHit {
				return resp, err
			}
			entry := cacheEntry{
				FreshUntil: cfg.Clock.Now().Add(cfg.TTL).UnixNano(),
				Content:    resp.Content, Thinking: resp.Thinking, Model: resp.Model,
				Provider: resp.Provider, SourceName: resp.SourceName, FinishReason: resp.FinishReason,
				ToolCalls: resp.ToolCalls,
			}
			if val, merr := entry.encode(); merr == nil {
				store(ctx, cfg, key, val, warn)
			}
			return resp, nil
		}
	}
}

// store writes an answer's entry within the call's deadline: not cut by
// the caller's cancellation (the answer is whole and worth keeping), but
// never holding the call past its deadline. A write the deadline cut is
// no backend failure to warn of; the entry is simply not stored.
func store(ctx context.Context, cfg CacheConfig, key string, val []byte, warn func(string, error)) {
	sctx := context.WithoutCancel(ctx)
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(sctx, dl)
		defer cancel()
	}
	if err := cfg.Cache.Set(sctx, key, val, cfg.TTL+cfg.Stale); err != nil && sctx.Err() == nil {
		warn("set", err)
	}
}

// cacheKey = prefix (scope + models) + namespace + salt + digest of the
// messages and of every generation-affecting parameter. Parameters that
// cannot be encoded make the call uncacheable (ok=false) rather than share a
// key with other calls.
func cacheKey(prefix, namespace string, call *core.Call) (key string, ok bool) {
	ns := call.CacheNamespace
	if ns == "" {
		ns = namespace
	}
	k := keyHashes.Get().(*keyHash)
	defer keyHashes.Put(k)
	k.field(prefix)
	k.field(ns)
	k.field(call.CacheSalt)
	k.field(call.Structured)
	k.messages(call.Messages)
	if len(call.Params) > 0 {
		pj, err := json.Marshal(call.Params)
		if err != nil {
			k.sum() // readies k for reuse
			return "", false
		}
		k.field(string(pj))
	}
	sum := k.sum()
	return "pgw:" + ns + ":" + hex.EncodeToString(sum[:]), true
}
