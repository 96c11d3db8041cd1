package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// memoryUpstreams is an http.RoundTripper that answers in memory, so that
// a client built by FromEnv runs in a synctest bubble on the bubble's
// time: host "primary.test" answers 429 (with Retry-After retryAfter, if
// set) to every request after latency, except that after okAfter 429s
// (when positive) it answers; every other host answers at once. It
// records when each primary request arrived and when each 429 left.
type memoryUpstreams struct {
	latency    time.Duration
	retryAfter string
	okAfter    int

	mu        sync.Mutex
	arrived   []time.Time
	limited   []time.Time
	fallbacks int
}

const completionBody = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m",` +
	`"choices":[{"index":0,"message":{"role":"assistant","content":"%s"},"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`

func (u *memoryUpstreams) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	reply := func(status int, body string, h ...string) *http.Response {
		resp := &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
			Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
		for i := 0; i+1 < len(h); i += 2 {
			resp.Header.Set(h[i], h[i+1])
		}
		return resp
	}
	if r.URL.Host != "primary.test" {
		u.mu.Lock()
		u.fallbacks++
		u.mu.Unlock()
		return reply(http.StatusOK, fmt.Sprintf(completionBody, "fallback")), nil
	}
	u.mu.Lock()
	u.arrived = append(u.arrived, time.Now())
	u.mu.Unlock()
	t := time.NewTimer(u.latency)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-t.C:
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.okAfter > 0 && len(u.limited) >= u.okAfter {
		return reply(http.StatusOK, fmt.Sprintf(completionBody, "primary")), nil
	}
	u.limited = append(u.limited, time.Now())
	body := `{"error":{"message":"rate limit reached","type":"rate_limit_error","code":"rate_limit_exceeded"}}`
	if u.retryAfter != "" {
		return reply(http.StatusTooManyRequests, body, "Retry-After", u.retryAfter), nil
	}
	return reply(http.StatusTooManyRequests, body), nil
}

var _ http.RoundTripper = (*memoryUpstreams)(nil)

// inMemoryClient is a client whose primary (tier 0) and fallback (tier 1)
// are served by up, with the given extra settings.
func inMemoryClient(t *testing.T, up *memoryUpstreams, kv ...string) *polygateway.GatewayClient {
	t.Helper()
	e := testenv.Env{
		"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
		"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
		"LLM__OPENAI__1__BASE_URL": "http://primary.test/v1", "LLM__OPENAI__1__API_KEY": "sk-test-primary",
		"LLM__OPENAI__1__MODEL": "primary-model", "LLM__OPENAI__1__TIMEOUT_S": "10",
		"LLM__QWEN__1__BASE_URL": "http://fallback.test/v1", "LLM__QWEN__1__API_KEY": "sk-test-fallback",
		"LLM__QWEN__1__MODEL": "fallback-model", "LLM__QWEN__1__TIMEOUT_S": "10", "LLM__QWEN__1__PRIORITY": "1",
	}
	e.Set(kv...)
	return e.Client(t, polygateway.WithHTTPClient(&http.Client{Transport: up}))
}

