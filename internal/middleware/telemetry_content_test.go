package middleware

import (
	"context"
	"strings"
	"testing"

	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/redact"
)

// TestTelemetryContentSetting: what a row keeps of the prompt, the answer
// and its thinking under each content setting, while tokens, cost, source
// and timing stay.
func TestTelemetryContentSetting(t *testing.T) {
	t.Parallel()
	const secret = "sk-telemetry-secret-0123456789"
	for _, tc := range []struct {
		content                      core.TelemetryContent
		messages, response, thinking func(string) bool
	}{
		{"", has(secret), has(secret), has(secret)},
		{core.TelemetryContentFull, has(secret), has(secret), has(secret)},
		{core.TelemetryContentRedacted, redacted(secret, "my key is"), redacted(secret, "echo"), redacted(secret, "thinking about")},
		{core.TelemetryContentNone, empty, empty, empty},
	} {
		t.Run(string(tc.content), func(t *testing.T) {
			t.Parallel()
			sink := &recordingSink{}
			resp := answer()
			resp.Content, resp.Thinking = "echo "+secret, "thinking about "+secret
			mw := Telemetry(TelemetryConfig{Sink: sink, Scope: testScope, Content: tc.content, Secrets: []string{secret, "none"}})
			h := core.Chain((&stubHandler{resp: resp}).handle, mw)
			call := callWithID("c-content", core.User("my key is "+secret))
			if _, err := h(context.Background(), call); err != nil {
				t.Fatal(err)
			}
			recs := sink.records()
			if len(recs) != 1 {
				t.Fatalf("%d rows", len(recs))
			}
			r := recs[0]
			if !tc.messages(r.Messages) || !tc.response(r.Response) || !tc.thinking(r.Thinking) {
				t.Errorf("messages %q, response %q, thinking %q", r.Messages, r.Response, r.Thinking)
			}
			if r.PromptTokens != 100 || r.CompletionTokens != 20 || r.Cost == nil || *r.Cost != 0.25 ||
				r.SourceName != "prov_1" || r.Model != "m1" || r.TTFTMS == nil || r.CallID != "c-content" {
				t.Errorf("kept fields lost: %+v", r)
			}
			if call.Messages[0].Content != "my key is "+secret {
				t.Errorf("the call's own messages were changed")
			}
		})
	}
}

func has(s string) func(string) bool { return func(v string) bool { return strings.Contains(v, s) } }

func redacted(secret, rest string) func(string) bool {
	return func(v string) bool {
		return !strings.Contains(v, secret) && strings.Contains(v, redact.Mark) && strings.Contains(v, rest)
	}
}

func empty(v string) bool { return v == "" }
