package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
)

const testScope = "LLM"

// step is one scripted attempt result.
type step struct {
	err   error
	resp  *core.LLMResponse
	delay time.Duration
	block bool // wait until the attempt's context ends
}

func okStep() step            { return step{} }
func failStep(err error) step { return step{err: err} }
func hangStep() step          { return step{block: true} }

// scriptedUpstream is a core.Upstream whose attempts follow a per-source
// script; the last step of a script repeats, and a source without a script
// answers successfully.
type scriptedUpstream struct {
	mu      sync.Mutex
	scripts map[string][]step
	calls   []string
	started chan string
}

func newScriptedUpstream() *scriptedUpstream {
	return &scriptedUpstream{scripts: map[string][]step{}, started: make(chan string, 4096)}
}

func (u *scriptedUpstream) script(source string, steps ...step) *scriptedUpstream {
	u.mu.Lock()
	u.scripts[source] = steps
	u.mu.Unlock()
	return u
}

func (u *scriptedUpstream) Do(ctx context.Context, src *core.SourceConfig, _ *core.Call) (*core.LLMResponse, error) {
	u.mu.Lock()
	u.calls = append(u.calls, src.Name)
	var st step
	if q := u.scripts[src.Name]; len(q) > 0 {
		st = q[0]
		if len(q) > 1 {
			u.scripts[src.Name] = q[1:]
		}
	}
	u.mu.Unlock()
	select {
	case u.started <- src.Name:
	default:
	}
	if st.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if st.delay > 0 {
		t := time.NewTimer(st.delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-t.C:
		}
	}
	if st.err != nil {
		if st.resp != nil {
			// An answer that failed its check comes back with its error.
			r := *st.resp
			return &r, st.err
		}
		return nil, st.err
	}
	resp := &core.LLMResponse{
		Content: "answer from " + src.Name, PromptTokens: 10, CompletionTokens: 5,
		FinishReason: "stop", UsageSource: core.UsageMeasured,
	}
	if st.resp != nil {
		r := *st.resp
		resp = &r
	}
	return resp, nil
}

func (u *scriptedUpstream) callLog() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.calls)
}

// upstreamFunc adapts a function to core.Upstream.
type upstreamFunc func(ctx context.Context, src *core.SourceConfig, call *core.Call) (*core.LLMResponse, error)

func (f upstreamFunc) Do(ctx context.Context, src *core.SourceConfig, call *core.Call) (*core.LLMResponse, error) {
	return f(ctx, src, call)
}

// failingLimiter is a core.Limiter whose backend is down.
type failingLimiter struct{ err error }

func (l failingLimiter) TryAcquire(context.Context, core.PermitRequest) (core.Grant, error) {
	return core.Grant{}, l.err
}
func (l failingLimiter) Release(context.Context, core.Permit, core.Settlement) error { return l.err }
func (l failingLimiter) Usage(context.Context, string, string) (core.LimiterUsage, error) {
	return core.LimiterUsage{}, l.err
}
func (l failingLimiter) Budgets(context.Context, string, string, []core.Budget) ([]core.BudgetUsage, error) {
	return nil, l.err
}

// failingBreaker is a core.Breaker whose backend is down.
type failingBreaker struct{ err error }

func (b failingBreaker) Allow(context.Context, string, string, core.BreakerConfig) (core.Admission, error) {
	return core.Admission{}, b.err
}
func (b failingBreaker) Record(context.Context, string, string, core.Admission, core.Outcome, core.BreakerConfig) (bool, error) {
	return false, b.err
}
func (b failingBreaker) Snapshot(context.Context, string, string, core.BreakerConfig) (core.BreakerSnapshot, error) {
	return core.BreakerSnapshot{}, b.err
}
func (b failingBreaker) Reset(context.Context, string, string, core.BreakerConfig) error {
	return b.err
}
func (b failingBreaker) SetEnabled(context.Context, string, string, core.BreakerConfig, bool) error {
	return b.err
}
func (b failingBreaker) PushBack(context.Context, string, string, core.BreakerConfig, time.Duration) error {
	return b.err
}

// testSettings returns a scope with fast retries and the given sources.
func testSettings(sources ...core.SourceConfig) core.GatewaySettings {
	return core.GatewaySettings{
		Scope:    testScope,
		Sources:  sources,
		Selector: core.SelectorHealthAware,
		Retry:    core.RetrySettings{MaxAttempts: 3, BackoffBase: time.Millisecond, BackoffMax: 4 * time.Millisecond},
		Breaker: core.BreakerConfig{
			FailThreshold: 5, Cooldown: 30 * time.Second, MaxCooldown: 5 * time.Minute, ProbeTTL: 30 * time.Second,
		},
		Backpressure: core.BackpressureSettings{StallWindow: 10 * time.Second, PollInterval: 5 * time.Millisecond},
		QuotaFull:    core.QuotaFullWait,
		LeaseTTL:     time.Minute,
	}
}

func src(name string, priority int) core.SourceConfig {
	return core.SourceConfig{
		Name: name, Provider: "prov", Index: 1, BaseURL: "http://" + name + ".invalid/v1", APIKey: "none",
		Model: "model-" + name, Timeout: 5 * time.Second, Priority: priority, Weight: 1, TrustEnv: true,
	}
}

