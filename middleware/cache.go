package middleware

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// cacheFormat tags stored values; a value with another tag reads as a miss.
const cacheFormat = 1

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
	// Recorder, when set, records cache hits (the telemetry layer sits inside
	// the cache layer and never sees them).
	Recorder *Recorder
}

// cacheEntry is the stored form of an answer.
type cacheEntry struct {
	V            int             `json:"v"`
	Content      string          `json:"content"`
	Thinking     string          `json:"thinking,omitempty"`
	Model        string          `json:"model"`
	Provider     string          `json:"provider"`
	SourceName   string          `json:"source_name"`
	FinishReason string          `json:"finish_reason,omitempty"`
	ToolCalls    []core.ToolCall `json:"tool_calls,omitempty"`
}

// Cache returns the cache layer: outermost, a hit skips everything inside
// and returns CacheHit=true with zero usage and zero cost. Only complete
// answers (a finish_reason present) are stored. A backend failure degrades
// to a miss and is logged once.
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
			if err != nil {
				if ctx.Err() != nil {
					return nil, &core.CanceledError{Err: ctx.Err()}
				}
				warn("get", err)
			} else if ok {
				var e cacheEntry
				if json.Unmarshal(raw, &e) == nil && e.V == cacheFormat {
					zero := 0.0
					resp := &core.LLMResponse{
						Content: e.Content, Thinking: e.Thinking, Model: e.Model, Provider: e.Provider,
						SourceName: e.SourceName, FinishReason: e.FinishReason, ToolCalls: e.ToolCalls,
						CacheHit: true, CallID: call.ID, Cost: &zero, UsageSource: core.UsageMeasured,
						Latency: cfg.Clock.Now().Sub(start),
					}
					cfg.Recorder.Record(ctx, call, start, resp.Latency, resp, nil)
					return resp, nil
				}
			}
			resp, err := next(ctx, call)
			if err != nil || resp == nil || resp.FinishReason == "" {
				return resp, err
			}
			val, merr := json.Marshal(cacheEntry{
				V: cacheFormat, Content: resp.Content, Thinking: resp.Thinking, Model: resp.Model,
				Provider: resp.Provider, SourceName: resp.SourceName, FinishReason: resp.FinishReason,
				ToolCalls: resp.ToolCalls,
			})
			if merr == nil {
				if serr := cfg.Cache.Set(context.WithoutCancel(ctx), key, val, cfg.TTL); serr != nil {
					warn("set", serr)
				}
			}
			return resp, nil
		}
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
	h := sha256.New()
	writeField(h, prefix)
	writeField(h, ns)
	writeField(h, call.CacheSalt)
	hashMessages(h, call.Messages)
	if len(call.Params) > 0 {
		b, err := json.Marshal(call.Params)
		if err != nil {
			return "", false
		}
		writeField(h, string(b))
	}
	var sum [sha256.Size]byte
	return "pgw:" + ns + ":" + hex.EncodeToString(h.Sum(sum[:0])), true
}
