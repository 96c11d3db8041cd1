package metrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

func TestFailoverRecordsTransientThenSuccess(t *testing.T) {
	t.Parallel()
	bad := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	good := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, bad, "m-bad", 0)
	addSource(env, 2, good, "m-good", 1)
	col := newCollector(t)
	gc := newClient(t, col, env)

	// The first 503 of a healthy preferred source is retried in its tier
	// once (a blip), then the call fails over.
	resp := chat(t, gc, "failover please")
	if !slices.Equal(resp.Attempts, []string{"openai_1", "openai_1", "openai_2"}) {
		t.Fatalf("Attempts = %v, want [openai_1 openai_1 openai_2]", resp.Attempts)
	}
	want(t, "attempts{openai_1,transient}", col.attemptCount("openai_1", "transient"), 2)
	want(t, "attempts{openai_2,success}", col.attemptCount("openai_2", "success"), 1)
	want(t, "attempts (all)", totalAttempts(t, col), 3)
	want(t, "calls{success}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeSuccess)), 1)
	want(t, "calls{transient}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeTransient)), 0)
	want(t, "cache misses", testutil.ToFloat64(col.cacheMisses.WithLabelValues("LLM")), 1)
	// One 503 does not open a breaker.
	want(t, "transitions{openai_1,open}", testutil.ToFloat64(col.transitions.WithLabelValues("LLM", "openai_1", "open")), 0)
}

func TestSourceDeadOpensBreakerAndGaugeShowsOpen(t *testing.T) {
	t.Parallel()
	bad := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.BadKey()))
	good := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, bad, "m-bad", 0)
	addSource(env, 2, good, "m-good", 1)
	col := newCollector(t)
	gc := newClient(t, col, env)

	chat(t, gc, "first")
	want(t, "attempts{openai_1,source_dead}", col.attemptCount("openai_1", "source_dead"), 1)
	want(t, "transitions{openai_1,open}", testutil.ToFloat64(col.transitions.WithLabelValues("LLM", "openai_1", "open")), 1)
	want(t, "transitions{openai_2,open}", testutil.ToFloat64(col.transitions.WithLabelValues("LLM", "openai_2", "open")), 0)

	const expected = `
# HELP polygateway_breaker_state Breaker state of the source: 0 closed, 1 half_open, 2 open.
# TYPE polygateway_breaker_state gauge
polygateway_breaker_state{scope="LLM",source="openai_1"} 2
polygateway_breaker_state{scope="LLM",source="openai_2"} 0
`
	if err := testutil.GatherAndCompare(col.Registry(), strings.NewReader(expected), "polygateway_breaker_state"); err != nil {
		t.Fatal(err)
	}
	if v, ok := gauge(t, col, "polygateway_breaker_opens", "openai_1"); !ok || v != 1 {
		t.Errorf("breaker_opens{openai_1} = %v (present %v), want 1", v, ok)
	}

	// While open, the source gets no attempts.
	chat(t, gc, "second")
	want(t, "attempts{openai_1,*}", col.attemptCount("openai_1", "source_dead")+col.attemptCount("openai_1", "success"), 1)
	want(t, "calls{success}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeSuccess)), 2)
}

func TestCacheHitCountsHitAndNoAttempt(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, srv, "m1", 0)
	col := newCollector(t)
	gc := newClient(t, col, env)

	if r := chat(t, gc, "same question"); r.CacheHit {
		t.Fatal("first call was a cache hit")
	}
	if r := chat(t, gc, "same question"); !r.CacheHit {
		t.Fatal("second call was not a cache hit")
	}
	want(t, "upstream requests", float64(srv.Requests()), 1)
	want(t, "cache hits", testutil.ToFloat64(col.cacheHits.WithLabelValues("LLM")), 1)
	want(t, "cache misses", testutil.ToFloat64(col.cacheMisses.WithLabelValues("LLM")), 1)
	want(t, "attempts (all)", totalAttempts(t, col), 1)
	want(t, "calls{success}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeSuccess)), 2)
	// The hit has no stream timing: one TTFT sample, from the first call.
	want(t, "call_ttft_seconds count", histCount(t, col, "polygateway_call_ttft_seconds"), 1)
	want(t, "call_duration_seconds count", histCount(t, col, "polygateway_call_duration_seconds"), 2)
}

