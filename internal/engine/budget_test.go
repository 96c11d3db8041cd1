package engine

import (
	"context"
	"math"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestEstimateCost(t *testing.T) {
	t.Parallel()
	price := core.ModelPrice{InputPer1M: 1, OutputPer1M: 4} // 1 and 4 micro-USD per token
	priced := func(est int) *sourceState {
		return &sourceState{cfg: core.SourceConfig{EstTokens: est}, modelPrice: price, priced: true}
	}
	tests := []struct {
		name  string
		s     *sourceState
		call  core.Call
		typed bool
		want  int64
	}{
		{name: "prompt and max_tokens", s: priced(0), call: core.Call{Tokens: 1100, MaxOutputTokens: 100}, want: 1000 + 400},
		{name: "no max_tokens: EST_TOKENS as the answer", s: priced(50), call: core.Call{Tokens: 1000}, want: 1000 + 200},
		{name: "neither: the default answer size", s: priced(0), call: core.Call{Tokens: 10}, want: 10 + 4*defaultOutputTokens},
		{name: "unknown size: the answer alone", s: priced(0), call: core.Call{}, want: 4 * defaultOutputTokens},
		{name: "typed attempt: its tokens as input", s: priced(7), call: core.Call{Tokens: 300}, typed: true, want: 300},
		{name: "typed attempt without tokens: EST_TOKENS", s: priced(7), call: core.Call{}, typed: true, want: 7},
		{name: "unpriced", s: &sourceState{}, call: core.Call{Tokens: 1000, MaxOutputTokens: 10}, want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			call := tt.call
			if tt.typed {
				call.Attempt = func(context.Context, *core.SourceConfig) (*core.LLMResponse, error) { return nil, nil }
			}
			if got := estimateCost(tt.s, &call); got != tt.want {
				t.Fatalf("estimateCost = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestMicroUSD(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		usd  float64
		want int64
	}{
		{0, 0}, {-1, 0}, {math.NaN(), 0}, {1, 1_000_000}, {0.0000001, 1}, {0.0000015, 2}, {1e30, math.MaxInt64 / 2},
	} {
		if got := microUSD(tt.usd); got != tt.want {
			t.Errorf("microUSD(%v) = %d, want %d", tt.usd, got, tt.want)
		}
	}
}

func TestSettlementOfEachPolicyRowOnTheBudgets(t *testing.T) {
	t.Parallel()
	e := &Engine{pricing: core.PricingTable{"m": {InputPer1M: 1, OutputPer1M: 4}}}
	s := &sourceState{cfg: core.SourceConfig{Model: "m"}}
	answer := &core.LLMResponse{PromptTokens: 10, CompletionTokens: 5}
	budgeted := core.Ticket{Grant: core.Grant{OK: true, Permit: core.Permit{Tokens: 300, Cost: 2000}}}
	unbudgeted := core.Ticket{Grant: core.Grant{OK: true, Permit: core.Permit{Tokens: 300}}}
	row := func(class core.Class, reason core.Reason) effect { return policy[policyKey{class, reason}] }
	tests := []struct {
		name string
		t    core.Ticket
		eff  effect
		resp *core.LLMResponse
		want core.Settlement
	}{
		{"an answer settles to its priced usage", budgeted, row(classSuccess, anyReason), answer, core.Settlement{Kind: core.SettleActual, Tokens: 15, Cost: 10 + 20}},
		{"an answer that priced itself", budgeted, row(classSuccess, anyReason), &core.LLMResponse{CompletionTokens: 1, Cost: ptr(0.5)}, core.Settlement{Kind: core.SettleActual, Tokens: 1, Cost: 500_000}},
		{"a 5xx keeps the tokens and gives the cost back", budgeted, row(core.ClassTransient, core.ReasonServerError), nil, core.Settlement{Kind: core.SettleActual, Tokens: 300}},
		{"a 5xx without budgets keeps the estimate", unbudgeted, row(core.ClassTransient, core.ReasonServerError), nil, core.Settlement{Kind: core.SettleEstimate}},
		{"a reset keeps the estimate (it may have generated)", budgeted, row(core.ClassTransient, anyReason), nil, core.Settlement{Kind: core.SettleEstimate}},
		{"a timeout keeps the estimate", budgeted, row(core.ClassTransient, core.ReasonTimeout), nil, core.Settlement{Kind: core.SettleEstimate}},
		{"a 429 refunds", budgeted, row(core.ClassTransient, core.ReasonRateLimited), nil, core.Settlement{Kind: core.SettleRefund}},
		{"a rejected request refunds", budgeted, row(core.ClassRejected, anyReason), nil, core.Settlement{Kind: core.SettleRefund}},
		{"an invalid result is billed", budgeted, row(core.ClassInvalid, anyReason), answer, core.Settlement{Kind: core.SettleActual, Tokens: 15, Cost: 30}},
		{"a cancellation keeps the estimate", budgeted, row(core.ClassCanceled, anyReason), nil, core.Settlement{Kind: core.SettleEstimate}},
	}
	for _, tt := range tests {
		if got := e.settlement(s, &tt.t, tt.eff, tt.resp); got != tt.want {
			t.Errorf("%s: settlement %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestOnlyA5xxInsteadOfAnAnswerGivesTheCostBack: a 5xx that came as the
// HTTP status (or with no status) generated nothing; one that came as an
// error event inside a 200 answer cut an answer that had begun.
func TestOnlyA5xxInsteadOfAnAnswerGivesTheCostBack(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		want   bool
	}{{0, true}, {500, true}, {503, true}, {200, false}} {
		eff, _ := effectOf(&core.TransientError{Reason: core.ReasonServerError, StatusCode: tt.status})
		if eff.unbilled != tt.want {
			t.Errorf("a server_error with status %d: unbilled %v, want %v", tt.status, eff.unbilled, tt.want)
		}
	}
}

// TestAStreamTheCallerStoppedTakingKeepsItsEstimate: a sink that fails
// mid-stream (a gateway client that stopped reading) ends the call as a
// rejection of the caller's side, but the source generated until then:
// the budget's reservation and the TPM estimate are kept, as for a cut,
// not refunded as for a request the source refused.
func TestAStreamTheCallerStoppedTakingKeepsItsEstimate(t *testing.T) {
	t.Parallel()
	eff, _ := effectOf(&core.RequestRejectedError{Code: "stream_consumer_failed", Reason: core.ReasonConsumerFailed})
	if eff.settle != core.SettleEstimate || eff.unbilled {
		t.Errorf("a failed consumer settles %v (unbilled %v), want the estimate kept", eff.settle, eff.unbilled)
	}
	if eff, _ := effectOf(&core.RequestRejectedError{Code: "invalid_request_error"}); eff.settle != core.SettleRefund {
		t.Errorf("a rejected request settles %v, want a refund", eff.settle)
	}
}
