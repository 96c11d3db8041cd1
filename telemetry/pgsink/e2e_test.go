package pgsink_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry/pgsink"
)

const (
	apiKey1 = "sk-pgw-e2e-secret-one-0123456789"
	apiKey2 = "sk-pgw-e2e-secret-two-9876543210"
)

// e2eEnv is a two-source configuration with a memory cache and Postgres
// telemetry at dsn. Source 1's model is priced, source 2's is not.
func e2eEnv(up *fu.Server, dsn string) map[string]string {
	return map[string]string{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "memory", "PGW_CACHE_NAMESPACE": "e2e", "PGW_CACHE_TTL_S": "600",
		"PGW_TELEMETRY_BACKEND": "postgres", "PGW_TELEMETRY_PG_DSN": dsn,
		"LLM__RETRY__BACKOFF_BASE_S": "0.01", "LLM__RETRY__BACKOFF_MAX_S": "0.05",
		"LLM__OPENAI__1__BASE_URL": up.URL(), "LLM__OPENAI__1__API_KEY": apiKey1,
		"LLM__OPENAI__1__MODEL": "priced-model", "LLM__OPENAI__1__TIMEOUT_S": "10",
		"LLM__OPENAI__2__BASE_URL": up.URL(), "LLM__OPENAI__2__API_KEY": apiKey2,
		"LLM__OPENAI__2__MODEL": "unpriced-model", "LLM__OPENAI__2__TIMEOUT_S": "10",
	}
}

// behaviour answers by the marker in the prompt.
func behaviour(r fu.RequestInfo) fu.Behavior {
	switch {
	case bytes.Contains(r.Body, []byte("fail-")):
		return fu.ContextLength() // 400: RequestRejectedError, no retry
	case bytes.Contains(r.Body, []byte("hang-")):
		return fu.Hang() // the caller cancels
	}
	return fu.OK().WithTokens(5)
}

type outcome int

const (
	success outcome = iota
	cacheHit
	failure
	cancelled
)

// TestThousandMixedCallsWriteOneRowPerNonCancelledCall makes 1,000 calls —
// successes on a priced and an unpriced source, failures, cache hits and
// cancelled calls — through a client assembled from the environment with
// PGW_TELEMETRY_BACKEND=postgres, and checks the table after Close.
func TestThousandMixedCallsWriteOneRowPerNonCancelledCall(t *testing.T) {
	t.Parallel()
	dsn := pgsink.PostgresDSN(t)
	schema := pgsink.FreshSchema(t, dsn)
	up := fu.NewServer(t, fu.WithFunc(behaviour))
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(e2eEnv(up, pgsink.PinnedDSN(t, dsn, "", schema))),
		polygateway.WithPricing(polygateway.PricingTable{"priced-model": {InputPer1M: 2, OutputPer1M: 8}}))
	if err != nil {
		t.Fatalf("FromEnv: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })

	const total, warm = 1000, 10
	outcomes := make([]outcome, total)
	call := func(i int, prompt string, cancelAfter time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if cancelAfter > 0 {
			var stop context.CancelFunc
			ctx, stop = context.WithCancel(ctx)
			time.AfterFunc(cancelAfter, stop)
		}
		resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User(prompt)}, polygateway.WithSessionID(fmt.Sprintf("s-%04d", i)))
		switch {
		case err == nil && resp.CacheHit:
			outcomes[i] = cacheHit
		case err == nil:
			outcomes[i] = success
		case errors.Is(err, context.Canceled):
			outcomes[i] = cancelled
		default:
			var rr *polygateway.RequestRejectedError
			if !errors.As(err, &rr) {
				t.Errorf("call %d (%s): unexpected error %v", i, prompt, err)
			}
			outcomes[i] = failure
		}
	}
	// Warm the cache: one miss per cached prompt.
	for k := range warm {
		call(k, fmt.Sprintf("cached-%d", k), 0)
	}
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range jobs {
				switch i % 10 {
				case 0, 1, 2, 3, 4:
					call(i, fmt.Sprintf("ok-%d", i), 0)
				case 5, 6:
					call(i, fmt.Sprintf("fail-%d", i), 0)
				case 7, 8:
					call(i, fmt.Sprintf("cached-%d", i%warm), 0)
				case 9:
					call(i, fmt.Sprintf("hang-%d", i), 20*time.Millisecond)
				}
			}
		})
	}
	start := time.Now()
	for i := warm; i < total; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	count := map[outcome]int{}
	for _, o := range outcomes {
		count[o]++
	}
	if count[cacheHit] == 0 || count[failure] == 0 || count[cancelled] == 0 || count[success] == 0 {
		t.Fatalf("outcomes %v: the mix is missing a kind", count)
	}
	rows := pgsink.ReadRows(t, dsn, schema)
	bySession := map[string]int{}
	pricedRows := 0
	for _, r := range rows {
		bySession[r.SessionID]++
		for _, v := range []string{r.CallID, r.ParentCallID, r.SessionID, r.Model, r.Provider, r.SourceName,
			r.Messages, r.Response, r.Thinking, r.UsageSource, r.Error, r.Scope} {
			if strings.Contains(v, apiKey1) || strings.Contains(v, apiKey2) {
				t.Fatalf("row %s contains an API key", r.CallID)
			}
		}
		var i int
		if _, err := fmt.Sscanf(r.SessionID, "s-%04d", &i); err != nil {
			t.Fatalf("row with session %q", r.SessionID)
		}
		switch outcomes[i] {
		case cacheHit:
			if !r.CacheHit || r.Cost == nil || *r.Cost != 0 {
				t.Errorf("cache-hit row %d: cache_hit=%v cost=%v, want true and 0", i, r.CacheHit, r.Cost)
			}
		case failure:
			if !strings.HasPrefix(r.Error, "RequestRejectedError: ") || r.Cost != nil {
				t.Errorf("failure row %d: error=%q cost=%v", i, r.Error, r.Cost)
			}
		case success:
			if r.Error != "" || r.Response == "" || r.CompletionTokens == 0 {
				t.Errorf("success row %d: %+v", i, r)
			}
			switch r.SourceName {
			case "openai_1":
				if r.Cost == nil || *r.Cost <= 0 {
					t.Errorf("row %d from the priced source has cost %v", i, r.Cost)
				}
				pricedRows++
			case "openai_2":
				if r.Cost != nil {
					t.Errorf("row %d from the unpriced source has cost %v, want NULL", i, *r.Cost)
				}
			default:
				t.Errorf("row %d: source %q", i, r.SourceName)
			}
		case cancelled:
			t.Errorf("cancelled call %d wrote a row", i)
		}
	}
	for i, o := range outcomes {
		want := 1
		if o == cancelled {
			want = 0
		}
		if got := bySession[fmt.Sprintf("s-%04d", i)]; got != want {
			t.Errorf("call %d (outcome %d): %d rows, want %d", i, o, got, want)
		}
	}
	if pricedRows == 0 {
		t.Error("no successful call went to the priced source")
	}
	if n := total - count[cancelled]; len(rows) != n {
		t.Fatalf("%d rows, want %d (one per non-cancelled call)", len(rows), n)
	}
	t.Logf("%d calls in %s: %d successes (%d priced), %d cache hits, %d failures, %d cancelled; %d rows",
		total-warm, took, count[success], pricedRows, count[cacheHit], count[failure], count[cancelled], len(rows))
}