func TestTokensAndCostMatchUsage(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, srv, "gpt-test", 0)
	col := newCollector(t)
	price := polygateway.ModelPrice{InputPer1M: 2, OutputPer1M: 8}
	gc := newClient(t, col, env, polygateway.WithPricing(polygateway.PricingTable{"gpt-test": price}))

	var prompt, completion, cost float64
	for i, stream := range []bool{true, false, true} {
		r := chat(t, gc, fmt.Sprintf("question %d", i), polygateway.WithStream(stream))
		if r.PromptTokens != fakeupstream.PromptTokens || r.CompletionTokens != fakeupstream.DefaultTokens || r.Cost == nil {
			t.Fatalf("call %d: usage %d/%d cost %v, want %d/%d priced", i, r.PromptTokens, r.CompletionTokens, r.Cost, fakeupstream.PromptTokens, fakeupstream.DefaultTokens)
		}
		prompt += float64(r.PromptTokens)
		completion += float64(r.CompletionTokens)
		cost += *r.Cost
	}
	chat(t, gc, "question 0") // a cache hit: no tokens, no cost

	want(t, "prompt tokens", testutil.ToFloat64(col.promptTok.WithLabelValues("LLM", "openai_1", "gpt-test")), prompt)
	want(t, "prompt tokens vs fake", prompt, 3*fakeupstream.PromptTokens)
	want(t, "completion tokens", testutil.ToFloat64(col.complTok.WithLabelValues("LLM", "openai_1", "gpt-test")), completion)
	want(t, "completion tokens vs fake", completion, 3*fakeupstream.DefaultTokens)
	gotCost := testutil.ToFloat64(col.cost.WithLabelValues("LLM", "openai_1", "gpt-test"))
	wantCost := 3 * (fakeupstream.PromptTokens*price.InputPer1M + fakeupstream.DefaultTokens*price.OutputPer1M) / 1e6
	if math.Abs(gotCost-cost) > 1e-15 || math.Abs(gotCost-wantCost) > 1e-15 {
		t.Errorf("cost_total = %v, want %v (sum of responses %v)", gotCost, wantCost, cost)
	}
	want(t, "cache hits", testutil.ToFloat64(col.cacheHits.WithLabelValues("LLM")), 1)
	// Two streamed calls: two TTFT samples per call and per attempt.
	want(t, "call_ttft_seconds count", histCount(t, col, "polygateway_call_ttft_seconds"), 2)
	want(t, "attempt_ttft_seconds count", histCount(t, col, "polygateway_attempt_ttft_seconds"), 2)
}

func TestInFlightReturnsToZero(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithLatency(300*time.Millisecond)))
	env := testEnv()
	addSource(env, 1, srv, "m1", 0)
	col := newCollector(t)
	gc := newClient(t, col, env)
	inFlight := col.inFlight.WithLabelValues("LLM")

	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := gc.Chat(ctx, []polygateway.Message{polygateway.User(fmt.Sprintf("concurrent %d", i))}); err != nil {
				t.Errorf("Chat: %v", err)
			}
		})
	}
	var peak float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if peak = max(peak, testutil.ToFloat64(inFlight)); peak >= 2 {
			break
		}
	}
	if v, ok := gauge(t, col, "polygateway_source_in_flight", "openai_1"); !ok || v < 1 {
		t.Errorf("source_in_flight during the calls = %v (present %v), want ≥ 1", v, ok)
	}
	wg.Wait()
	if peak < 2 {
		t.Errorf("calls_in_flight peaked at %v during %d concurrent calls, want ≥ 2", peak, n)
	}
	want(t, "calls_in_flight after", testutil.ToFloat64(inFlight), 0)
	for _, name := range []string{"polygateway_source_in_flight", "polygateway_limiter_in_flight"} {
		if v, ok := gauge(t, col, name, "openai_1"); !ok || v != 0 {
			t.Errorf("%s after = %v (present %v), want 0", name, v, ok)
		}
	}
	want(t, "calls{success}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeSuccess)), n)
}

