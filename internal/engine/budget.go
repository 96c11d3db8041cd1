package engine

import (
	"context"
	"math"

	"github.com/polygateway/polygateway/core"
)

// defaultOutputTokens is the answer size a budget reservation assumes for
// a request that sets no max_tokens on a source without EST_TOKENS.
const defaultOutputTokens = 1024

// budgets returns the spend budgets an attempt of call reserves on: the
// scope's, then the call's own (nil when there are none).
func (e *Engine) budgets(call *core.Call) []core.Budget {
	if len(call.Budgets) == 0 {
		return e.scopeBudgets
	}
	if len(e.scopeBudgets) == 0 {
		return call.Budgets
	}
	out := make([]core.Budget, 0, len(e.scopeBudgets)+len(call.Budgets))
	return append(append(out, e.scopeBudgets...), call.Budgets...)
}

// Budgeted reports whether calls of the scope, or this call, reserve on a
// spend budget (the chat front-end then estimates Call.Tokens).
func (e *Engine) Budgeted(call *core.Call) bool {
	return len(e.scopeBudgets) > 0 || len(call.Budgets) > 0
}

// estimateCost is the cost, in micro-USD, an attempt of call on s reserves:
// the prompt's estimate at the input price plus the most the answer may
// be (max_tokens; else EST_TOKENS; else defaultOutputTokens) at the output
// price. A typed attempt (embeddings, OCR) prices its Tokens, or
// EST_TOKENS, as input. An unpriced source reserves 0.
func estimateCost(s *sourceState, call *core.Call) int64 {
	if !s.priced {
		return 0
	}
	var in, out int
	if call.Attempt != nil {
		in = call.Tokens
		if in <= 0 {
			in = s.cfg.EstTokens
		}
	} else {
		in = max(call.Tokens-call.MaxOutputTokens, 0)
		switch {
		case call.MaxOutputTokens > 0:
			out = call.MaxOutputTokens
		case s.cfg.EstTokens > 0:
			out = s.cfg.EstTokens
		default:
			out = defaultOutputTokens
		}
	}
	return microUSD((float64(in)*s.modelPrice.InputPer1M + float64(out)*s.modelPrice.OutputPer1M) / 1e6)
}

// actualCost is what an answer cost in micro-USD: its own Cost when the
// upstream priced it, else its usage priced by the table; 0 when unpriced.
func (e *Engine) actualCost(s *sourceState, resp *core.LLMResponse) int64 {
	if resp == nil {
		return 0
	}
	if resp.Cost != nil {
		return microUSD(*resp.Cost)
	}
	if c := e.pricing.CostCached(s.cfg.Model, resp.PromptTokens, resp.CachedPromptTokens, resp.CompletionTokens); c != nil {
		return microUSD(*c)
	}
	return 0
}

// microUSD converts USD to micro-USD, rounding up (a reservation never
// falls short by rounding), and bounds what cannot be represented.
func microUSD(usd float64) int64 {
	switch {
	case math.IsNaN(usd) || usd <= 0:
		return 0
	case usd >= math.MaxInt64/1e6:
		return math.MaxInt64 / 2
	}
	return int64(math.Ceil(usd * 1e6))
}

// settlement is how an attempt's permit is settled under its effect: the
// tokens and, on the budgets, the cost.
func (e *Engine) settlement(s *sourceState, t *core.Ticket, eff effect, resp *core.LLMResponse) core.Settlement {
	settle := core.Settlement{Kind: eff.settle}
	switch {
	case eff.settle == core.SettleActual && resp != nil:
		settle.Tokens = resp.PromptTokens + resp.CompletionTokens
		settle.Cost = e.actualCost(s, resp)
	case eff.settle == core.SettleActual:
		settle.Kind = core.SettleEstimate
	case eff.unbilled && eff.settle == core.SettleEstimate && t.Grant.Permit.Cost > 0:
		// Keep the tokens' estimate, give the reserved cost back.
		settle = core.Settlement{Kind: core.SettleActual, Tokens: t.Grant.Permit.Tokens}
	}
	return settle
}

// budgetExhausted is the error of a call refused by a spend budget when
// admitting source: it and every source not yet failed in this call are
// named budget_exhausted, and RetryAfter is when the budget's window ends.
func (r *run) budgetExhausted(source string, g core.Grant) *core.GatewayUnavailableError {
	e := r.e
	u := &core.GatewayUnavailableError{Scope: e.settings.Scope, Reason: core.ReasonBudgetExhausted,
		RetryAfter: max(g.RetryAfter, 0), Budget: g.Budget, Err: r.lastErr,
		PerSource: make(map[string]core.Reason, len(e.sources))}
	for _, s := range e.sources {
		name := s.cfg.Name
		if why, ok := r.perSource[name]; ok && name != source {
			u.PerSource[name] = why
		} else {
			u.PerSource[name] = core.ReasonBudgetExhausted
		}
	}
	return u
}

// Budgets reports the current window of the scope's budget and of extra
// (a gateway's client budgets), as the scope (in its pool) counts them.
func (e *Engine) Budgets(ctx context.Context, extra ...core.Budget) ([]core.BudgetUsage, error) {
	bs := append(append([]core.Budget(nil), e.scopeBudgets...), extra...)
	if len(bs) == 0 {
		return nil, nil
	}
	out, err := e.limiter.Budgets(ctx, e.settings.Scope, e.settings.GlobalPool, bs)
	if err != nil {
		return nil, &core.GovernanceBackendError{Backend: "limiter", Op: "budgets", Err: err}
	}
	return out, nil
}
