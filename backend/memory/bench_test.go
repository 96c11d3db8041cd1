package memory_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// stepClock moves 1 ms every time it is read: a steady arrival rate, so the
// sliding-window logs reach a stable size instead of growing for the whole
// benchmark as they would under the wall clock.
type stepClock struct{ n atomic.Int64 }

func (c *stepClock) Now() time.Time {
	return allocEpoch.Add(time.Duration(c.n.Add(1)) * time.Millisecond)
}

// NewTimer is never used by the backends.
func (*stepClock) NewTimer(d time.Duration) core.Timer { return core.SystemClock{}.NewTimer(d) }
func (*stepClock) AfterFunc(d time.Duration, f func()) core.Timer {
	return core.SystemClock{}.AfterFunc(d, f)
}

func benchRequest(source string) core.PermitRequest {
	return core.PermitRequest{
		Scope: "bench", Source: source,
		SourceLimits: core.Limits{MaxConcurrency: 1024, RPM: 10_000_000, TPM: 1 << 50},
		GlobalLimits: core.Limits{MaxConcurrency: 4096, RPM: 10_000_000, TPM: 1 << 50},
		Tokens:       500, LeaseTTL: 25 * time.Minute,
	}
}

// warm grows the sliding-window logs of each request's source and scope to
// their steady size: under stepClock a window holds at most 30,000 grants.
func warm(l *memory.Limiter, reqs ...core.PermitRequest) {
	ctx := context.Background()
	for _, req := range reqs {
		for range 30_000 {
			g, _ := l.TryAcquire(ctx, req)
			_ = l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 321})
		}
	}
}

// BenchmarkLimiterAcquireRelease is one governed attempt's limiter work with
// all six gates on: TryAcquire, then Release settling to actual usage.
func BenchmarkLimiterAcquireRelease(b *testing.B) {
	ctx := context.Background()
	l := memory.NewLimiter(memory.WithClock(&stepClock{}))
	req := benchRequest("a")
	b.ReportAllocs()
	for b.Loop() {
		g, _ := l.TryAcquire(ctx, req)
		_ = l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 321})
	}
}

// BenchmarkLimiterAcquireReleaseParallel runs it from GOMAXPROCS goroutines
// (use -cpu 16,64) over 8 sources of one scope, which share the scope lock.
func BenchmarkLimiterAcquireReleaseParallel(b *testing.B) {
	ctx := context.Background()
	l := memory.NewLimiter(memory.WithClock(&stepClock{}))
	for i := range 8 {
		warm(l, benchRequest("s"+strconv.Itoa(i)))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := benchRequest("s" + strconv.Itoa(int(next.Add(1)%8)))
		for pb.Next() {
			g, _ := l.TryAcquire(ctx, req)
			_ = l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 321})
		}
	})
}

// BenchmarkLimiterAcquireReleaseParallelScopes spreads the goroutines over 8
// scopes, which lock independently.
func BenchmarkLimiterAcquireReleaseParallelScopes(b *testing.B) {
	ctx := context.Background()
	l := memory.NewLimiter(memory.WithClock(&stepClock{}))
	scoped := func(i int) core.PermitRequest {
		req := benchRequest("a")
		req.Scope = "bench" + strconv.Itoa(i)
		return req
	}
	for i := range 8 {
		warm(l, scoped(i))
	}
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		req := scoped(int(next.Add(1) % 8))
		for pb.Next() {
			g, _ := l.TryAcquire(ctx, req)
			_ = l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual, Tokens: 321})
		}
	})
}

// BenchmarkLimiterAcquireReleaseWallClock uses the wall clock with the
// concurrency gates only (no sliding-window log).
func BenchmarkLimiterAcquireReleaseWallClock(b *testing.B) {
	ctx := context.Background()
	l := memory.NewLimiter()
	req := core.PermitRequest{
		Scope: "bench", Source: "a",
		SourceLimits: core.Limits{MaxConcurrency: 64}, GlobalLimits: core.Limits{MaxConcurrency: 256},
		LeaseTTL: 25 * time.Minute,
	}
	b.ReportAllocs()
	for b.Loop() {
		g, _ := l.TryAcquire(ctx, req)
		_ = l.Release(ctx, g.Permit, core.Settlement{Kind: core.SettleActual})
	}
}

// BenchmarkBreakerAllowRecord is one governed attempt's breaker work on a
// closed circuit: Allow, then Record a success (1 in 10 a failure).
func BenchmarkBreakerAllowRecord(b *testing.B) {
	ctx := context.Background()
	br := memory.NewBreaker()
	cfg := backendtest.SuiteBreakerConfig()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		adm, _ := br.Allow(ctx, "bench", "a", cfg)
		o := core.OutcomeSuccess
		if i%10 == 0 {
			o = core.OutcomeFailure
		}
		_, _ = br.Record(ctx, "bench", "a", adm, o, cfg)
	}
}

// BenchmarkBreakerAllowRecordParallel runs it from GOMAXPROCS goroutines
// over 8 circuits.
func BenchmarkBreakerAllowRecordParallel(b *testing.B) {
	ctx := context.Background()
	br := memory.NewBreaker()
	cfg := backendtest.SuiteBreakerConfig()
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		src := "s" + strconv.Itoa(int(next.Add(1)%8))
		i := 0
		for pb.Next() {
			i++
			adm, _ := br.Allow(ctx, "bench", src, cfg)
			o := core.OutcomeSuccess
			if i%10 == 0 {
				o = core.OutcomeFailure
			}
			_, _ = br.Record(ctx, "bench", src, adm, o, cfg)
		}
	})
}

// BenchmarkAdmitBudgets is one governed attempt's admission through the
// memory Limiter and Breaker (core.ComposeAdmitter: Admit, then Finish
// settling tokens and cost), with the source's three gates on, without
// budgets (off) and with a scope's and a client's budget (on).
func BenchmarkAdmitBudgets(b *testing.B) {
	budgets := []core.Budget{
		{Key: "scope:bench", Limit: 1 << 52, Window: 24 * time.Hour},
		{Key: "client:bench", Limit: 1 << 52, Window: time.Hour},
	}
	for _, arm := range []struct {
		name    string
		budgets []core.Budget
	}{{"off", nil}, {"on", budgets}} {
		b.Run(arm.name, func(b *testing.B) {
			ctx := context.Background()
			clk := &stepClock{}
			l, br := memory.NewLimiter(memory.WithClock(clk)), memory.NewBreaker(memory.WithClock(clk))
			a := core.ComposeAdmitter(l, br)
			req := core.AdmitRequest{Breaker: backendtest.SuiteBreakerConfig(), Permit: benchRequest("a")}
			req.Permit.GlobalLimits = core.Limits{}
			req.Permit.Budgets, req.Permit.Cost = arm.budgets, 2500
			s := core.Settlement{Kind: core.SettleActual, Tokens: 321, Cost: 2100}
			b.ReportAllocs()
			for b.Loop() {
				t, err := a.Admit(ctx, req)
				if err != nil || !t.Admitted() {
					b.Fatalf("Admit = %+v, %v", t, err)
				}
				_, _ = a.Finish(ctx, t, s, core.OutcomeSuccess)
			}
		})
	}
}