// exercise builds a collector that has seen a failover, a breaker opening
// and a refusal, streamed and priced calls, a cache hit and a wait, on
// sources with every limit configured.
func exercise(t *testing.T) *Collector {
	t.Helper()
	dead := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.BadKey()))
	flaky := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.ServerError(503)))
	good := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, dead, "m-dead", 0)
	addSource(env, 2, flaky, "m-flaky", 1)
	addSource(env, 3, good, "gpt-test", 2)
	env["LLM__OPENAI__3__MAX_CONCURRENCY"] = "4"
	env["LLM__OPENAI__3__RPM"] = "600"
	env["LLM__OPENAI__3__TPM"] = "100000"
	env["LLM__OPENAI__3__EST_TOKENS"] = "100"
	col := newCollector(t)
	gc := newClient(t, col, env, polygateway.WithPricing(polygateway.PricingTable{"gpt-test": {InputPer1M: 1, OutputPer1M: 2}}))
	chat(t, gc, "one")
	chat(t, gc, "two")
	chat(t, gc, "one") // cache hit
	col.Waited("LLM", 250*time.Millisecond)
	col.QueueWaited("LLM", polygateway.PriorityBatch, 250*time.Millisecond)
	col.Refused("LLM", "openai_1", core.ReasonCircuitOpen)
	start := time.Unix(1_800_000_000, 0)
	col.WatchBudgets(func(context.Context) ([]polygateway.BudgetUsage, error) {
		return []polygateway.BudgetUsage{{Budget: polygateway.Budget{Key: "client:key-abc", Limit: 5_000_000, Window: time.Hour},
			Spent: 1_250_000, WindowStart: start, WindowEnd: start.Add(time.Hour)}}, nil
	})
	return col
}

// documentedNames returns the metric names of the table in doc.go.
func documentedNames(t *testing.T) []string {
	t.Helper()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^//\t(polygateway_[a-z_]+)\s+(counter|gauge|histogram)\s`)
	var names []string
	for _, m := range re.FindAllStringSubmatch(string(src), -1) {
		names = append(names, m[1])
	}
	if len(names) < 20 {
		t.Fatalf("found only %d names in the doc.go table", len(names))
	}
	return names
}

func TestDocumentedNamesMatchExported(t *testing.T) {
	t.Parallel()
	col := exercise(t)
	mfs, err := col.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		got = append(got, mf.GetName())
	}
	doc := documentedNames(t)
	slices.Sort(got)
	slices.Sort(doc)
	if !slices.Equal(got, doc) {
		t.Errorf("exported metric families differ from the doc.go table:\nexported:   %v\ndocumented: %v", got, doc)
	}
}