// TestClientKeepsWorkingWhilePostgresIsUnreachableAndRowsResume assembles a
// client whose Postgres refuses connections: assembly succeeds, calls
// succeed at their usual speed, and once Postgres is reachable the rows of
// later calls arrive (the sink retries after 1 s, then 2 s, …).
func TestClientKeepsWorkingWhilePostgresIsUnreachableAndRowsResume(t *testing.T) {
	t.Parallel()
	dsn := pgsink.PostgresDSN(t)
	schema := pgsink.FreshSchema(t, dsn)
	addr, startPG := pgsink.ClosedPortProxy(t, dsn)
	up := fu.NewServer(t, fu.WithFunc(behaviour))
	begin := time.Now()
	c, err := polygateway.FromEnv("LLM", polygateway.WithEnv(e2eEnv(up, pgsink.PinnedDSN(t, dsn, addr, schema))))
	if err != nil {
		t.Fatalf("FromEnv with Postgres down: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	assembly := time.Since(begin)

	ask := func(prompt string) time.Duration {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		if _, err := c.Chat(ctx, []polygateway.Message{polygateway.User(prompt)}, polygateway.WithSessionID(prompt)); err != nil {
			t.Fatalf("%s: %v", prompt, err)
		}
		return time.Since(start)
	}
	const n = 50
	ask("warm-up") // connection setup to the fake upstream
	down := make([]time.Duration, n)
	for i := range n {
		down[i] = ask(fmt.Sprintf("ok-down-%d", i))
	}
	startPG()
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; ; i++ {
		ask(fmt.Sprintf("ok-up-%d", i))
		if rows, err := pgsink.TryReadRows(dsn, schema); err == nil && len(rows) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no row arrived within 20 s of Postgres becoming reachable")
		}
		time.Sleep(100 * time.Millisecond)
	}
	healthy := make([]time.Duration, n)
	for i := range n {
		healthy[i] = ask(fmt.Sprintf("ok-healthy-%d", i))
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, r := range pgsink.ReadRows(t, dsn, schema) {
		if strings.HasPrefix(r.SessionID, "ok-down-") {
			t.Errorf("a call made while Postgres was down has a row: %s (it should have been dropped)", r.SessionID)
		}
	}
	if assembly > 2*time.Second {
		t.Errorf("assembly took %s with Postgres refusing connections", assembly)
	}
	slices.Sort(down)
	slices.Sort(healthy)
	if down[n/2] > 20*time.Millisecond {
		t.Errorf("median call while Postgres is down took %s", down[n/2])
	}
	if rows := pgsink.ReadRows(t, dsn, schema); len(rows) < n {
		t.Errorf("%d rows after recovery, want at least the %d healthy calls", len(rows), n)
	}
	t.Logf("assembly with Postgres down: %s; median call while down %s, while up %s", assembly, down[n/2], healthy[n/2])
}
