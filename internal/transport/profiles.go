package transport

import (
	"strings"

	"github.com/polygateway/polygateway/core"
)

// DefaultProfiles returns the built-in provider profiles, keyed by
// lower-case provider name, as a fresh map each call (callers may modify
// it). Aliases map to the same dialect under their own Name:
//
//	openai              reasoning_effort switch; no thinking text on chat completions
//	azure               no thinking switch; content_filter envelopes
//	deepseek            thinking {"type":"enabled"|"disabled"}; reasoning_content
//	qwen, dashscope     enable_thinking; reasoning_content; insufficient_quota is a TPM throttle
//	minimax             thinking {"type":"adaptive"|"disabled"}; <think> tags or reasoning_details; base_resp codes
//	vllm                chat_template_kwargs.enable_thinking; reasoning (older reasoning_content) or <think> tags
//	ollama              reasoning_effort; reasoning or <think> tags
//	moonshot, kimi      thinking object; reasoning_content
//	zhipu, glm          thinking object; reasoning_content; numeric string codes (1113 arrears, 1301 filter)
//
// NativeJSONSchema (response_format json_schema) is true for openai,
// azure, vllm and ollama only.
func DefaultProfiles() map[string]core.ProviderProfile {
	m := make(map[string]core.ProviderProfile, 14)
	for _, b := range builtinProfiles() {
		m[b.profile.Name] = b.profile
		for _, a := range b.aliases {
			q := cloneProfile(b.profile)
			q.Name = a
			m[a] = q
		}
	}
	return m
}

// builtinProfile is one entry of the built-in profile table: a dialect and
// the other provider names that speak it.
type builtinProfile struct {
	profile core.ProviderProfile
	aliases []string
}

// builtinProfiles is the table DefaultProfiles is built from.
func builtinProfiles() []builtinProfile {
	return []builtinProfile{
		{profile: openAIProfile()},
		{profile: core.ProviderProfile{
			Name:               "azure",
			Thinking:           core.ThinkingNone,
			ThinkingFields:     []string{core.ThinkingFieldReasoningContent, core.ThinkingFieldReasoning},
			DeadCodes:          []string{"insufficient_quota", "billing_hard_limit_reached"},
			ContentFilterCodes: []string{"content_filter", "content_policy_violation", "ResponsibleAIPolicyViolation"},
			ContextLengthCodes: []string{"context_length_exceeded"},
			NativeJSONSchema:   true,
		}},
		{profile: core.ProviderProfile{
			Name:               "deepseek",
			Thinking:           core.ThinkingObject,
			ThinkingFields:     []string{core.ThinkingFieldReasoningContent},
			DeadCodes:          []string{"insufficient_balance", "insufficient_quota"},
			ContentFilterCodes: []string{"content_filter"},
			ContextLengthCodes: []string{"context_length_exceeded"},
			// Prefix completion (its beta base URL): set CONTINUE=prefill.
			Prefill: core.PrefillPrefixFlag,
		}},
		{profile: core.ProviderProfile{
			Name:           "qwen",
			Thinking:       core.ThinkingEnableFlag,
			ThinkingFields: []string{core.ThinkingFieldReasoningContent},
			// Arrearage: the account is overdue; the other codes are permanent
			// access problems.
			DeadCodes: []string{"Arrearage", "AccessDenied.Unpurchased", "InvalidApiKey"},
			// DashScope reports its TPM/RPM throttle with the insufficient_quota
			// wording and code; there it is pushback, not a dead account.
			TransientCodes:     []string{"insufficient_quota", "Throttling", "Throttling.RateQuota", "Throttling.AllocationQuota", "limit_requests"},
			ContentFilterCodes: []string{"data_inspection_failed", "DataInspectionFailed", "content_filter"},
			ContextLengthCodes: []string{"context_length_exceeded"},
		}, aliases: []string{"dashscope"}},
		{profile: core.ProviderProfile{
			Name:     "minimax",
			Thinking: core.ThinkingAdaptiveObject,
			ThinkingFields: []string{
				core.ThinkingFieldThinkTags, ThinkingFieldReasoningDetails,
				core.ThinkingFieldReasoningContent, core.ThinkingFieldReasoning,
			},
			// base_resp codes: 1004 authentication failed, 1008 insufficient
			// balance, 2049 invalid API key.
			DeadCodes: []string{"1004", "1008", "2049", "insufficient_quota", "insufficient_balance"},
			// 1026/1027: input/output flagged as sensitive.
			ContentFilterCodes: []string{"1026", "1027", "content_filter"},
			ContextLengthCodes: []string{"context_length_exceeded"},
		}},
		{profile: core.ProviderProfile{
			Name:     "vllm",
			Thinking: core.ThinkingChatTemplate,
			ThinkingFields: []string{
				core.ThinkingFieldReasoning, core.ThinkingFieldReasoningContent, core.ThinkingFieldThinkTags,
			},
			ContextLengthCodes: []string{"context_length_exceeded"},
			NativeJSONSchema:   true,
			Prefill:            core.PrefillContinueFinal,
			Continues:          true,
		}},
		{profile: core.ProviderProfile{
			Name:               "ollama",
			Thinking:           core.ThinkingReasoningEffort,
			ThinkingFields:     []string{core.ThinkingFieldReasoning, core.ThinkingFieldReasoningContent, core.ThinkingFieldThinkTags},
			ContextLengthCodes: []string{"context_length_exceeded"},
			NativeJSONSchema:   true,
		}},
		{profile: core.ProviderProfile{
			Name:           "moonshot",
			Thinking:       core.ThinkingObject,
			ThinkingFields: []string{core.ThinkingFieldReasoningContent},
			// exceeded_current_quota_error: the account's balance or quota is spent.
			DeadCodes:          []string{"exceeded_current_quota_error", "insufficient_quota"},
			ContentFilterCodes: []string{"content_filter"},
			ContextLengthCodes: []string{"context_length_exceeded"},
		}, aliases: []string{"kimi"}},
		{profile: core.ProviderProfile{
			Name:           "zhipu",
			Thinking:       core.ThinkingObject,
			ThinkingFields: []string{core.ThinkingFieldReasoningContent},
			// 1112 account locked, 1113 account in arrears (sent with HTTP 429).
			DeadCodes: []string{"1112", "1113"},
			// 1301: unsafe or sensitive content.
			ContentFilterCodes: []string{"1301", "content_filter"},
			// 1261: prompt too long.
			ContextLengthCodes: []string{"1261", "context_length_exceeded"},
		}, aliases: []string{"glm"}},
	}
}

