package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// budgetEnv is a scope whose source openai_1 (model openai-model) costs
// nothing per prompt token and 2 micro-USD per answer token: a call with
// max_tokens 1000 reserves 2000 micro-USD, and an answer of n tokens costs
// 2n. The budget is usd per hour.
func budgetEnv(t *testing.T, srv *fu.Server, usd string) testenv.Env {
	t.Helper()
	prices := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(prices, []byte(`{"openai-model": {"input_per_1m": 0, "output_per_1m": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_PRICING_PATH", prices,
		"LLM__BUDGET__USD", usd, "LLM__BUDGET__WINDOW_S", "3600", "LLM__RETRY__MAX_ATTEMPTS", "1")
}

// askMax asks with max_tokens 1000.
func askMax(c *polygateway.GatewayClient) (*polygateway.LLMResponse, error) {
	return c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")}, polygateway.WithMaxTokens(1000))
}

func TestFiftyConcurrentCallsAgainstABudgetOfTenSendAtMostTen(t *testing.T) {
	t.Parallel()
	// Every answer uses its whole max_tokens: it costs what it reserved,
	// 2000 micro-USD, so the budget holds 10 calls whatever their order.
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(1000)))
	c := budgetEnv(t, srv, "0.0205").Client(t)
	const calls = 50
	errs := make(chan error, calls)
	for range calls {
		go func() {
			_, err := askMax(c)
			errs <- err
		}()
	}
	answered, refused := 0, 0
	for range calls {
		err := <-errs
		if err == nil {
			answered++
			continue
		}
		var u *polygateway.GatewayUnavailableError
		if !errors.As(err, &u) || u.Reason != core.ReasonBudgetExhausted || !errors.Is(err, polygateway.ErrBudgetExhausted) {
			t.Fatalf("a call ended with %v, want an answer or budget_exhausted", err)
		}
		if u.RetryAfter <= 0 || u.RetryAfter > time.Hour || u.Budget != "scope:LLM" || u.PerSource["openai_1"] != core.ReasonBudgetExhausted {
			t.Fatalf("refusal %+v, want RetryAfter within the hour's window, the scope's budget and the source named", u)
		}
		refused++
	}
	if answered != 10 || refused != 40 || srv.Requests() != 10 {
		t.Fatalf("%d answered (upstream saw %d), %d refused; want exactly 10 sent and 40 refused", answered, srv.Requests(), refused)
	}
	bs, err := c.Budgets(context.Background())
	if err != nil || len(bs) != 1 || bs[0].Spent != 20000 {
		t.Fatalf("Budgets = %+v, %v; want 20000 micro-USD spent", bs, err)
	}
}

func TestSettlingToTheActualCostLetsLaterCallsFit(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(5)))
	// Room for 10 reservations of 2000; each call then costs 10.
	c := budgetEnv(t, srv, "0.0205").Client(t)
	for i := range 30 {
		if _, err := askMax(c); err != nil {
			t.Fatalf("call %d: %v (the reservations were not settled to the actual cost)", i+1, err)
		}
	}
	bs, err := c.Budgets(context.Background())
	if err != nil || len(bs) != 1 {
		t.Fatalf("Budgets = %v, %v", bs, err)
	}
	b := bs[0]
	if b.Key != "scope:LLM" || b.Limit != 20500 || b.Spent != 30*10 || b.Window != time.Hour || !b.WindowEnd.Equal(b.WindowStart.Add(time.Hour)) {
		t.Fatalf("budget %+v, want 300 micro-USD spent of 20500 in an hour's window", b)
	}
}

func TestAFailedAttemptOnA5xxSpendsNothingOfTheBudget(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.ServerError(500)))
	c := budgetEnv(t, srv, "0.0205").Client(t)
	for range 3 {
		if _, err := askMax(c); err == nil {
			t.Fatal("a 500 answered")
		}
	}
	bs, err := c.Budgets(context.Background())
	if err != nil || len(bs) != 1 || bs[0].Spent != 0 {
		t.Fatalf("Budgets = %+v, %v; want nothing spent after three 500s", bs, err)
	}
}

// TestEveryBudgetTheConfigurationAcceptsIsKept: a budget the configuration
// accepts is one the limiter keeps (at most 2^53 micro-USD), never one that
// fails every call with a GovernanceBackendError.
func TestEveryBudgetTheConfigurationAcceptsIsKept(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(5)))
	c := budgetEnv(t, srv, "9000000000").Client(t)
	if _, err := askMax(c); err != nil {
		t.Fatalf("a call under the largest budget: %v", err)
	}
	if bs, err := c.Budgets(context.Background()); err != nil || len(bs) != 1 || bs[0].Limit != 9e15 || bs[0].Spent != 10 {
		t.Fatalf("Budgets = %+v, %v; want 10 micro-USD spent of 9e15", bs, err)
	}
	_, err := polygateway.FromEnv("LLM", polygateway.WithEnv(budgetEnv(t, srv, "10000000000")))
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "LLM__BUDGET__USD" {
		t.Fatalf("FromEnv with a budget of 1e10 USD = %v, want a ConfigError naming LLM__BUDGET__USD", err)
	}
}

func TestABudgetedScopeWithoutPricesIsAConfigError(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	e := testenv.Base().Source("openai", 1, srv.URL()).Set("LLM__BUDGET__USD", "5")
	_, err := polygateway.FromEnv("LLM", polygateway.WithEnv(e))
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "LLM__BUDGET__USD" {
		t.Fatalf("FromEnv = %v, want a ConfigError naming LLM__BUDGET__USD", err)
	}
}

func TestADisabledSourceGetsNoRequestUntilEnabled(t *testing.T) {
	t.Parallel()
	primary, fallback := fu.NewServer(t), fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").Client(t)
	ctx := context.Background()
	if err := c.DisableSource(ctx, "openai_1"); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		resp, err := testenv.Ask(t, c)
		if err != nil || resp.SourceName != "qwen_1" {
			t.Fatalf("answer %v, %v; want the fallback while the primary is off", resp, err)
		}
	}
	if primary.Requests() != 0 {
		t.Fatalf("the disabled source got %d requests", primary.Requests())
	}
	var st polygateway.SourceStatus
	for _, s := range c.Sources(ctx) {
		if s.Name == "openai_1" {
			st = s
		}
	}
	if !st.Breaker.Disabled || st.Breaker.State != core.StateClosed {
		t.Fatalf("status %+v, want disabled with its circuit closed", st.Breaker)
	}
	// Every source off: a call fails at once, naming why.
	if err := c.DisableSource(ctx, "qwen_1"); err != nil {
		t.Fatal(err)
	}
	var u *polygateway.GatewayUnavailableError
	if _, err := testenv.Ask(t, c); !errors.As(err, &u) || u.Reason != core.ReasonDisabled || u.PerSource["openai_1"] != core.ReasonDisabled {
		t.Fatalf("all off: %v, want reason disabled", err)
	}
	if err := c.ResetAllSources(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := testenv.Ask(t, c); !errors.As(err, &u) || u.Reason != core.ReasonDisabled {
		t.Fatalf("a reset switched a source on: %v", err)
	}
	for _, name := range []string{"openai_1", "qwen_1"} {
		if err := c.EnableSource(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := testenv.Ask(t, c)
	if err != nil || resp.SourceName != "openai_1" {
		t.Fatalf("after enabling: %v, %v; want the primary again", resp, err)
	}
	var unknown *polygateway.UnknownSourceError
	if err := c.DisableSource(ctx, "nope_1"); !errors.As(err, &unknown) || unknown.Source != "nope_1" {
		t.Fatalf("DisableSource(nope_1) = %v, want an UnknownSourceError", err)
	}
}

// TestAnAbsurdUsageNeverExhaustsTheBudget: an upstream answer claiming
// 2^63-1 or 1e300 completion tokens on a max_tokens=1000 call, streamed or
// not, is settled at what the request could have cost: the answer reports
// the bound, the budget is charged at most the bound's price, and later
// calls are served.
func TestAnAbsurdUsageNeverExhaustsTheBudget(t *testing.T) {
	t.Parallel()
	for _, claimed := range []string{"9223372036854775807", "1e300"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s stream=%v", claimed, stream), func(t *testing.T) {
				t.Parallel()
				absurd := fu.OK().WithTokens(3).WithUsage(`{"prompt_tokens":5,"completion_tokens":` + claimed + `,"total_tokens":` + claimed + `}`)
				srv := fu.NewServer(t, fu.WithScript(absurd, fu.OK().WithTokens(3)))
				c := budgetEnv(t, srv, "0.01").Client(t) // 5 calls of 1000 tokens at 2 micro-USD
				resp, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")},
					polygateway.WithMaxTokens(1000), polygateway.WithStream(stream))
				if err != nil {
					t.Fatal(err)
				}
				if resp.CompletionTokens > 1000 || resp.UsageSource != "bounded" {
					t.Errorf("completion tokens %d (%s), want at most the 1000 of max_tokens, bounded", resp.CompletionTokens, resp.UsageSource)
				}
				bs, err := c.Budgets(context.Background())
				if err != nil || len(bs) != 1 || bs[0].Spent > 2000 {
					t.Fatalf("Budgets = %+v, %v; want at most 2000 micro-USD spent", bs, err)
				}
				for i := range 3 {
					if _, err := askMax(c); err != nil {
						t.Fatalf("call %d after the absurd answer: %v", i+1, err)
					}
				}
			})
		}
	}
}

// TestAStreamCutByAnErrorEventKeepsItsReservation: a stream that delivered
// tokens and then an in-stream error event (vLLM's, code 500) is a cut
// answer, not a 5xx answer that generated nothing: the tokens were
// generated, so its reservation stays spent, as for any other cut.
func TestAStreamCutByAnErrorEventKeepsItsReservation(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.ErrorEvent(500)))
	c := budgetEnv(t, srv, "0.0205").Client(t)
	if _, err := askMax(c); err == nil {
		t.Fatal("a stream cut by an error event answered")
	}
	bs, err := c.Budgets(context.Background())
	if err != nil || len(bs) != 1 || bs[0].Spent != 2000 {
		t.Fatalf("Budgets = %+v, %v; want the 2000 micro-USD reserved kept spent", bs, err)
	}
}
