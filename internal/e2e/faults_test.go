package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// defaultsEnv is baseEnv with the library's own retry defaults (baseEnv
// shortens the backoff).
func defaultsEnv() testenv.Env {
	e := testenv.Base()
	delete(e, "LLM__RETRY__BACKOFF_BASE_S")
	delete(e, "LLM__RETRY__BACKOFF_MAX_S")
	return e
}

func TestA500OnceOnThePreferredTierIsRetriedThereAndTheFallbackSeesNothing(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithScript(fu.ServerError(500), fu.OK()))
	fallback := fu.NewServer(t)
	c := defaultsEnv().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").Client(t)
	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatal(err)
	}
	if resp.SourceName != "openai_1" || primary.Requests() != 2 || fallback.Requests() != 0 {
		t.Fatalf("answered by %s after %v; primary %d requests, fallback %d; want the primary after 2 attempts",
			resp.SourceName, resp.Attempts, primary.Requests(), fallback.Requests())
	}
}

func TestA429WithinThePatienceWaitsForThePreferredTier(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithScript(fu.RateLimited("1"), fu.OK()))
	fallback := fu.NewServer(t)
	c := defaultsEnv().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").Client(t)
	resp, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatal(err)
	}
	arr := primary.Arrivals()
	if resp.SourceName != "openai_1" || len(arr) != 2 || fallback.Requests() != 0 {
		t.Fatalf("answered by %s; primary %d requests, fallback %d; want the primary, twice", resp.SourceName, len(arr), fallback.Requests())
	}
	if gap := arr[1].Sub(arr[0]); gap < 900*time.Millisecond {
		t.Errorf("second primary attempt %v after the first, want >= 0.9 s (Retry-After: 1)", gap)
	}
}

func TestTierPatienceZeroFailsOverAtOnce(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithScript(fu.ServerError(500), fu.OK()))
	fallback := fu.NewServer(t)
	c := defaultsEnv().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").
		Set("LLM__RETRY__TIER_PATIENCE_S", "0").Client(t)
	resp, err := testenv.Ask(t, c)
	if err != nil || resp.SourceName != "qwen_1" || primary.Requests() != 1 {
		t.Fatalf("= (%v, %v), primary %d requests; want the fallback at once", resp, err, primary.Requests())
	}
}

func TestASourceWhoseContextWindowIsTooSmallGetsNoRequest(t *testing.T) {
	t.Parallel()
	small := fu.NewServer(t)
	large := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, small.URL(), "CONTEXT_WINDOW", "100").
		Source("qwen", 1, large.URL(), "PRIORITY", "1", "CONTEXT_WINDOW", "128000").Client(t)
	long := polygateway.User(longText(2000))
	resp, err := c.Chat(context.Background(), []polygateway.Message{long}, polygateway.WithParams(map[string]any{"max_tokens": 50}))
	if err != nil || resp.SourceName != "qwen_1" {
		t.Fatalf("= (%v, %v), want the large-window source", resp, err)
	}
	if small.Requests() != 0 {
		t.Errorf("the small-window source got %d requests, want 0", small.Requests())
	}
	// A short call fits both: the preferred tier answers.
	if resp, err := testenv.Ask(t, c); err != nil || resp.SourceName != "openai_1" {
		t.Errorf("short call = (%v, %v), want the preferred source", resp, err)
	}
	// Nothing fits: rejected before any request.
	only := testenv.Base().Source("openai", 1, small.URL(), "CONTEXT_WINDOW", "100").Client(t)
	_, err = only.Chat(context.Background(), []polygateway.Message{long})
	var re *polygateway.RequestRejectedError
	if !errors.As(err, &re) || re.Code != "context_length_exceeded" || small.Requests() != 1 {
		t.Errorf("err = %v, small requests %d; want a rejection before any request", err, small.Requests())
	}
}

// longText returns n words.
func longText(n int) string {
	b := make([]byte, 0, 6*n)
	for range n {
		b = append(b, "words "...)
	}
	return string(b)
}

// The recovery SLO: a preferred source that was down for 4 s and then
// healthy gets every call back within 10 s of its recovery, and while it
// was down it saw at most one request per second.
func TestAFlappingPrimaryGetsItsTrafficBackWithinTenSeconds(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("16 s of calls")
	}
	const outage = 4 * time.Second
	primary := fu.NewServer(t, fu.WithFlap(outage, time.Hour, fu.ServerError(503)))
	fallback := fu.NewServer(t)
	start := primary.Started()
	c := defaultsEnv().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").Client(t)
	var back time.Duration
	for time.Since(start) < 16*time.Second {
		at := time.Since(start)
		resp, err := testenv.Ask(t, c)
		if err != nil {
			t.Fatalf("call at %v failed: %v", at, err)
		}
		if back == 0 && at > outage && resp.SourceName == "openai_1" {
			back = at - outage
		}
		if at > outage+10*time.Second && resp.SourceName != "openai_1" {
			t.Errorf("call at %v (%v after recovery) answered by %s, want the primary", at, at-outage, resp.SourceName)
		}
		time.Sleep(250 * time.Millisecond)
	}
	during := 0
	for _, a := range primary.Arrivals() {
		if a.Sub(start) < outage {
			during++
		}
	}
	t.Logf("primary: %d requests during the %v outage; first call back on it %v after recovery", during, outage, back)
	if during > int(outage/time.Second) {
		t.Errorf("the primary got %d requests during the %v outage, want <= 1 per second", during, outage)
	}
}