func TestHandlerServesText(t *testing.T) {
	t.Parallel()
	col := exercise(t)
	rec := httptest.NewRecorder()
	col.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type = %q, want text/plain", ct)
	}
	body := rec.Body.String()
	for _, name := range documentedNames(t) {
		if !strings.Contains(body, "# TYPE "+name+" ") {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	for _, key := range []string{"sk-test", "call_id", "session"} {
		if strings.Contains(body, key) {
			t.Errorf("/metrics contains %q", key)
		}
	}
	if got := lines(body, `polygateway_attempts_total{outcome="source_dead",scope="LLM",source="openai_1"}`); got != `polygateway_attempts_total{outcome="source_dead",scope="LLM",source="openai_1"} 1`+"\n" {
		t.Errorf("attempts line = %q", got)
	}
}

func TestLintFindsNoProblems(t *testing.T) {
	t.Parallel()
	col := exercise(t)
	problems, err := testutil.GatherAndLint(col.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestCallOutcomeClasses(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	ctx := context.Background()
	run := func(resp *polygateway.LLMResponse, err error) {
		h := col.Middleware()(func(context.Context, *polygateway.Call) (*polygateway.LLMResponse, error) { return resp, err })
		_, _ = h(ctx, &polygateway.Call{Scope: "UNIT"})
	}
	cases := []struct {
		err  error
		want string
	}{
		{nil, OutcomeSuccess},
		{&polygateway.TransientError{Source: "a", Reason: core.ReasonTimeout}, OutcomeTransient},
		{&polygateway.SourceDeadError{Source: "a", StatusCode: 401}, OutcomeSourceDead},
		{&polygateway.RequestRejectedError{Source: "a", StatusCode: 400}, OutcomeRejected},
		{&polygateway.ResultInvalidError{Source: "a"}, OutcomeInvalid},
		{&polygateway.GatewayUnavailableError{Scope: "UNIT", Reason: core.ReasonRetryExhausted, Err: &polygateway.TransientError{}}, OutcomeUnavailable},
		{&polygateway.GovernanceBackendError{Backend: "limiter", Op: "acquire"}, OutcomeBackend},
		{&polygateway.CanceledError{Err: context.Canceled}, OutcomeCancelled},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), OutcomeCancelled},
		{errors.New("foreign"), OutcomeOther},
	}
	for _, tc := range cases {
		before := testutil.ToFloat64(col.calls.WithLabelValues("UNIT", tc.want))
		run(nil, tc.err)
		if got := testutil.ToFloat64(col.calls.WithLabelValues("UNIT", tc.want)); got != before+1 {
			t.Errorf("%v: calls{%s} went %v → %v, want +1", tc.err, tc.want, before, got)
		}
	}
	// Every case is one call; all of them missed the cache.
	want(t, "misses", testutil.ToFloat64(col.cacheMisses.WithLabelValues("UNIT")), float64(len(cases)))

	// A ResultInvalid answer was billed: its usage counts.
	cost := 0.5
	run(&polygateway.LLMResponse{SourceName: "s1", Model: "m1", PromptTokens: 5, CompletionTokens: 7, Cost: &cost}, &polygateway.ResultInvalidError{Source: "s1"})
	want(t, "prompt tokens of an invalid answer", testutil.ToFloat64(col.promptTok.WithLabelValues("UNIT", "s1", "m1")), 5)
	want(t, "completion tokens of an invalid answer", testutil.ToFloat64(col.complTok.WithLabelValues("UNIT", "s1", "m1")), 7)
	want(t, "cost of an invalid answer", testutil.ToFloat64(col.cost.WithLabelValues("UNIT", "s1", "m1")), 0.5)

	// Degraded answers are counted; a degraded cache hit is a hit too.
	run(&polygateway.LLMResponse{Degraded: true, CacheHit: true}, nil)
	run(&polygateway.LLMResponse{Degraded: true, SourceName: "fallback"}, nil)
	want(t, "degraded", testutil.ToFloat64(col.degraded.WithLabelValues("UNIT")), 2)
	want(t, "hits", testutil.ToFloat64(col.cacheHits.WithLabelValues("UNIT")), 1)

	// An unpriced model has no cost series; a negative cost is ignored.
	neg := -1.0
	run(&polygateway.LLMResponse{SourceName: "s1", Model: "free", PromptTokens: 1, Cost: &neg}, nil)
	run(&polygateway.LLMResponse{SourceName: "s1", Model: "unpriced", PromptTokens: 1}, nil)
	if n := testutil.CollectAndCount(col.cost); n != 1 {
		t.Errorf("cost_total has %d series, want 1 (only the priced model)", n)
	}
	want(t, "in flight", testutil.ToFloat64(col.inFlight.WithLabelValues("UNIT")), 0)
}

func TestMiddlewareInFlightSurvivesPanic(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	h := col.Middleware()(func(context.Context, *polygateway.Call) (*polygateway.LLMResponse, error) { panic("boom") })
	func() {
		defer func() { _ = recover() }()
		_, _ = h(context.Background(), &polygateway.Call{Scope: "P"})
	}()
	want(t, "in flight after a panic", testutil.ToFloat64(col.inFlight.WithLabelValues("P")), 0)
}

func TestObserverVocabulariesStayBounded(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	col.Attempt(core.AttemptEvent{Scope: "S", Source: "a", Outcome: "rate_limited", Latency: time.Second})
	col.Attempt(core.AttemptEvent{Scope: "S", Source: "a", Outcome: "call-1234", Latency: time.Second})
	col.Attempt(core.AttemptEvent{Scope: "S", Source: "a", Outcome: "success", Latency: 2 * time.Second, TTFT: 300 * time.Millisecond, MaxInterToken: 50 * time.Millisecond})
	col.Refused("S", "a", core.ReasonRateLimited)
	col.Refused("S", "a", core.ReasonTimeout)
	col.Refused("S", "a", "made-up")
	col.BreakerState("S", "a", core.StateHalfOpen)
	col.BreakerState("S", "a", core.StateClosed)
	col.Waited("S", 2*time.Second)
	col.Waited("S", -time.Second)

	want(t, "attempts{rate_limited}", testutil.ToFloat64(col.attempts.WithLabelValues("S", "a", "rate_limited")), 1)
	want(t, "attempts{other}", testutil.ToFloat64(col.attempts.WithLabelValues("S", "a", "other")), 1)
	want(t, "attempts{success}", testutil.ToFloat64(col.attempts.WithLabelValues("S", "a", "success")), 1)
	want(t, "refusals{rate_limited}", testutil.ToFloat64(col.refusals.WithLabelValues("S", "a", "rate_limited")), 1)
	want(t, "refusals{timeout}", testutil.ToFloat64(col.refusals.WithLabelValues("S", "a", "timeout")), 1)
	want(t, "refusals{other}", testutil.ToFloat64(col.refusals.WithLabelValues("S", "a", "other")), 1)
	want(t, "transitions{half_open}", testutil.ToFloat64(col.transitions.WithLabelValues("S", "a", "half_open")), 1)
	want(t, "transitions{closed}", testutil.ToFloat64(col.transitions.WithLabelValues("S", "a", "closed")), 1)
	want(t, "limiter_wait_seconds count", histCount(t, col, "polygateway_limiter_wait_seconds"), 1)
	want(t, "attempt_duration_seconds count", histCount(t, col, "polygateway_attempt_duration_seconds"), 3)
	want(t, "attempt_ttft_seconds count", histCount(t, col, "polygateway_attempt_ttft_seconds"), 1)
	want(t, "attempt_max_inter_token_seconds count", histCount(t, col, "polygateway_attempt_max_inter_token_seconds"), 1)
	// 8 attempt outcomes created up front + "other".
	if n := testutil.CollectAndCount(col.attempts); n != 9 {
		t.Errorf("attempts_total has %d series, want 9", n)
	}
}

func TestModelLabelIsCapped(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	h := col.Middleware()(func(_ context.Context, call *polygateway.Call) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{SourceName: "s", Model: call.ID, PromptTokens: 1}, nil
	})
	const extra = 25
	for i := range maxUsageSeries + extra {
		_, _ = h(context.Background(), &polygateway.Call{Scope: "CAP", ID: fmt.Sprintf("model-%d", i)})
	}
	if n := testutil.CollectAndCount(col.promptTok); n != maxUsageSeries+1 {
		t.Errorf("prompt_tokens_total has %d series, want %d", n, maxUsageSeries+1)
	}
	want(t, `prompt tokens{model="other"}`, testutil.ToFloat64(col.promptTok.WithLabelValues("CAP", "s", "other")), extra)
}