func weighted(name string, priority int, weight float64) core.SourceConfig {
	s := src(name, priority)
	s.Weight = weight
	return s
}

// fixture is an engine over real memory backends; the breaker reads a fake
// clock so that tests open and half-open circuits without sleeping.
type fixture struct {
	g       *Engine
	up      *scriptedUpstream
	lim     *memory.Limiter
	br      *memory.Breaker
	brClock *backendtest.FakeClock
	set     core.GatewaySettings
}

func newFixture(t *testing.T, set core.GatewaySettings, opts ...func(*Config)) *fixture {
	t.Helper()
	f := &fixture{up: newScriptedUpstream(), brClock: backendtest.NewFakeClock(testkit.Epoch), set: set}
	f.lim = memory.NewLimiter()
	f.br = memory.NewBreaker(memory.WithClock(f.brClock))
	cfg := Config{Settings: set, Upstream: f.up, Limiter: f.lim, Breaker: f.br}
	for _, o := range opts {
		o(&cfg)
	}
	if b, ok := cfg.Breaker.(*memory.Breaker); ok {
		f.br = b
	}
	g, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	f.g = g
	return f
}

// withLiveBreaker gives the fixture a breaker on the time of the test (the
// bubble's under synctest) instead of the fake clock the test advances: a
// 429's pushback then ends as the engine's own hold does.
func withLiveBreaker(cfg *Config) { cfg.Breaker = memory.NewBreaker() }

func withClock(c core.Clock) func(*Config) {
	return func(cfg *Config) { cfg.Clock = c }
}

func withPricing(p core.PricingTable) func(*Config) {
	return func(cfg *Config) { cfg.Pricing = p }
}

func (f *fixture) snapshot(t *testing.T, source string) core.BreakerSnapshot {
	t.Helper()
	s, err := f.br.Snapshot(context.Background(), testScope, source, f.set.Breaker)
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	return s
}

// openBreaker opens source's circuit directly in the breaker backend.
func (f *fixture) openBreaker(t *testing.T, source string) {
	t.Helper()
	ctx := context.Background()
	adm, err := f.br.Allow(ctx, testScope, source, f.set.Breaker)
	if err != nil || !adm.Allowed {
		t.Fatalf("Allow = %+v, %v", adm, err)
	}
	if ok, err := f.br.Record(ctx, testScope, source, adm, core.OutcomeDead, f.set.Breaker); !ok || err != nil {
		t.Fatalf("Record(dead) = %v, %v", ok, err)
	}
}

// holdSlot takes the only concurrency slot of source in the limiter.
func (f *fixture) holdSlot(t *testing.T, source string, limits core.Limits) core.Permit {
	t.Helper()
	g, err := f.lim.TryAcquire(context.Background(), core.PermitRequest{
		Scope: testScope, Source: source, SourceLimits: limits, LeaseTTL: time.Minute,
	})
	if err != nil || !g.OK {
		t.Fatalf("TryAcquire = %+v, %v", g, err)
	}
	return g.Permit
}

func (f *fixture) usage(t *testing.T, source string) core.LimiterUsage {
	t.Helper()
	u, err := f.lim.Usage(context.Background(), testScope, source)
	if err != nil {
		t.Fatalf("Usage: %v", err)
	}
	return u
}

func (f *fixture) status(t *testing.T, source string) core.SourceStatus {
	t.Helper()
	for _, s := range f.g.Sources(context.Background()) {
		if s.Name == source {
			return s
		}
	}
	t.Fatalf("no source %q in Sources()", source)
	return core.SourceStatus{}
}

func (g *Engine) sourceNamed(name string) *sourceState {
	for _, s := range g.sources {
		if s.cfg.Name == name {
			return s
		}
	}
	panic("no source " + name)
}

func newCall() *core.Call {
	return &core.Call{ID: "call-1", Scope: testScope, Messages: []core.Message{core.User("hello")}}
}

func asUnavailable(t *testing.T, err error) *core.GatewayUnavailableError {
	t.Helper()
	var ue *core.GatewayUnavailableError
	if !errors.As(err, &ue) {
		t.Fatalf("err = %v (%T), want a *core.GatewayUnavailableError", err, err)
	}
	return ue
}

func waitStarted(t *testing.T, up *scriptedUpstream) string {
	t.Helper()
	select {
	case name := <-up.started:
		return name
	case <-time.After(5 * time.Second):
		t.Fatal("the upstream was never called")
		return ""
	}
}

// pick is choose for tests: the call's sets, no model excluded; a selector
// error fails loudly.
func (g *Engine) pick(now time.Time, tried, excluded, busy *sourceSet) int {
	i, err := g.choose(context.Background(), now, tried, excluded, busy, &sourceSet{}, nil)
	if err != nil {
		panic(err)
	}
	return i
}

// inBubble runs f in a testing/synctest bubble: time is fake and moves only
// when every goroutine of the bubble is blocked, so backoffs, cooldowns,
// pushback waits and stall windows cost nothing and durations are exact.
func inBubble(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	synctest.Test(t, f)
}

// observe feeds one health verdict into s, as an attempt's effect does.
func observe(s *sourceState, now time.Time, good bool) {
	v := healthBad
	if good {
		v = healthGood
	}
	s.settle(now, v, aimdHold, false, 0)
}
