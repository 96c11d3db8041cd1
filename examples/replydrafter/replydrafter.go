// Package replydrafter is the code under test of docs/howto-testing.md: a
// small piece of an application that drafts support replies through a
// polygateway client. Its tests (replydrafter_test.go) run it against the
// fake OpenAI-compatible server of package polygatewaytest: a failover, a
// 429 and a cut stream, without a network or a key.
package replydrafter

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/polygateway/polygateway"
)

// Drafter drafts replies to customer messages. It is safe for concurrent
// use, like the client it wraps.
type Drafter struct {
	client *polygateway.GatewayClient
}

// New returns a Drafter that calls models through client.
func New(client *polygateway.GatewayClient) *Drafter { return &Drafter{client: client} }

// RetryLaterError says that no model can answer now: the caller should
// put the work back in its queue and try again after After.
type RetryLaterError struct {
	// After is how long to wait before trying again.
	After time.Duration
	// Err is the gateway's error.
	Err error
}

// Error says when to retry and why.
func (e *RetryLaterError) Error() string {
	return "replydrafter: retry in " + e.After.Round(time.Second).String() + ": " + e.Err.Error()
}

// Unwrap returns the gateway's error.
func (e *RetryLaterError) Unwrap() error { return e.Err }

// Draft returns a reply to message. When the scope has no usable source
// it returns a *RetryLaterError; any other failure (a rejected request, a
// cancelled context) is returned as it is.
func (d *Drafter) Draft(ctx context.Context, message string) (string, error) {
	resp, err := d.client.Chat(ctx, []polygateway.Message{
		polygateway.System("You are a support agent. Answer in two sentences."),
		polygateway.User(message),
	})
	var unavailable *polygateway.GatewayUnavailableError
	if errors.As(err, &unavailable) {
		return "", &RetryLaterError{After: unavailable.RetryAfter, Err: err}
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(resp.Content), nil
}