func TestWatchDedupesUnwatchesAndDropsClosed(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, srv, "m1", 0)
	col := newCollector(t)
	a := newClient(t, col, env)
	b := newClient(t, col, env) // same scope and source: must not make duplicate series
	col.WatchClient(b)          // a second watch is a no-op
	col.WatchClient(nil)

	if n, err := testutil.GatherAndCount(col.Registry(), "polygateway_breaker_state"); err != nil || n != 1 {
		t.Fatalf("breaker_state series = %d (err %v), want 1", n, err)
	}
	col.Unwatch(b)
	if n, err := testutil.GatherAndCount(col.Registry(), "polygateway_breaker_state"); err != nil || n != 1 {
		t.Fatalf("after Unwatch(b): breaker_state series = %d (err %v), want 1", n, err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(col.Registry(), "polygateway_breaker_state", "polygateway_source_health"); err != nil || n != 0 {
		t.Fatalf("after Close: scrape-time series = %d (err %v), want 0", n, err)
	}
	col.watch.mu.Lock()
	left := len(col.watch.clients)
	col.watch.mu.Unlock()
	want(t, "watched clients after Close", float64(left), 0)
}

func TestNewOptionsAndRegistration(t *testing.T) {
	t.Parallel()
	if _, err := New(nil, WithNamespace("bad-name")); err == nil {
		t.Error("invalid namespace accepted")
	}
	if _, err := New(nil, WithBuckets(1, 1)); err == nil {
		t.Error("non-increasing buckets accepted")
	}
	if _, err := New(nil, WithBuckets()); err == nil {
		t.Error("empty buckets accepted")
	}
	if _, err := New(nil, WithScrapeTimeout(0)); err == nil {
		t.Error("zero scrape timeout accepted")
	}

	reg := prometheus.NewRegistry()
	col, err := New(reg, WithNamespace("gw"), WithBuckets(0.1, 1, 10))
	if err != nil {
		t.Fatal(err)
	}
	if col.Registry() != nil {
		t.Error("Registry() is not nil for a supplied registerer")
	}
	if _, err := New(reg, WithNamespace("gw")); !errors.As(err, new(prometheus.AlreadyRegisteredError)) {
		t.Errorf("second New on one registry: err = %v, want AlreadyRegisteredError", err)
	}
	// A failed New leaves nothing behind: a different namespace still works.
	if _, err := New(reg, WithNamespace("gw2")); err != nil {
		t.Errorf("New with another namespace: %v", err)
	}
	col.Attempt(core.AttemptEvent{Scope: "S", Source: "a", Outcome: "success", Latency: 3 * time.Second})
	rec := httptest.NewRecorder()
	col.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	if !strings.Contains(body, `gw_attempts_total{outcome="success",scope="S",source="a"} 1`) {
		t.Errorf("namespaced counter missing:\n%s", lines(body, "gw_attempts_total"))
	}
	if !strings.Contains(body, `gw_attempt_duration_seconds_bucket{scope="S",source="a",le="10"} 1`) {
		t.Errorf("custom buckets missing:\n%s", lines(body, "gw_attempt_duration_seconds_bucket"))
	}

	// A registerer that cannot gather: Handler serves a private registry,
	// and the labels added by the wrapper reach the wrapped registry.
	inner := prometheus.NewRegistry()
	wcol, err := New(prometheus.WrapRegistererWith(prometheus.Labels{"instance_role": "proxy"}, inner), WithRuntimeMetrics())
	if err != nil {
		t.Fatal(err)
	}
	wcol.Waited("S", time.Second)
	rec = httptest.NewRecorder()
	wcol.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if body := rec.Body.String(); !strings.Contains(body, `polygateway_limiter_wait_seconds_count{scope="S"} 1`) || !strings.Contains(body, "go_goroutines") {
		t.Errorf("private registry page lacks the wait histogram or runtime metrics")
	}
	if n, err := testutil.GatherAndCount(inner, "polygateway_limiter_wait_seconds"); err != nil || n != 1 {
		t.Errorf("wrapped registry: %d series (err %v), want 1", n, err)
	}
}

// histCount returns the sample count of histogram name summed over its series.
func histCount(t testing.TB, c *Collector, name string) float64 {
	t.Helper()
	mfs, err := c.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				n += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return n
}

func TestBudgetReadersAreExportedInUSD(t *testing.T) {
	t.Parallel()
	col := exercise(t)
	rec := httptest.NewRecorder()
	col.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, line := range []string{
		`polygateway_budget_limit_usd{budget="client:key-abc",scope="unknown"} 5`,
		`polygateway_budget_spent_usd{budget="client:key-abc",scope="unknown"} 1.25`,
		`polygateway_budget_window_end_seconds{budget="client:key-abc",scope="unknown"} 1.8000036e+09`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestAnAnswerClaimingMoreThanItsRequestCouldUseIsCounted: an answer whose
// usage is beyond its request's bound counts in usage_bounded_total, and
// the tokens counted are the bound's.
func TestAnAnswerClaimingMoreThanItsRequestCouldUseIsCounted(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithUsage(`{"prompt_tokens":5,"completion_tokens":9223372036854775807}`)))
	env := testEnv()
	addSource(env, 1, srv, "gpt-test", 0)
	col := newCollector(t)
	gc := newClient(t, col, env)
	chat(t, gc, "hi", polygateway.WithMaxTokens(50), polygateway.WithStream(false))
	want(t, "usage_bounded{openai_1}", testutil.ToFloat64(col.bounded.WithLabelValues("LLM", "openai_1")), 1)
	want(t, "completion tokens", testutil.ToFloat64(col.complTok.WithLabelValues("LLM", "openai_1", "gpt-test")), 50)
}

// TestWatchClientCreatesEveryEventSeriesAtZero: before any event, a
// watched client's scope and sources have every event series of a closed
// vocabulary at zero — bounded usage and the queue's waits by class
// included — so that rate() and absent() work from the first scrape.
func TestWatchClientCreatesEveryEventSeriesAtZero(t *testing.T) {
	t.Parallel()
	srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	addSource(env, 1, srv, "m1", 0)
	col := newCollector(t)
	newClient(t, col, env)
	for name, n := range map[string]int{
		"polygateway_calls_total":               len(callOutcomes),
		"polygateway_attempts_total":            len(attemptOutcomes),
		"polygateway_refusals_total":            len(refusalReasons),
		"polygateway_breaker_transitions_total": len(breakerStates),
		"polygateway_usage_bounded_total":       1,
		"polygateway_limiter_wait_seconds":      1,
		"polygateway_queue_wait_seconds":        int(core.NumPriorities),
	} {
		if got, err := testutil.GatherAndCount(col.Registry(), name); err != nil || got != n {
			t.Errorf("%s: %d series before any event (err %v), want %d", name, got, err, n)
		}
	}
	want(t, "usage_bounded{openai_1}", testutil.ToFloat64(col.bounded.WithLabelValues("LLM", "openai_1")), 0)
}

// TestFallbackAnswerIsCountedAsADegradedSuccess: a fallback's answer is
// served inside the onion, so the middleware counts the call as a success
// and as degraded (the reference's note on degraded answers).
func TestFallbackAnswerIsCountedAsADegradedSuccess(t *testing.T) {
	t.Parallel()
	bad := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.BadKey()))
	env := testEnv()
	addSource(env, 1, bad, "m-bad", 0)
	col := newCollector(t)
	gc := newClient(t, col, env, polygateway.WithFallback(func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{Content: "later"}, nil
	}))
	if r := chat(t, gc, "anyone there?"); !r.Degraded || r.DegradedBy != core.DegradedFallback {
		t.Fatalf("Degraded %v by %q: the fallback did not answer", r.Degraded, r.DegradedBy)
	}
	want(t, "calls{success}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeSuccess)), 1)
	want(t, "calls{unavailable}", testutil.ToFloat64(col.calls.WithLabelValues("LLM", OutcomeUnavailable)), 0)
	want(t, "degraded", testutil.ToFloat64(col.degraded.WithLabelValues("LLM")), 1)
	want(t, "attempts{openai_1,source_dead}", col.attemptCount("openai_1", "source_dead"), 1)
}

