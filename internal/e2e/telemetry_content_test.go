package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

// TestTelemetryContentKey: PGW_TELEMETRY_CONTENT decides what a client's
// telemetry rows keep of the prompt and the answer; an unknown value is an
// error naming the key.
func TestTelemetryContentKey(t *testing.T) {
	t.Parallel()
	up := fu.NewServer(t, fu.WithBehavior(fu.OK().WithContent("the answer sk-openai-test-key")))
	for content, wantKept := range map[string]bool{"full": true, "redacted": true, "none": false} {
		sink := telemetry.NewMemory()
		e := testenv.Base().Source("openai", 1, up.URL()).Set("PGW_TELEMETRY_CONTENT", content, "LLM__OPENAI__1__API_KEY", "sk-openai-test-key")
		c := e.Client(t, polygateway.WithTelemetry(sink))
		if c.Settings().TelemetryContent != core.TelemetryContent(content) {
			t.Errorf("%s: settings say %q", content, c.Settings().TelemetryContent)
		}
		if _, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("question")}); err != nil {
			t.Fatal(err)
		}
		rows := sink.Records()
		if len(rows) != 1 {
			t.Fatalf("%s: %d rows", content, len(rows))
		}
		r := rows[0]
		if kept := strings.Contains(r.Messages, "question") && strings.Contains(r.Response, "the answer"); kept != wantKept {
			t.Errorf("%s: messages %q response %q", content, r.Messages, r.Response)
		}
		if leaked := strings.Contains(r.Response, "sk-openai-test-key"); leaked != (content == "full") {
			t.Errorf("%s: the key in the answer kept = %v", content, leaked)
		}
		if r.CompletionTokens == 0 || r.SourceName != "openai_1" {
			t.Errorf("%s: usage or source lost: %+v", content, r)
		}
	}
	_, err := polygateway.LoadSettings("LLM", testenv.Base().Source("openai", 1, up.URL()).Set("PGW_TELEMETRY_CONTENT", "some"))
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "PGW_TELEMETRY_CONTENT" {
		t.Errorf("an unknown content setting: %v", err)
	}
}