// Through FromEnv, random workloads against a primary that answers every
// request 429 — random call counts (1 to 50), callers (1 to 16), latency,
// Retry-After (none, 0, 1, 2 or 5 s), backoffs (the library's or fast) and
// tier patience — never send the primary more than 4 requests in any 3 s,
// never ask it again before a Retry-After it gave has passed, and answer
// every call from the fallback.
func TestPropertyAThrottlingPrimaryIsNeverHammeredWhateverTheWorkload(t *testing.T) {
	t.Parallel()
	for seed := range uint64(24) {
		rng := rand.New(rand.NewPCG(seed, 21))
		up := &memoryUpstreams{
			latency:    time.Duration(1+rng.IntN(200)) * time.Millisecond,
			retryAfter: []string{"", "", "0", "1", "2", "5"}[rng.IntN(6)],
		}
		calls, callers := 1+rng.IntN(50), 1+rng.IntN(16)
		kv := []string{"LLM__RETRY__MAX_ATTEMPTS", strconv.Itoa(1 + rng.IntN(3))}
		if rng.IntN(2) == 0 {
			kv = append(kv, "LLM__RETRY__BACKOFF_BASE_S", "0.001", "LLM__RETRY__BACKOFF_MAX_S", "0.004")
		}
		if rng.IntN(2) == 0 {
			kv = append(kv, "LLM__RETRY__TIER_PATIENCE_S", strconv.Itoa(rng.IntN(6)))
		}
		name := fmt.Sprintf("seed %d: %d calls from %d callers, latency %v, Retry-After %q, %v", seed, calls, callers, up.latency, up.retryAfter, kv)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := inMemoryClient(t, up, kv...)
				next := make(chan struct{}, calls)
				for range calls {
					next <- struct{}{}
				}
				close(next)
				var wg sync.WaitGroup
				errs := make(chan error, calls)
				for range min(callers, calls) {
					wg.Go(func() {
						for range next {
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User("hello")})
							cancel()
							if err == nil && resp.Content != "fallback" {
								err = fmt.Errorf("answered %q", resp.Content)
							}
							if err != nil {
								errs <- err
							}
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("%s: a call was not answered by the fallback: %v", name, err)
				}
				up.mu.Lock()
				defer up.mu.Unlock()
				if up.fallbacks != calls {
					t.Errorf("%s: the fallback answered %d requests for %d calls", name, up.fallbacks, calls)
				}
				if n := fu.MostWithin(up.arrived, 3*time.Second); n > 4 {
					t.Errorf("%s: the primary saw %d requests within 3 s, want at most 4 (arrivals %v)", name, n, relative(up.arrived))
				}
				if ra, _ := strconv.Atoi(up.retryAfter); ra > 0 {
					hint := time.Duration(ra) * time.Second
					for _, a := range up.arrived {
						for _, l := range up.limited {
							if a.After(l) && a.Sub(l) < hint {
								t.Fatalf("%s: a request %v after a 429 with Retry-After %v", name, a.Sub(l), hint)
							}
						}
					}
				}
			})
		})
	}
}

// Through FromEnv, a call whose primary answers 429 (for a while, or for
// good) with a random Retry-After, under a random tier patience and a
// random deadline, always ends before its deadline and with an answer:
// the primary's, asked no sooner than its hint allows, or the fallback's.
// The patience never spends the deadline or the attempt the fallback
// needs.
func TestPropertyTierPatienceNeverOutwaitsTheDeadlineOrTheFallback(t *testing.T) {
	t.Parallel()
	for seed := range uint64(48) {
		rng := rand.New(rand.NewPCG(seed, 2121))
		up := &memoryUpstreams{
			latency:    time.Duration(rng.IntN(100)) * time.Millisecond,
			retryAfter: []string{"", "1", "2", "3", "4", "6"}[rng.IntN(6)],
			okAfter:    rng.IntN(3), // 0: 429 for good
		}
		deadline := time.Duration(300+rng.IntN(6000)) * time.Millisecond
		kv := []string{
			"LLM__RETRY__MAX_ATTEMPTS", strconv.Itoa(1 + rng.IntN(3)),
			"LLM__RETRY__TIER_PATIENCE_S", strconv.FormatFloat(float64(rng.IntN(60))/10, 'f', 1, 64),
		}
		name := fmt.Sprintf("seed %d: deadline %v, latency %v, Retry-After %q, ok after %d 429s, %v", seed, deadline, up.latency, up.retryAfter, up.okAfter, kv)
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				c := inMemoryClient(t, up, kv...)
				start := time.Now()
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				defer cancel()
				resp, err := c.Chat(ctx, []polygateway.Message{polygateway.User("hello")})
				took := time.Since(start)
				if err != nil {
					t.Fatalf("%s: the call failed after %v: %v", name, took, err)
				}
				if took >= deadline {
					t.Errorf("%s: the call took %v, past its deadline", name, took)
				}
				up.mu.Lock()
				defer up.mu.Unlock()
				if resp.Content == "primary" {
					if ra, _ := strconv.Atoi(up.retryAfter); ra > 0 && len(up.arrived) > 1 {
						last := up.arrived[len(up.arrived)-1]
						if gap := last.Sub(up.limited[len(up.limited)-1]); gap < time.Duration(ra)*time.Second {
							t.Errorf("%s: the primary was asked %v after its 429, before its Retry-After", name, gap)
						}
					}
				}
			})
		})
	}
}

// relative lists times relative to the first, for failure messages.
func relative(ts []time.Time) []time.Duration {
	out := make([]time.Duration, len(ts))
	for i, t := range ts {
		out[i] = t.Sub(ts[0])
	}
	return out
}
