// Package outside is a governance backend written outside the polygateway
// module, against its public ports only: a core.Limiter, core.Breaker,
// core.Admitter and core.Cache that keep their state in the in-process
// backends of backend/memory and delegate every method to them. Its tests
// run the backendtest conformance suites, so a port that could not be
// implemented from another module, or a suite that needed more than the
// ports, fails there.
package outside

import (
	"context"
	"time"

	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

var (
	_ core.Limiter  = (*Limiter)(nil)
	_ core.Breaker  = (*Breaker)(nil)
	_ core.Admitter = (*Admitter)(nil)
	_ core.Cache    = (*Cache)(nil)
)

// Limiter is a core.Limiter kept by a memory.Limiter. Safe for concurrent
// use.
type Limiter struct{ m *memory.Limiter }

// NewLimiter returns a Limiter; opts are the memory limiter's.
func NewLimiter(opts ...memory.Option) *Limiter {
	return &Limiter{m: memory.NewLimiter(opts...)}
}

// TryAcquire implements core.Limiter.
func (l *Limiter) TryAcquire(ctx context.Context, req core.PermitRequest) (core.Grant, error) {
	return l.m.TryAcquire(ctx, req)
}

// Release implements core.Limiter.
func (l *Limiter) Release(ctx context.Context, p core.Permit, s core.Settlement) error {
	return l.m.Release(ctx, p, s)
}

// Usage implements core.Limiter.
func (l *Limiter) Usage(ctx context.Context, scope, source string) (core.LimiterUsage, error) {
	return l.m.Usage(ctx, scope, source)
}

// Budgets implements core.Limiter.
func (l *Limiter) Budgets(ctx context.Context, scope, pool string, budgets []core.Budget) ([]core.BudgetUsage, error) {
	return l.m.Budgets(ctx, scope, pool, budgets)
}

// Breaker is a core.Breaker kept by a memory.Breaker. Safe for concurrent
// use.
type Breaker struct{ m *memory.Breaker }

// NewBreaker returns a Breaker; opts are the memory breaker's.
func NewBreaker(opts ...memory.Option) *Breaker {
	return &Breaker{m: memory.NewBreaker(opts...)}
}

// Allow implements core.Breaker.
func (b *Breaker) Allow(ctx context.Context, scope, source string, cfg core.BreakerConfig) (core.Admission, error) {
	return b.m.Allow(ctx, scope, source, cfg)
}

// Record implements core.Breaker.
func (b *Breaker) Record(ctx context.Context, scope, source string, adm core.Admission, o core.Outcome, cfg core.BreakerConfig) (bool, error) {
	return b.m.Record(ctx, scope, source, adm, o, cfg)
}

// Snapshot implements core.Breaker.
func (b *Breaker) Snapshot(ctx context.Context, scope, source string, cfg core.BreakerConfig) (core.BreakerSnapshot, error) {
	return b.m.Snapshot(ctx, scope, source, cfg)
}

// Reset implements core.Breaker.
func (b *Breaker) Reset(ctx context.Context, scope, source string, cfg core.BreakerConfig) error {
	return b.m.Reset(ctx, scope, source, cfg)
}

// SetEnabled implements core.Breaker.
func (b *Breaker) SetEnabled(ctx context.Context, scope, source string, cfg core.BreakerConfig, enabled bool) error {
	return b.m.SetEnabled(ctx, scope, source, cfg, enabled)
}

// PushBack implements core.Breaker.
func (b *Breaker) PushBack(ctx context.Context, scope, source string, cfg core.BreakerConfig, d time.Duration) error {
	return b.m.PushBack(ctx, scope, source, cfg, d)
}

// Admitter is the core.Admitter of a Limiter and a Breaker of this
// package: core.ComposeAdmitter over them. Safe for concurrent use.
type Admitter struct{ c core.Admitter }

// NewAdmitter returns the Admitter of l and b.
func NewAdmitter(l *Limiter, b *Breaker) *Admitter {
	return &Admitter{c: core.ComposeAdmitter(l, b)}
}

// Admit implements core.Admitter.
func (a *Admitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	return a.c.Admit(ctx, req)
}

// Finish implements core.Admitter.
func (a *Admitter) Finish(ctx context.Context, t core.Ticket, s core.Settlement, o core.Outcome) (bool, error) {
	return a.c.Finish(ctx, t, s, o)
}

// PushBack implements core.Admitter.
func (a *Admitter) PushBack(ctx context.Context, scope, source string, cfg core.BreakerConfig, d time.Duration) error {
	return a.c.PushBack(ctx, scope, source, cfg, d)
}

// Cache is a core.Cache kept by a memory.Cache. Safe for concurrent use.
type Cache struct{ m *memory.Cache }

// NewCache returns a Cache; opts are the memory cache's.
func NewCache(opts ...memory.Option) *Cache {
	return &Cache{m: memory.NewCache(opts...)}
}

// Get implements core.Cache.
func (c *Cache) Get(ctx context.Context, key string) ([]byte, bool, error) {
	return c.m.Get(ctx, key)
}

// Set implements core.Cache.
func (c *Cache) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	return c.m.Set(ctx, key, value, ttl)
}
