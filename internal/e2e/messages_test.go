package e2e

import (
	"context"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
	"github.com/polygateway/polygateway/telemetry"
)

// TestTheCallHandsTheCallersMessagesDownWithoutACopy: the messages a
// middleware sees are the caller's own (the same memory, not a copy into
// another type), and the telemetry row renders them before Chat returns —
// a caller that reuses its messages afterwards changes no row.
func TestTheCallHandsTheCallersMessagesDownWithoutACopy(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(2)))
	sink := telemetry.NewMemory()
	msgs := []polygateway.Message{polygateway.System("be brief"), polygateway.User("the first question")}
	var seen *polygateway.Message
	spy := func(next polygateway.Handler) polygateway.Handler {
		return func(ctx context.Context, call *polygateway.Call) (*polygateway.LLMResponse, error) {
			seen = &call.Messages[1]
			return next(ctx, call)
		}
	}
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t, polygateway.WithTelemetry(sink), polygateway.WithMiddleware(spy))
	if _, err := c.Chat(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
	if seen != &msgs[1] {
		t.Errorf("the middleware saw a copy of the messages, not the caller's")
	}
	// The caller reuses its slice for the next conversation.
	msgs[1] = polygateway.User("something else entirely")
	recs := sink.Records()
	if len(recs) != 1 || recs[0].RawMessages != nil {
		t.Fatalf("rows %+v, want one, rendered", recs)
	}
	if want := `[{"role":"system","content":"be brief"},{"role":"user","content":"the first question"}]`; recs[0].Messages != want {
		t.Errorf("row messages %s, want %s", recs[0].Messages, want)
	}
}