// TestEveryRefusalReasonIsASeriesFromTheStart: the engine refuses sources
// for four reasons — its breaker, its gates, an operator's switch, a spend
// budget — and each has its refusals_total series at zero from WatchClient
// on; a source another client of the breaker backend switched off is
// counted under "disabled".
func TestEveryRefusalReasonIsASeriesFromTheStart(t *testing.T) {
	t.Parallel()
	off := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	good := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK()))
	env := testEnv()
	env["PGW_CACHE_BACKEND"] = "none"
	addSource(env, 1, off, "m-off", 0)
	addSource(env, 2, good, "m-good", 1)
	col := newCollector(t)
	shared := memory.NewBreaker()
	gc := newClient(t, col, env, polygateway.WithBreaker(shared))
	other, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithBreaker(shared))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	const expected = `
# HELP polygateway_refusals_total Sources refused before an attempt, by reason (circuit_open: breaker; rate_limited: limiter, pushback or adaptive limit; disabled: switched off; budget_exhausted: spend budget).
# TYPE polygateway_refusals_total counter
polygateway_refusals_total{reason="budget_exhausted",scope="LLM",source="openai_1"} 0
polygateway_refusals_total{reason="budget_exhausted",scope="LLM",source="openai_2"} 0
polygateway_refusals_total{reason="circuit_open",scope="LLM",source="openai_1"} 0
polygateway_refusals_total{reason="circuit_open",scope="LLM",source="openai_2"} 0
polygateway_refusals_total{reason="disabled",scope="LLM",source="openai_1"} 0
polygateway_refusals_total{reason="disabled",scope="LLM",source="openai_2"} 0
polygateway_refusals_total{reason="rate_limited",scope="LLM",source="openai_1"} 0
polygateway_refusals_total{reason="rate_limited",scope="LLM",source="openai_2"} 0
`
	if err := testutil.GatherAndCompare(col.Registry(), strings.NewReader(expected), "polygateway_refusals_total"); err != nil {
		t.Fatal(err)
	}
	if err := other.DisableSource(context.Background(), "openai_1"); err != nil {
		t.Fatal(err)
	}
	if r := chat(t, gc, "who is on?"); r.SourceName != "openai_2" {
		t.Fatalf("answered by %q, want openai_2", r.SourceName)
	}
	want(t, "refusals{openai_1,disabled}", testutil.ToFloat64(col.refusals.WithLabelValues("LLM", "openai_1", "disabled")), 1)
	if n := testutil.CollectAndCount(col.refusals); n != 8 {
		t.Errorf("refusals_total has %d series, want 8 (no other reason)", n)
	}
}
