package redisstore_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	fakeupstream "github.com/polygateway/polygateway/polygatewaytest"
)

// TestBudgetAcrossTwoClients: two clients (two processes' worth: their own
// Redis connections, limiters and admitters) share a scope's budget that
// holds 10 calls; 50 concurrent calls through both send exactly 10.
func TestBudgetAcrossTwoClients(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		srv := fakeupstream.NewServer(t, fakeupstream.WithBehavior(fakeupstream.OK().WithTokens(1000)))
		prices := filepath.Join(t.TempDir(), "prices.json")
		if err := os.WriteFile(prices, []byte(`{"fake-model": {"input_per_1m": 0, "output_per_1m": 2}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		// max_tokens 1000 at 2 USD per million: 2000 micro-USD a call, and
		// each answer uses all of it.
		env := newGWEnv(scope, tg.url, srv).set("BUDGET__USD", "0.0205", "BUDGET__WINDOW_S", "3600", "RETRY__MAX_ATTEMPTS", "1").
			setRaw("PGW_PRICING_PATH", prices)
		clients := []*polygateway.GatewayClient{env.client(t), env.client(t)}
		var wg sync.WaitGroup
		var mu sync.Mutex
		answered, refused := 0, 0
		for i := range 50 {
			c := clients[i%2]
			wg.Go(func() {
				_, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")}, polygateway.WithMaxTokens(1000))
				mu.Lock()
				defer mu.Unlock()
				var u *polygateway.GatewayUnavailableError
				switch {
				case err == nil:
					answered++
				case errors.As(err, &u) && u.Reason == core.ReasonBudgetExhausted && u.RetryAfter > 0:
					refused++
				default:
					t.Errorf("call: %v", err)
				}
			})
		}
		wg.Wait()
		if answered != 10 || refused != 40 || srv.Requests() != 10 {
			t.Fatalf("%d answered (upstream saw %d), %d refused; want 10 sent and 40 refused across both clients", answered, srv.Requests(), refused)
		}
		for _, c := range clients {
			bs, err := c.Budgets(t.Context())
			if err != nil || len(bs) != 1 || bs[0].Spent != 20000 {
				t.Fatalf("Budgets = %+v, %v; want the shared 20000 micro-USD", bs, err)
			}
		}
	})
}

// TestDisabledAcrossTwoClients: one client switches a source off; the
// other's calls never reach it until it is switched on again.
func TestDisabledAcrossTwoClients(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		scope := testScope(t, tg)
		primary, fallback := fakeupstream.NewServer(t), fakeupstream.NewServer(t)
		env := newGWEnv(scope, tg.url, primary).set(
			"OTHER__1__BASE_URL", fallback.URL(), "OTHER__1__API_KEY", "sk-test-other",
			"OTHER__1__MODEL", "other-model", "OTHER__1__TIMEOUT_S", "5", "OTHER__1__PRIORITY", "1")
		operator, worker := env.client(t), env.client(t)
		if _, err := chat(worker, "warm"); err != nil {
			t.Fatal(err)
		}
		if err := operator.DisableSource(t.Context(), "fake_1"); err != nil {
			t.Fatal(err)
		}
		before := primary.Requests()
		for i := range 5 {
			resp, err := chat(worker, "while off")
			if err != nil || resp.SourceName != "other_1" {
				t.Fatalf("call %d while off: %v, %v; want the fallback", i, resp, err)
			}
		}
		if n := primary.Requests() - before; n != 0 {
			t.Fatalf("the disabled source got %d requests from the other client", n)
		}
		if st := sourceState(t, worker); !st.Breaker.Disabled {
			t.Fatalf("the other client sees %+v, want disabled", st.Breaker)
		}
		if err := operator.EnableSource(t.Context(), "fake_1"); err != nil {
			t.Fatal(err)
		}
		if err := worker.ResetSource(t.Context(), "fake_1"); err != nil { // drop its local hold at once
			t.Fatal(err)
		}
		if resp, err := chat(worker, "back"); err != nil || resp.SourceName != "fake_1" {
			t.Fatalf("after enabling: %v, %v; want fake_1", resp, err)
		}
	})
}

// TestAnAbsurdUsageLeavesTheSharedBudget: an answer claiming 2^63-1 or
// 1e300 completion tokens on a max_tokens=1000 call, streamed or not, is
// settled on the Redis budget at what the request could have cost; both
// clients sharing the budget keep being served.
func TestAnAbsurdUsageLeavesTheSharedBudget(t *testing.T) {
	forEachTarget(t, func(t *testing.T, tg target) {
		for _, claimed := range []string{"9223372036854775807", "1e300"} {
			for _, stream := range []bool{false, true} {
				scope := testScope(t, tg)
				absurd := fakeupstream.OK().WithTokens(3).WithUsage(`{"prompt_tokens":5,"completion_tokens":` + claimed + `}`)
				srv := fakeupstream.NewServer(t, fakeupstream.WithScript(absurd, fakeupstream.OK().WithTokens(3)))
				prices := filepath.Join(t.TempDir(), "prices.json")
				if err := os.WriteFile(prices, []byte(`{"fake-model": {"input_per_1m": 0, "output_per_1m": 2}}`), 0o600); err != nil {
					t.Fatal(err)
				}
				env := newGWEnv(scope, tg.url, srv).set("BUDGET__USD", "0.0105", "BUDGET__WINDOW_S", "3600", "RETRY__MAX_ATTEMPTS", "1").
					setRaw("PGW_PRICING_PATH", prices)
				clients := []*polygateway.GatewayClient{env.client(t), env.client(t)}
				for i := range 5 {
					resp, err := clients[i%2].Chat(context.Background(), []polygateway.Message{polygateway.User("hi")},
						polygateway.WithMaxTokens(1000), polygateway.WithStream(stream))
					if err != nil {
						t.Fatalf("%s stream=%v: call %d: %v", claimed, stream, i+1, err)
					}
					if resp.CompletionTokens > 1000 {
						t.Fatalf("%s stream=%v: completion tokens %d, want at most max_tokens", claimed, stream, resp.CompletionTokens)
					}
				}
				bs, err := clients[1].Budgets(t.Context())
				if err != nil || len(bs) != 1 || bs[0].Spent > 2000+4*6 {
					t.Fatalf("%s stream=%v: Budgets = %+v, %v; want the bound's 2000 micro-USD and four small answers", claimed, stream, bs, err)
				}
			}
		}
	})
}
