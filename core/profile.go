package core

// ThinkingSwitch is how a provider's thinking mode is turned on or off in the request.
type ThinkingSwitch string

// Thinking switch dialects.
const (
	// ThinkingNone: the provider has no switch; ENABLE_THINKING is ignored.
	ThinkingNone ThinkingSwitch = "none"
	// ThinkingEnableFlag: top-level "enable_thinking": bool (Qwen/DashScope).
	ThinkingEnableFlag ThinkingSwitch = "enable_thinking"
	// ThinkingObject: "thinking": {"type": "enabled"|"disabled"} (DeepSeek, Zhipu, Moonshot).
	ThinkingObject ThinkingSwitch = "thinking_object"
	// ThinkingAdaptiveObject: "thinking": {"type": "adaptive"|"disabled"} (MiniMax M3).
	ThinkingAdaptiveObject ThinkingSwitch = "thinking_adaptive"
	// ThinkingChatTemplate: "chat_template_kwargs": {"enable_thinking": bool} (vLLM).
	ThinkingChatTemplate ThinkingSwitch = "chat_template_kwargs"
	// ThinkingReasoningEffort: "reasoning_effort": "medium"|"none"-style (OpenAI, Ollama).
	ThinkingReasoningEffort ThinkingSwitch = "reasoning_effort"
)

// Where thinking text arrives.
const (
	ThinkingFieldReasoningContent = "reasoning_content"
	ThinkingFieldReasoning        = "reasoning"
	ThinkingFieldThinkTags        = "think_tags"
)

// ProviderProfile is one provider's dialect: how thinking is switched, where
// thinking text arrives, and which error codes mean what.
type ProviderProfile struct {
	// Name is the lower-case provider name.
	Name string
	// Thinking is the request dialect of ENABLE_THINKING.
	Thinking ThinkingSwitch
	// ThinkingFields lists where thinking text may arrive, in order of
	// preference (ThinkingField* values). Empty = reasoning_content, reasoning.
	ThinkingFields []string
	// DeadCodes are error codes/types meaning the account is unusable
	// (quota, balance) regardless of status.
	DeadCodes []string
	// TransientCodes are error codes that must be read as transient even
	// though they look fatal (DashScope's TPM throttle says insufficient_quota).
	TransientCodes []string
	// ContentFilterCodes are error codes of content filtering (rejected).
	ContentFilterCodes []string
	// ContextLengthCodes are error codes of context overflow (rejected).
	ContextLengthCodes []string
	// NativeJSONSchema is true when the provider accepts
	// response_format {type: json_schema}.
	NativeJSONSchema bool
	// Prefill is how a continuation asks the provider to go on from an
	// assistant prefill (see CONTINUE).
	Prefill PrefillDialect
	// Continues makes the provider's sources continue a cut stream by
	// default (CONTINUE unset means prefill).
	Continues bool
}

// PrefillDialect is how a request asks a provider to continue the trailing
// assistant message instead of answering anew.
type PrefillDialect string

// Prefill dialects.
const (
	// PrefillTrailing: the trailing assistant message is the prefill; the
	// server continues it as it is.
	PrefillTrailing PrefillDialect = ""
	// PrefillPrefixFlag: the trailing assistant message carries
	// "prefix": true (DeepSeek prefix completion).
	PrefillPrefixFlag PrefillDialect = "prefix_flag"
	// PrefillContinueFinal: the body carries "continue_final_message": true
	// and "add_generation_prompt": false (vLLM).
	PrefillContinueFinal PrefillDialect = "continue_final_message"
)
