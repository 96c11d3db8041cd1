package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
)

func TestQualityProblem(t *testing.T) {
	t.Parallel()
	q := core.QualitySettings{Guard: true, MinChars: 5}
	loop := "Here is the plan. " + strings.Repeat("and then we repeat this step ", 10)
	cases := []struct {
		name string
		resp core.LLMResponse
		bad  bool
	}{
		{"normal answer", core.LLMResponse{Content: "Paris is the capital of France.", FinishReason: "stop"}, false},
		{"empty", core.LLMResponse{Content: "   ", FinishReason: "stop"}, true},
		{"too short", core.LLMResponse{Content: "ok", FinishReason: "stop"}, true},
		{"tool call without text", core.LLMResponse{ToolCalls: []core.ToolCall{{Name: "f"}}, FinishReason: "tool_calls"}, false},
		{"cut at the token limit", core.LLMResponse{Content: "A long story that", FinishReason: "length"}, true},
		{"refusal", core.LLMResponse{Content: "I'm sorry, but I can't help with that request.", FinishReason: "stop"}, true},
		{"chinese refusal", core.LLMResponse{Content: "抱歉，我无法回答这个问题。", FinishReason: "stop"}, true},
		{"refusal with typographic apostrophes", core.LLMResponse{Content: "I\u2019m sorry, but I can\u2019t assist with that.", FinishReason: "stop"}, true},
		{"long text quoting a refusal is fine", core.LLMResponse{Content: "The assistant said: I can't help with that. " + varied(12), FinishReason: "stop"}, false},
		{"repetition loop", core.LLMResponse{Content: loop, FinishReason: "stop"}, true},
		{"short repeated word is fine", core.LLMResponse{Content: "ha ha ha ha, very funny indeed", FinishReason: "stop"}, false},
		{"character loop", core.LLMResponse{Content: "Answer: " + strings.Repeat("=", 200), FinishReason: "stop"}, true},
	}
	for _, tc := range cases {
		if got := qualityProblem(&tc.resp, q) != ""; got != tc.bad {
			t.Errorf("%s: bad = %v, want %v (%q)", tc.name, got, tc.bad, qualityProblem(&tc.resp, q))
		}
	}
}

// varied returns n distinct sentences.
func varied(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "Point %d explains a different detail. ", i)
	}
	return b.String()
}