// Slow start: 200 concurrent calls to one healthy source answering in
// 300 ms, with no configured concurrency limit, all complete within 2.5 s
// (adaptive concurrency doubles every round trip from 8 up to its cap).
func TestSlowStartServes200ConcurrentCallsWithinTwoAndAHalfSeconds(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithLatency(300*time.Millisecond)))
	c := defaultsEnv().Source("openai", 1, srv.URL()).Client(t)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for range 200 {
		wg.Go(func() {
			if _, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")}, polygateway.WithStream(false)); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2500*time.Millisecond {
		t.Errorf("200 concurrent 300 ms calls took %v, want <= 2.5 s", took)
	}
}

func TestUnavailableErrorsSayWhenToRetryAndNameEverySource(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	b := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	c := defaultsEnv().Source("openai", 1, a.URL()).Source("qwen", 1, b.URL()).
		Set("LLM__RETRY__MAX_ATTEMPTS", "2", "LLM__BREAKER__FAIL_THRESHOLD", "1", "LLM__BREAKER__COOLDOWN_S", "30",
			"LLM__RETRY__TIER_PATIENCE_S", "0").Client(t)
	// Two failures spend the budget and open both circuits: nothing is
	// usable before the cooldown ends.
	_, err := testenv.Ask(t, c)
	var u *polygateway.GatewayUnavailableError
	if !errors.As(err, &u) || u.Reason != core.ReasonRetryExhausted {
		t.Fatalf("first call: %v, want retry_exhausted", err)
	}
	if u.RetryAfter < 20*time.Second || u.RetryAfter > 30*time.Second || len(u.PerSource) != 2 ||
		u.PerSource["openai_1"] != core.ReasonServerError || u.PerSource["qwen_1"] != core.ReasonServerError {
		t.Fatalf("retry_exhausted: RetryAfter %v, PerSource %v; want about the 30 s cooldown and both sources named", u.RetryAfter, u.PerSource)
	}
}

func TestCircuitOpenSaysWhenAProbeIsAdmittedAndNamesEverySource(t *testing.T) {
	t.Parallel()
	a := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	b := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	c := defaultsEnv().Source("openai", 1, a.URL()).Source("qwen", 1, b.URL()).
		Set("LLM__BREAKER__COOLDOWN_S", "30").Client(t)
	if _, err := testenv.Ask(t, c); err == nil {
		t.Fatal("dead sources answered")
	}
	before := a.Requests() + b.Requests()
	_, err := testenv.Ask(t, c)
	var u *polygateway.GatewayUnavailableError
	if !errors.As(err, &u) || u.Reason != core.ReasonCircuitOpen || !errors.Is(err, polygateway.ErrCircuitOpen) {
		t.Fatalf("second call: %v, want circuit_open", err)
	}
	if u.RetryAfter < 20*time.Second || u.RetryAfter > 30*time.Second ||
		u.PerSource["openai_1"] != core.ReasonCircuitOpen || u.PerSource["qwen_1"] != core.ReasonCircuitOpen {
		t.Fatalf("circuit_open: RetryAfter %v, PerSource %v; want about the 30 s cooldown and both sources circuit_open", u.RetryAfter, u.PerSource)
	}
	if a.Requests()+b.Requests() != before {
		t.Fatal("a call on open circuits reached an upstream")
	}
}

func TestTwoScopesInOnePoolShareTheirGlobalGateInOneProcess(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithLatency(30*time.Millisecond)))
	lim := memory.NewLimiter()
	var clients []*polygateway.GatewayClient
	for _, scope := range []string{"SEARCH", "JUDGE"} {
		e := testenv.Env{
			"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
			"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
			scope + "__OPENAI__1__BASE_URL": srv.URL(), scope + "__OPENAI__1__API_KEY": "sk-test",
			scope + "__OPENAI__1__MODEL": "m", scope + "__OPENAI__1__TIMEOUT_S": "5",
			scope + "__GLOBAL__MAX_CONCURRENCY": "2", scope + "__GLOBAL__POOL": "shared",
			scope + "__BACKPRESSURE__POLL_INTERVAL_S": "0.01",
		}
		c, err := polygateway.FromEnv(scope, polygateway.WithEnv(e), polygateway.WithLimiter(lim))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		clients = append(clients, c)
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		for range 4 {
			wg.Go(func() {
				if _, err := testenv.Ask(t, c); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if m := srv.MaxInFlight(); m > 2 || srv.Requests() != 8 {
		t.Fatalf("the upstream saw %d of the pool's requests at once (of %d), want at most 2", m, srv.Requests())
	}
}
