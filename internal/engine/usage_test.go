package engine

import (
	"context"
	"encoding/json"
	"math"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// TestAnAnswerSettlesAtMostWhatItsRequestCouldUse: the usage an answer
// claims is taken as it is up to its request's bound — the prompt's bytes
// plus the framing, the output limit (max_tokens, else CONTEXT_WINDOW,
// else the cap) — and settled, billed and reported at the bound beyond it.
func TestAnAnswerSettlesAtMostWhatItsRequestCouldUse(t *testing.T) {
	t.Parallel()
	prompt := "hello"
	msgBound := requestTokens + perMessageTokens + len("user") + len(prompt)
	cases := []struct {
		name           string
		params         map[string]any
		window         int
		claimed        [2]int
		want           [2]int
		bounded        bool
		inputBytesCall bool
	}{
		{"usage within the bound is kept", map[string]any{"max_tokens": 100}, 0, [2]int{7, 100}, [2]int{7, 100}, false, false},
		{"completion above max_tokens", map[string]any{"max_tokens": 100}, 0, [2]int{7, math.MaxInt64}, [2]int{7, 100}, true, false},
		{"max_completion_tokens wins over max_tokens", map[string]any{"max_completion_tokens": 60, "max_tokens": 100}, 0, [2]int{7, 61}, [2]int{7, 60}, true, false},
		{"max_tokens as the client's JSON text", map[string]any{"max_tokens": json.RawMessage("60")}, 0, [2]int{7, 1 << 40}, [2]int{7, 60}, true, false},
		{"without max_tokens the context window", nil, 8192, [2]int{7, 1 << 40}, [2]int{7, 8192}, true, false},
		{"without either the cap", nil, 0, [2]int{7, 1 << 40}, [2]int{7, maxCompletionTokens}, true, false},
		{"a prompt above its bytes", nil, 0, [2]int{1 << 50, 3}, [2]int{msgBound, 3}, true, false},
		{"the params count toward the prompt", map[string]any{"tools": []string{"a long tool definition of many bytes"}}, 0,
			[2]int{msgBound + 20, 3}, [2]int{msgBound + 20, 3}, false, false},
		{"a typed attempt's input bytes", nil, 0, [2]int{1 << 50, 0}, [2]int{1000 + requestTokens, 0}, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := src("a", 0)
			a.ContextWindow = tc.window
			f := newFixture(t, testSettings(a))
			f.up.script("a", step{resp: &core.LLMResponse{Content: "x", PromptTokens: tc.claimed[0], CompletionTokens: tc.claimed[1],
				CachedPromptTokens: tc.claimed[0], UsageSource: core.UsageMeasured}})
			call := newCall()
			call.Messages = []core.Message{core.User(prompt)}
			call.Params = tc.params
			if tc.inputBytesCall {
				call.InputBytes = 1000
				call.Attempt = func(ctx context.Context, s *core.SourceConfig) (*core.LLMResponse, error) {
					return &core.LLMResponse{PromptTokens: tc.claimed[0], CompletionTokens: tc.claimed[1], UsageSource: core.UsageMeasured}, nil
				}
			}
			resp, err := f.g.Handle(context.Background(), call)
			if err != nil {
				t.Fatal(err)
			}
			if got := [2]int{resp.PromptTokens, resp.CompletionTokens}; got != tc.want {
				t.Errorf("usage %v, want %v", got, tc.want)
			}
			if bounded := resp.UsageSource == core.UsageBounded; bounded != tc.bounded {
				t.Errorf("UsageSource %q, bounded=%v", resp.UsageSource, tc.bounded)
			}
			if resp.CachedPromptTokens > resp.PromptTokens {
				t.Errorf("cached %d above prompt %d", resp.CachedPromptTokens, resp.PromptTokens)
			}
			if u := f.usage(t, "a"); u.InFlight != 0 {
				t.Errorf("in flight %d after the call", u.InFlight)
			}
		})
	}
}

// TestAnAbsurdUsageSpendsNoMoreThanTheRequestCouldCost: one answer claiming
// 2^63-1 completion tokens on a max_tokens=100 call settles the scope's
// budget and its TPM window at the bound; the next call is served.
func TestAnAbsurdUsageSpendsNoMoreThanTheRequestCouldCost(t *testing.T) {
	t.Parallel()
	a := src("a", 0)
	a.Limits = core.Limits{TPM: 1_000_000}
	set := testSettings(a)
	set.Budget = core.Budget{Limit: 100_000_000, Window: 3600e9} // 100 USD an hour
	prices := core.PricingTable{"model-a": {InputPer1M: 0, OutputPer1M: 100}}
	f := newFixture(t, set, withPricing(prices))
	f.up.script("a", step{resp: &core.LLMResponse{Content: "x", PromptTokens: 5, CompletionTokens: math.MaxInt64, UsageSource: core.UsageMeasured}}, okStep())
	call := newCall()
	call.Params = map[string]any{"max_tokens": 100}
	resp, err := f.g.Handle(context.Background(), call)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Cost == nil || *resp.Cost > 0.01+1e-9 {
		t.Fatalf("cost %v, want at most 100 tokens at 100 USD per million", resp.Cost)
	}
	bs, err := f.g.Budgets(context.Background())
	if err != nil || len(bs) != 1 || bs[0].Spent > 10_000 {
		t.Fatalf("budgets %+v, %v: want at most 10,000 micro-USD spent", bs, err)
	}
	if u := f.usage(t, "a"); u.Tokens > 5+100 {
		t.Errorf("TPM window holds %d tokens, want at most 105", u.Tokens)
	}
	call = newCall()
	call.Params = map[string]any{"max_tokens": 100}
	if _, err := f.g.Handle(context.Background(), call); err != nil {
		t.Errorf("the next call: %v, want an answer", err)
	}
}