// openAIProfile is the plain OpenAI dialect, also used for unknown providers.
func openAIProfile() core.ProviderProfile {
	return core.ProviderProfile{
		Name:               "openai",
		Thinking:           core.ThinkingReasoningEffort,
		ThinkingFields:     []string{core.ThinkingFieldReasoningContent, core.ThinkingFieldReasoning},
		DeadCodes:          []string{"insufficient_quota", "billing_hard_limit_reached", "account_deactivated"},
		ContentFilterCodes: []string{"content_filter", "content_policy_violation"},
		ContextLengthCodes: []string{"context_length_exceeded"},
		NativeJSONSchema:   true,
	}
}

// ProfileFor returns the profile for provider name (case-insensitive) from
// profiles; an unknown name gets profiles["openai"] when present, else the
// built-in plain OpenAI profile.
func ProfileFor(profiles map[string]core.ProviderProfile, name string) core.ProviderProfile {
	if p, ok := profiles[name]; ok {
		return p
	}
	if lower := strings.ToLower(strings.TrimSpace(name)); lower != name {
		if p, ok := profiles[lower]; ok {
			return p
		}
	}
	if p, ok := profiles["openai"]; ok {
		return p
	}
	return openAIProfile()
}

func cloneProfile(p core.ProviderProfile) core.ProviderProfile {
	p.ThinkingFields = append([]string(nil), p.ThinkingFields...)
	p.DeadCodes = append([]string(nil), p.DeadCodes...)
	p.TransientCodes = append([]string(nil), p.TransientCodes...)
	p.ContentFilterCodes = append([]string(nil), p.ContentFilterCodes...)
	p.ContextLengthCodes = append([]string(nil), p.ContextLengthCodes...)
	return p
}
