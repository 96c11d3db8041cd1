package transport

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

// Recorded-style payloads of each dialect (shapes as the providers send
// them; ids shortened).

var openAIStream = []string{
	data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x1"}`),
	data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"ab"}`),
	data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":", world"},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"abc"}`),
	data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`),
	data(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1730000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}`),
	data(`[DONE]`),
}

var azureStream = []string{
	data(`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"},"self_harm":{"filtered":false,"severity":"safe"}}}]}`),
	data(`{"choices":[{"content_filter_results":{},"delta":{"content":"","refusal":null,"role":"assistant"},"finish_reason":null,"index":0,"logprobs":null}],"created":1730000000,"id":"chatcmpl-2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_2"}`),
	data(`{"choices":[{"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}},"delta":{"content":"Hi there"},"finish_reason":null,"index":0,"logprobs":null}],"created":1730000000,"id":"chatcmpl-2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_2"}`),
	data(`{"choices":[{"content_filter_results":{},"delta":{},"finish_reason":"stop","index":0,"logprobs":null}],"created":1730000000,"id":"chatcmpl-2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_2"}`),
	data(`{"choices":[],"created":1730000000,"id":"chatcmpl-2","model":"gpt-4o-2024-08-06","object":"chat.completion.chunk","system_fingerprint":"fp_2","usage":{"completion_tokens":3,"prompt_tokens":12,"total_tokens":15}}`),
	data(`[DONE]`),
}

var deepseekStream = []string{
	": keep-alive\n\n",
	": keep-alive\n\n",
	data(`{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","system_fingerprint":"fp_d","choices":[{"index":0,"delta":{"role":"assistant","content":null,"reasoning_content":""},"logprobs":null,"finish_reason":null}],"usage":null}`),
	data(`{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","system_fingerprint":"fp_d","choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Let me think"},"logprobs":null,"finish_reason":null}],"usage":null}`),
	data(`{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","system_fingerprint":"fp_d","choices":[{"index":0,"delta":{"content":null,"reasoning_content":" hard."},"logprobs":null,"finish_reason":null}],"usage":null}`),
	data(`{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","system_fingerprint":"fp_d","choices":[{"index":0,"delta":{"content":"42","reasoning_content":null},"logprobs":null,"finish_reason":null}],"usage":null}`),
	data(`{"id":"d1","object":"chat.completion.chunk","created":1,"model":"deepseek-reasoner","system_fingerprint":"fp_d","choices":[{"index":0,"delta":{"content":"","reasoning_content":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":11,"completion_tokens":20,"total_tokens":31,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":18},"prompt_cache_hit_tokens":0,"prompt_cache_miss_tokens":11}}`),
	data(`[DONE]`),
}

var qwenStream = []string{
	data(`{"choices":[{"delta":{"content":null,"role":"assistant","reasoning_content":""},"index":0,"logprobs":null,"finish_reason":null}],"object":"chat.completion.chunk","usage":null,"created":1,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-q"}`),
	data(`{"choices":[{"finish_reason":null,"logprobs":null,"delta":{"content":null,"reasoning_content":"思考"},"index":0}],"object":"chat.completion.chunk","usage":null,"created":1,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-q"}`),
	data(`{"choices":[{"finish_reason":null,"delta":{"content":"你好"},"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-q"}`),
	data(`{"choices":[{"finish_reason":"stop","delta":{"content":""},"index":0,"logprobs":null}],"object":"chat.completion.chunk","usage":null,"created":1,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-q"}`),
	data(`{"choices":[],"object":"chat.completion.chunk","usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15,"completion_tokens_details":{"reasoning_tokens":2}},"created":1,"system_fingerprint":null,"model":"qwen-plus","id":"chatcmpl-q"}`),
	data(`[DONE]`),
}

