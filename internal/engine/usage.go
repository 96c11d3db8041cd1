package engine

import (
	"context"
	"encoding/json"
	"log/slog"

	"github.com/polygateway/polygateway/core"
)

// An answer's usage is the upstream's word, and a spend budget, a TPM
// window and a client's budget all settle it: one answer claiming 2^63
// tokens would spend every budget of the scope until its window ends. So
// what an attempt settles is bounded by what its request could have used:
// its prompt as sent and its output limit. An answer that claims more is
// settled, billed and reported at the bound (UsageSource "bounded"),
// counted (AttemptEvent.UsageBounded) and logged as an upstream anomaly.
//
// The bound of a prompt is its bytes: a token of text is at least one
// byte in every tokenizer in use, so a prompt of n bytes is at most n
// tokens, plus a provider's framing of each message (perMessageTokens),
// of the whole request (requestTokens: chat templates, the rendering of
// tools and of a response format) and of each image (imageTokens, above
// what any vision model counts for one image). The bound of an answer is
// the request's max_completion_tokens or max_tokens, else the source's
// CONTEXT_WINDOW, else maxCompletionTokens.
const (
	perMessageTokens    = 16
	requestTokens       = 4096
	imageTokens         = 16384
	maxCompletionTokens = 262144
)

// usageBound is the most prompt and completion tokens an answer to call on
// s may claim; a prompt bound of -1 is none (a typed attempt that did not
// say what it sends).
func usageBound(call *core.Call, s *sourceState, withParams bool) (prompt, completion int) {
	completion = maxCompletionTokens
	if call.Attempt != nil {
		if call.InputBytes <= 0 {
			return -1, completion
		}
		return call.InputBytes + requestTokens, completion
	}
	if out, ok := core.OutputLimit(call.Params); ok {
		completion = out
	} else if w := s.cfg.ContextWindow; w > 0 {
		completion = w
	}
	prompt = requestTokens
	for i := range call.Messages {
		prompt += messageBytes(&call.Messages[i]) + perMessageTokens
	}
	if withParams && len(call.Params) > 0 {
		b, err := json.Marshal(call.Params)
		if err != nil {
			return -1, completion
		}
		prompt += len(b)
	}
	return prompt, completion
}

// messageBytes is the bytes of text m carries, an image counted as
// imageTokens.
func messageBytes(m *core.Message) int {
	n := len(m.Role) + len(m.Content) + len(m.Name) + len(m.ToolCallID)
	for _, p := range m.Parts {
		if p.ImageURL != "" || p.Type != core.PartText {
			n += imageTokens
			continue
		}
		n += len(p.Text)
	}
	for _, t := range m.ToolCalls {
		n += len(t.ID) + len(t.Type) + len(t.Name) + len(t.Arguments)
	}
	return n
}

// boundUsage settles resp's usage at the bound of its request when it
// claims more, and reports whether it did. The params are priced only
// when the messages alone do not cover the claimed prompt.
func (r *run) boundUsage(ctx context.Context, s *sourceState, resp *core.LLMResponse) bool {
	call := r.call
	if r.cont.on {
		call = r.cont.call // the call as sent, with its prefill
	}
	prompt, completion := usageBound(call, s, false)
	if prompt >= 0 && resp.PromptTokens > prompt {
		prompt, _ = usageBound(call, s, true)
	}
	over := prompt >= 0 && resp.PromptTokens > prompt || resp.CompletionTokens > completion
	if !over {
		return false
	}
	claimed := [2]int{resp.PromptTokens, resp.CompletionTokens}
	if prompt >= 0 {
		resp.PromptTokens = min(resp.PromptTokens, prompt)
	}
	resp.CompletionTokens = min(resp.CompletionTokens, completion)
	resp.CachedPromptTokens = min(resp.CachedPromptTokens, resp.PromptTokens)
	resp.UsageSource = core.UsageBounded
	resp.Cost = nil // priced again from the bounded usage
	r.e.log.LogAttrs(ctx, slog.LevelWarn, "polygateway: upstream claimed more usage than the request could use; settled at the bound",
		slog.String("call_id", r.call.ID), slog.String("scope", r.e.settings.Scope), slog.String("source", s.cfg.Name),
		slog.Int("claimed_prompt_tokens", claimed[0]), slog.Int("claimed_completion_tokens", claimed[1]),
		slog.Int("prompt_tokens", resp.PromptTokens), slog.Int("completion_tokens", resp.CompletionTokens))
	return true
}
