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
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
)

// coldUpstream answers every request after latency and records how many
// arrived before its first answer left.
type coldUpstream struct {
	latency time.Duration

	mu        sync.Mutex
	answered  bool
	firstWave int
}

func (u *coldUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	u.mu.Lock()
	if !u.answered {
		u.firstWave++
	}
	u.mu.Unlock()
	defer func() {
		u.mu.Lock()
		u.answered = true
		u.mu.Unlock()
	}()
	t := time.NewTimer(u.latency)
	defer t.Stop()
	select {
	case <-r.Context().Done():
		return nil, r.Context().Err()
	case <-t.C:
	}
	body := fmt.Sprintf(completionBody, "cold")
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

var _ http.RoundTripper = (*coldUpstream)(nil)

// Through FromEnv, a burst of random size (1 to 64 callers at once) on a
// cold source, with random latency and an admission that takes a random
// round trip (0 to 2 ms): the source never gets more requests before its
// first answer than the adaptive limit starts at (4), and every call is
// answered.
func TestPropertyABurstOnAColdSourceNeverExceedsItsStartLimit(t *testing.T) {
	t.Parallel()
	const start = 4
	for seed := range uint64(24) {
		r := rand.New(rand.NewPCG(seed, 2104))
		callers := 1 + r.IntN(64)
		up := &coldUpstream{latency: time.Duration(5+r.IntN(300)) * time.Millisecond}
		rtt := time.Duration(r.IntN(3)) * time.Millisecond
		name := fmt.Sprintf("seed %d: %d callers, latency %v, admission round trip %v", seed, callers, up.latency, rtt)
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				adm := testkit.SlowAdmitter{Admitter: core.ComposeAdmitter(memory.NewLimiter(), memory.NewBreaker()), RTT: rtt}
				c := testenv.Env{
					"PGW_LIMITER_BACKEND": "memory", "PGW_BREAKER_BACKEND": "memory",
					"PGW_CACHE_BACKEND": "none", "PGW_TELEMETRY_BACKEND": "none",
					"LLM__OPENAI__1__BASE_URL": "http://primary.test/v1", "LLM__OPENAI__1__API_KEY": "sk-test-primary",
					"LLM__OPENAI__1__MODEL": "primary-model", "LLM__OPENAI__1__TIMEOUT_S": "30",
				}.Client(t, polygateway.WithHTTPClient(&http.Client{Transport: up}), polygateway.WithAdmitter(adm))
				var wg sync.WaitGroup
				errs := make(chan error, callers)
				for range callers {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						if _, err := c.Chat(ctx, []polygateway.Message{polygateway.User("hello")}); err != nil {
							errs <- err
						}
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					t.Fatalf("%s: a call failed: %v", name, err)
				}
				if up.firstWave > start {
					t.Errorf("%s: the cold source got %d requests before its first answer, want at most %d", name, up.firstWave, start)
				}
				if want := min(callers, start); up.firstWave < want {
					t.Errorf("%s: only %d requests before the first answer, want %d (the start limit, used)", name, up.firstWave, want)
				}
			})
		})
	}
}