// MiniMax: <think> inline in content, tags split across chunks, usage on
// the final chunk, base_resp with status 0 on chunks.
var minimaxStream = []string{
	data(`{"id":"m1","choices":[{"index":0,"delta":{"content":"<thi","role":"assistant","name":"MiniMax AI","audio_content":""}}],"created":1,"model":"MiniMax-M2","object":"chat.completion.chunk","usage":null,"input_sensitive":false,"output_sensitive":false,"input_sensitive_type":0,"output_sensitive_type":0,"output_sensitive_int":0}`),
	data(`{"id":"m1","choices":[{"index":0,"delta":{"content":"nk>\nThe user greets","role":"assistant"}}],"created":1,"model":"MiniMax-M2","object":"chat.completion.chunk","usage":null}`),
	data(`{"id":"m1","choices":[{"index":0,"delta":{"content":" me.\n</th","role":"assistant"}}],"created":1,"model":"MiniMax-M2","object":"chat.completion.chunk","usage":null}`),
	data(`{"id":"m1","choices":[{"index":0,"delta":{"content":"ink>\n\nHello!","role":"assistant"}}],"created":1,"model":"MiniMax-M2","object":"chat.completion.chunk","usage":null}`),
	data(`{"id":"m1","choices":[{"finish_reason":"stop","index":0,"delta":{"content":" How can I help?","role":"assistant"}}],"created":1,"model":"MiniMax-M2","object":"chat.completion.chunk","usage":{"total_tokens":60,"total_characters":0,"prompt_tokens":40,"completion_tokens":20},"input_sensitive":false,"output_sensitive":false,"base_resp":{"status_code":0,"status_msg":""}}`),
	data(`[DONE]`),
}

// vLLM with continuous usage stats: usage on every chunk; "reasoning".
var vllmStream = []string{
	data(`{"id":"chatcmpl-v","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":12,"completion_tokens":0}}`),
	data(`{"id":"chatcmpl-v","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"reasoning":"hmm"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":13,"completion_tokens":1}}`),
	data(`{"id":"chatcmpl-v","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":14,"completion_tokens":2}}`),
	data(`{"id":"chatcmpl-v","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3}}`),
	data(`{"id":"chatcmpl-v","object":"chat.completion.chunk","created":1,"model":"Qwen/Qwen3-8B","choices":[],"usage":{"prompt_tokens":12,"total_tokens":15,"completion_tokens":3}}`),
	data(`[DONE]`),
}

// Ollama: a whole tool call in one delta; usage on a separate chunk.
var ollamaToolStream = []string{
	data(`{"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning":"need weather"},"finish_reason":null}]}`),
	data(`{"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_abc","index":0,"type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},"finish_reason":null}]}`),
	data(`{"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}`),
	data(`{"id":"chatcmpl-o","object":"chat.completion.chunk","created":1,"model":"qwen3:8b","system_fingerprint":"fp_ollama","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":12,"total_tokens":42}}`),
	data(`[DONE]`),
}

// OpenAI-style tool call streamed in pieces, with "id":"" on later deltas.
var openAIToolStream = []string{
	data(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"lookup","arguments":""}}]},"finish_reason":null}]}`),
	data(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"","function":{"arguments":"{\"q\":"}}]},"finish_reason":null}]}`),
	data(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"other","arguments":"{}"}}]},"finish_reason":null}]}`),
	data(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"x\"}"}}]},"finish_reason":null}]}`),
	data(`{"id":"c","object":"chat.completion.chunk","model":"gpt-4o","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`),
	data(`[DONE]`),
}

// Moonshot: usage inside choices[0].usage on the finish chunk.
var moonshotStream = []string{
	data(`{"id":"k1","object":"chat.completion.chunk","created":1,"model":"kimi-k2","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`),
	data(`{"id":"k1","object":"chat.completion.chunk","created":1,"model":"kimi-k2","choices":[{"index":0,"delta":{"reasoning_content":"plan"},"finish_reason":null}]}`),
	data(`{"id":"k1","object":"chat.completion.chunk","created":1,"model":"kimi-k2","choices":[{"index":0,"delta":{"content":"Done."},"finish_reason":null}]}`),
	data(`{"id":"k1","object":"chat.completion.chunk","created":1,"model":"kimi-k2","choices":[{"index":0,"delta":{},"finish_reason":"stop","usage":{"prompt_tokens":19,"completion_tokens":7,"total_tokens":26}}]}`),
	data(`[DONE]`),
}

