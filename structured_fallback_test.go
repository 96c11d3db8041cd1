package polygateway_test

import (
	"context"
	"errors"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/polygatewaytest"
)

type fallbackRecord struct {
	Name string `json:"name"`
	N    int    `json:"n"`
}

// cannedFallback answers every call with content.
func cannedFallback(content string) polygateway.FallbackFunc {
	return func(context.Context, []polygateway.Message, error) (*polygateway.LLMResponse, error) {
		return &polygateway.LLMResponse{Content: content, FinishReason: "stop"}, nil
	}
}

// downClient is a client of a scope whose only source is down, with fallback
// as the scope's last resort.
func downClient(t *testing.T, fallback polygateway.FallbackFunc) *polygateway.GatewayClient {
	t.Helper()
	fake := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.ServerError(503)))
	env := fake.Env("LLM")
	env["LLM__RETRY__MAX_ATTEMPTS"] = "1"
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env), polygateway.WithFallback(fallback))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

// A fallback's answer stands in for a structured call only when it passes
// the call's checks, like any answer: a canned text is no JSON, and the
// call fails with the error that made it fall back, instead of succeeding
// with a zero value (ChatInto) or without StructuredData (WithJSON).
func TestAStructuredCallNeverSucceedsWithAFallbackAnswerThatFailsItsChecks(t *testing.T) {
	t.Parallel()
	msgs := []polygateway.Message{polygateway.User("the record")}
	client := downClient(t, cannedFallback("The service is busy, please try again later."))

	v, resp, err := polygateway.ChatInto[fallbackRecord](context.Background(), client, msgs)
	var transient *polygateway.TransientError
	if !errors.As(err, &transient) || transient.StatusCode != 503 {
		t.Errorf("ChatInto = (%+v, %+v, %v), want the 503 that made it fall back", v, resp, err)
	}
	resp, err = client.Chat(context.Background(), msgs, polygateway.WithJSON())
	if !errors.As(err, &transient) || resp != nil {
		t.Errorf("Chat with WithJSON = (%+v, %v), want the 503 that made it fall back", resp, err)
	}
	// The plain call still takes the canned answer.
	if resp, err := client.Chat(context.Background(), msgs); err != nil || resp.DegradedBy != core.DegradedFallback {
		t.Errorf("plain Chat = (%+v, %v), want the fallback's answer", resp, err)
	}
}

// A fallback that answers in the shape asked for stands in, decoded.
func TestAStructuredCallTakesAFallbackAnswerThatPassesItsChecks(t *testing.T) {
	t.Parallel()
	msgs := []polygateway.Message{polygateway.User("the record")}
	client := downClient(t, cannedFallback("The service is busy."))

	v, resp, err := polygateway.ChatInto[fallbackRecord](context.Background(), client, msgs,
		polygateway.WithCallFallback(cannedFallback(`{"name": "unknown", "n": 0}`)))
	if err != nil || v != (fallbackRecord{Name: "unknown"}) || resp.DegradedBy != core.DegradedFallback {
		t.Fatalf("ChatInto = (%+v, %+v, %v), want the call's fallback decoded", v, resp, err)
	}
	if got, ok := resp.StructuredData.(fallbackRecord); !ok || got != v {
		t.Errorf("StructuredData = %#v, want the decoded value", resp.StructuredData)
	}
}