// Zhipu: reasoning_content, usage on the final chunk; no "object" field.
var zhipuStream = []string{
	data(`{"id":"z1","created":1,"model":"glm-4.6","choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":"想"}}]}`),
	data(`{"id":"z1","created":1,"model":"glm-4.6","choices":[{"index":0,"delta":{"role":"assistant","content":"好的"}}]}`),
	data(`{"id":"z1","created":1,"model":"glm-4.6","choices":[{"index":0,"finish_reason":"stop","delta":{"role":"assistant","content":""}}],"usage":{"prompt_tokens":8,"completion_tokens":6,"total_tokens":14,"prompt_tokens_details":{"cached_tokens":0}}}`),
	data(`[DONE]`),
}

func TestDialectStreams(t *testing.T) {
	t.Parallel()
	type want struct {
		content, thinking, model, finish string
		prompt, completion               int
		tools                            []core.ToolCall
	}
	tests := []struct {
		name, provider string
		frames         []string
		want           want
	}{
		{"openai", "openai", openAIStream, want{"Hello, world", "", "gpt-4o-mini-2024-07-18", "stop", 9, 4, nil}},
		{"azure", "azure", azureStream, want{"Hi there", "", "gpt-4o-2024-08-06", "stop", 12, 3, nil}},
		{"deepseek", "deepseek", deepseekStream, want{"42", "Let me think hard.", "deepseek-reasoner", "stop", 11, 20, nil}},
		{"qwen", "qwen", qwenStream, want{"你好", "思考", "qwen-plus", "stop", 10, 5, nil}},
		{"minimax", "minimax", minimaxStream, want{"Hello! How can I help?", "The user greets me.", "MiniMax-M2", "stop", 40, 20, nil}},
		{"vllm", "vllm", vllmStream, want{"ok", "hmm", "Qwen/Qwen3-8B", "stop", 12, 3, nil}},
		{"ollama tools", "ollama", ollamaToolStream, want{"", "need weather", "qwen3:8b", "tool_calls", 30, 12,
			[]core.ToolCall{{Index: 0, ID: "call_abc", Type: "function", Name: "get_weather", Arguments: `{"city":"Paris"}`}}}},
		{"openai tools", "openai", openAIToolStream, want{"", "", "gpt-4o", "tool_calls", 0, 0,
			[]core.ToolCall{
				{Index: 0, ID: "call_1", Type: "function", Name: "lookup", Arguments: `{"q":"x"}`},
				{Index: 1, ID: "call_2", Type: "function", Name: "other", Arguments: `{}`},
			}}},
		{"moonshot", "moonshot", moonshotStream, want{"Done.", "plan", "kimi-k2", "stop", 19, 7, nil}},
		{"zhipu", "glm", zhipuStream, want{"好的", "想", "glm-4.6", "stop", 8, 6, nil}},
		// Same payloads under an unknown provider: tolerant parsing.
		{"deepseek as unknown", "someone", deepseekStream, want{"42", "Let me think hard.", "deepseek-reasoner", "stop", 11, 20, nil}},
		{"vllm as openai", "openai", vllmStream, want{"ok", "hmm", "Qwen/Qwen3-8B", "stop", 12, 3, nil}},
	}
	c := newClient(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, sse(tt.frames...))
			src := source(srv, tt.provider)
			r, err := c.Do(context.Background(), src, chatCall(true))
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if r.Content != w.content || r.Thinking != w.thinking {
				t.Errorf("content/thinking = %q / %q, want %q / %q", r.Content, r.Thinking, w.content, w.thinking)
			}
			if r.Model != w.model || r.FinishReason != w.finish {
				t.Errorf("model/finish = %q / %q, want %q / %q", r.Model, r.FinishReason, w.model, w.finish)
			}
			if r.Provider != tt.provider || r.SourceName != src.Name {
				t.Errorf("provider/source = %q / %q", r.Provider, r.SourceName)
			}
			if w.prompt > 0 {
				if r.PromptTokens != w.prompt || r.CompletionTokens != w.completion || r.UsageSource != core.UsageMeasured {
					t.Errorf("usage = %d/%d %s, want %d/%d measured", r.PromptTokens, r.CompletionTokens, r.UsageSource, w.prompt, w.completion)
				}
			} else if r.UsageSource != core.UsageEstimated || r.PromptTokens <= 0 {
				t.Errorf("usage = %d/%d %s, want estimated", r.PromptTokens, r.CompletionTokens, r.UsageSource)
			}
			if len(r.ToolCalls) != len(w.tools) {
				t.Fatalf("tool calls = %+v, want %+v", r.ToolCalls, w.tools)
			}
			for i := range w.tools {
				if r.ToolCalls[i] != w.tools[i] {
					t.Errorf("tool %d = %+v, want %+v", i, r.ToolCalls[i], w.tools[i])
				}
			}
			if r.TTFT <= 0 {
				t.Errorf("TTFT = %v, want > 0", r.TTFT)
			}
		})
	}
}

func TestDialectNonStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, provider, body           string
		content, thinking, finish, mdl string
		prompt, completion             int
		tools                          int
	}{
		{"openai", "openai", `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","choices":[{"index":0,"message":{"role":"assistant","content":"Hi \u00e9\n\"q\"","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8},"service_tier":"default","system_fingerprint":"fp"}`,
			"Hi é\n\"q\"", "", "stop", "gpt-4o-2024-08-06", 5, 3, 0},
		{"deepseek reasoning", "deepseek", `{"id":"x","object":"chat.completion","model":"deepseek-reasoner","choices":[{"index":0,"message":{"role":"assistant","content":"4","reasoning_content":"2+2"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":9,"total_tokens":16}}`,
			"4", "2+2", "stop", "deepseek-reasoner", 7, 9, 0},
		{"vllm reasoning + think tags", "vllm", `{"id":"x","object":"chat.completion","model":"r1","choices":[{"index":0,"message":{"role":"assistant","content":"<think>\nsteps\n</think>\n\nanswer","tool_calls":[]},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"total_tokens":10,"completion_tokens":7}}`,
			"answer", "steps", "stop", "r1", 3, 7, 0},
		{"vllm template-prefilled think (bare close tag)", "vllm", `{"model":"r1","choices":[{"index":0,"message":{"role":"assistant","content":"reasoning here</think>the answer"},"finish_reason":"stop"}]}`,
			"the answer", "reasoning here", "stop", "r1", 0, 0, 0},
		{"leading think on openai profile", "openai", `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"  <think>x</think>y <think>kept</think>"},"finish_reason":"stop"}]}`,
			"y <think>kept</think>", "x", "stop", "m", 0, 0, 0},
		{"minimax reasoning_details", "minimax", `{"id":"x","choices":[{"finish_reason":"stop","index":0,"message":{"content":"Hi","role":"assistant","name":"MiniMax AI","reasoning_details":[{"type":"reasoning.text","id":"r","format":"MiniMax-response-v1","index":0,"text":"think"}]}}],"model":"MiniMax-M2","object":"chat.completion","usage":{"total_tokens":9,"prompt_tokens":4,"completion_tokens":5},"base_resp":{"status_code":0,"status_msg":""}}`,
			"Hi", "think", "stop", "MiniMax-M2", 4, 5, 0},
		{"tool calls", "openai", `{"model":"gpt-4o","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_b","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}`,
			"", "", "tool_calls", "gpt-4o", 1, 2, 2},
		{"no usage, no model", "ollama", `{"choices":[{"message":{"content":"abcdefgh"},"finish_reason":"length"}]}`,
			"abcdefgh", "", "length", "test-model", 0, 0, 0},
		{"content parts array", "openai", `{"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"image","url":"x"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			"ab", "", "stop", "m", 0, 0, 0},
		{"choice index 1 first", "openai", `{"model":"m","choices":[{"index":1,"message":{"content":"second"}},{"index":0,"message":{"content":"first"},"finish_reason":"stop"}]}`,
			"first", "", "stop", "m", 0, 0, 0},
	}
	c := newClient(t, Config{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newServer(t, jsonResp(200, tt.body))
			r, err := c.Do(context.Background(), source(srv, tt.provider), chatCall(false))
			if err != nil {
				t.Fatal(err)
			}
			if r.Content != tt.content || r.Thinking != tt.thinking || r.FinishReason != tt.finish || r.Model != tt.mdl {
				t.Errorf("got content=%q thinking=%q finish=%q model=%q", r.Content, r.Thinking, r.FinishReason, r.Model)
			}
			if tt.prompt > 0 {
				if r.PromptTokens != tt.prompt || r.CompletionTokens != tt.completion || r.UsageSource != core.UsageMeasured {
					t.Errorf("usage %d/%d %s", r.PromptTokens, r.CompletionTokens, r.UsageSource)
				}
			} else if r.UsageSource != core.UsageEstimated {
				t.Errorf("usage source = %q, want estimated", r.UsageSource)
			}
			if len(r.ToolCalls) != tt.tools {
				t.Errorf("tool calls = %+v", r.ToolCalls)
			}
			if r.TTFT != 0 || r.MaxInterToken != 0 {
				t.Errorf("non-streamed TTFT/gap = %v/%v, want 0", r.TTFT, r.MaxInterToken)
			}
		})
	}
}

func TestDialectErrorsIn200(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	t.Run("minimax base_resp balance", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, jsonResp(200, `{"id":"","choices":null,"created":0,"model":"","object":"","usage":null,"base_resp":{"status_code":1008,"status_msg":"insufficient balance"}}`))
		_, err := c.Do(context.Background(), source(srv, "minimax"), chatCall(false))
		e := asDead(t, err)
		if e.Code != "1008" || e.Message != "insufficient balance" || e.StatusCode != 200 || e.Source != "minimax_1" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("minimax base_resp rate limit in stream", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, sse(data(`{"id":"x","choices":null,"base_resp":{"status_code":1002,"status_msg":"rate limit exceeded(RPM)"}}`)))
		_, err := c.Do(context.Background(), source(srv, "minimax"), chatCall(true))
		if e := asTransient(t, err); e.Reason != core.ReasonRateLimited || e.Code != "1002" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("anthropic style in 200", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, jsonResp(200, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`))
		_, err := c.Do(context.Background(), source(srv, "minimax"), chatCall(false))
		if e := asTransient(t, err); e.Message != "Overloaded" || e.Code != "overloaded_error" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("openai error object in 200", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, jsonResp(200, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		_ = asDead(t, err) // the assertion is the check
	})
	t.Run("dashscope throttle in 200 and in a stream", func(t *testing.T) {
		t.Parallel()
		body := `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"},"request_id":"r1"}`
		for _, stream := range []bool{false, true} {
			srv := newServer(t, jsonResp(200, body))
			if stream {
				srv = newServer(t, sse(data(body), data(`[DONE]`)))
			}
			_, err := c.Do(context.Background(), source(srv, "qwen"), chatCall(stream))
			if e := asTransient(t, err); e.Reason != core.ReasonRateLimited || e.Code != "insufficient_quota" {
				t.Fatalf("stream %v: %+v, want a rate limit", stream, e)
			}
		}
	})
	t.Run("rejection in 200 keeps its param", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, jsonResp(200, `{"error":{"message":"temperature must be at most 2","type":"invalid_request_error","param":"temperature","code":"invalid_value"}}`))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		if e := asRejected(t, err); e.Param != "temperature" || e.Code != "invalid_value" {
			t.Fatalf("%+v, want param temperature", e)
		}
	})
	t.Run("vllm error event then DONE", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, sse(
			data(`{"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,"delta":{"content":"partial"},"finish_reason":null}]}`),
			data(`{"error":{"object":"error","message":"engine died","type":"InternalServerError","param":null,"code":500}}`),
			data(`[DONE]`),
		))
		r, err := c.Do(context.Background(), source(srv, "vllm"), chatCall(true))
		if r != nil {
			t.Fatalf("got a response %+v with the error", r)
		}
		if e := asTransient(t, err); e.Message != "engine died" || e.Code != "500" {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("vllm 400 error event mid-stream", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, sse(
			data(`{"error":{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}}`),
			data(`[DONE]`),
		))
		_, err := c.Do(context.Background(), source(srv, "vllm"), chatCall(true))
		if e := asRejected(t, err); e.Code != CodeContextLength {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("event: error", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, sse("event: error\ndata: upstream exploded\n\n"))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
		if e := asTransient(t, err); !strings.Contains(e.Message, "upstream exploded") {
			t.Fatalf("%+v", e)
		}
	})
	t.Run("no choices is not an empty success", func(t *testing.T) {
		t.Parallel()
		for _, body := range []string{`{"id":"x","choices":[]}`, `{"id":"x","choices":null}`, `{"id":"x"}`} {
			srv := newServer(t, jsonResp(200, body))
			_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
			_ = asTransient(t, err) // the assertion is the check
		}
	})
	t.Run("html 200 from a proxy", func(t *testing.T) {
		t.Parallel()
		srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><head><title>Login required</title></head><body>x</body></html>")) // the client side checks what arrived
		}))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		if e := asTransient(t, err); !strings.Contains(e.Message, "Login required") {
			t.Fatalf("%+v", e)
		}
	})
}

func TestStreamAnsweredWithJSON(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	srv := newServer(t, jsonResp(200, `{"model":"m","choices":[{"index":0,"message":{"content":"whole"},"finish_reason":"stop"}]}`))
	r, err := c.Do(context.Background(), source(srv, "openai"), chatCall(true))
	if err != nil || r.Content != "whole" {
		t.Fatalf("%v %+v", err, r)
	}
	srv2 := newServer(t, sse(openAIStream...))
	r, err = c.Do(context.Background(), source(srv2, "openai"), chatCall(false))
	if err != nil || r.Content != "Hello, world" {
		t.Fatalf("%v %+v", err, r)
	}
}

// A non-stream body whose choice carries no message (none, null, not an
// object) holds no answer: a transient fault of the attempt, never an empty
// success. A message without content is an empty answer, as sent.
func TestANonStreamChoiceWithoutItsMessageIsAFault(t *testing.T) {
	t.Parallel()
	c := newClient(t, Config{})
	for _, body := range []string{
		`{"choices":[{"index":0,"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"message":null,"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"message":"alpha","finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"messag\u00e9":{"content":"alpha"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":1,"message":{"content":"alpha"}},{"index":0}]}`,
	} {
		srv := newServer(t, jsonResp(200, body))
		_, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false))
		if e := asTransient(t, err); e.Reason != core.ReasonNetworkError {
			t.Fatalf("%s: %+v", body, e)
		}
	}
	for _, body := range []string{
		`{"choices":[{"index":0,"message":{"role":"assistant"},"finish_reason":"stop"}]}`,
		`{"choices":[{"index":0,"text":"","finish_reason":"stop"}]}`,
	} {
		srv := newServer(t, jsonResp(200, body))
		if r, err := c.Do(context.Background(), source(srv, "openai"), chatCall(false)); err != nil || r.Content != "" {
			t.Fatalf("%s: (%+v, %v), want an empty answer", body, r, err)
		}
	}
}
