package e2e

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// Errors reach the caller as the public types, the chain included, and
// still answer errors.Is with the sentinels.
func TestErrorsReachTheCallerAsThePublicTypes(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t, fu.WithBehavior(fu.ServerError(503)))
	c := testenv.Base().Source("openai", 1, srv.URL()).Set("LLM__RETRY__MAX_ATTEMPTS", "2").Client(t)
	_, err := testenv.Ask(t, c)
	if _, ok := err.(*polygateway.GatewayUnavailableError); !ok { //nolint:errorlint // the public type itself must reach the caller, not wrapped
		t.Fatalf("err is a %T, want *polygateway.GatewayUnavailableError", err)
	}
	var ue *polygateway.GatewayUnavailableError
	var te *polygateway.TransientError
	if !errors.As(err, &ue) || !errors.As(err, &te) || te.Reason != core.ReasonServerError || te.StatusCode != 503 {
		t.Fatalf("err = %v: want the unavailable scope wrapping the last 503", err)
	}
	if !errors.Is(err, polygateway.ErrAllSourcesExhausted) || !errors.Is(err, polygateway.ErrGateway) || errors.Is(err, polygateway.ErrCircuitOpen) {
		t.Errorf("sentinels wrong for %v", err)
	}
	if polygateway.Classify(err).Class != core.ClassUnavailable || polygateway.Classify(err).Source != "openai_1" {
		t.Errorf("Classify(err) = %+v", polygateway.Classify(err))
	}
}

// A redirect is never followed: the caller's error matches ErrRedirect
// (the root's and core's, one sentinel) and carries the 3xx status.
func TestARedirectReachesTheCallerAsErrRedirect(t *testing.T) {
	t.Parallel()
	var foreign atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { foreign.Add(1) }))
	t.Cleanup(other.Close)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(srv.Close)
	e := testenv.Base().Set("LLM__RETRY__MAX_ATTEMPTS", "1", "LLM__OPENAI__1__BASE_URL", srv.URL,
		"LLM__OPENAI__1__API_KEY", "sk-test-openai", "LLM__OPENAI__1__MODEL", "openai-model", "LLM__OPENAI__1__TIMEOUT_S", "5")
	_, err := testenv.Ask(t, e.Client(t))
	var te *polygateway.TransientError
	if !errors.Is(err, polygateway.ErrRedirect) || !errors.Is(err, core.ErrRedirect) || !errors.As(err, &te) ||
		te.StatusCode != http.StatusTemporaryRedirect || te.Reason != core.ReasonNetworkError {
		t.Fatalf("err = %v: want a network_error TransientError of the 307 matching ErrRedirect", err)
	}
	if n := foreign.Load(); n != 0 {
		t.Errorf("the redirect's target was asked %d times", n)
	}
}

// TestAnUnknownRoleIsRejectedBeforeAnyRequest: a message whose role is not
// a chat role ("usr") is a RequestRejectedError naming it, and the upstream
// is never asked, through Chat and ChatStream alike.
func TestAnUnknownRoleIsRejectedBeforeAnyRequest(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	msgs := []polygateway.Message{polygateway.System("be brief"), {Role: "usr", Content: "hi"}}
	_, err := c.Chat(context.Background(), msgs)
	var rej *polygateway.RequestRejectedError
	if !errors.As(err, &rej) || rej.Param != "messages[1].role" || !strings.Contains(err.Error(), `"usr"`) {
		t.Fatalf("Chat: err = %v, want a RequestRejectedError naming messages[1].role", err)
	}
	s := c.ChatStream(context.Background(), msgs)
	for s.Next() {
	}
	if !errors.As(s.Err(), &rej) {
		t.Fatalf("ChatStream: err = %v, want a RequestRejectedError", s.Err())
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the upstream was asked %d times", n)
	}
	if _, err := c.Chat(context.Background(), []polygateway.Message{{Role: "developer", Content: "x"}, polygateway.User("hi")}); err != nil {
		t.Errorf("developer role: %v", err)
	}
}

// TestANilContextIsRejectedNotAPanic: a call given a nil context — Chat,
// ChatStream, ChatInto, the operators' controls — returns a
// RequestRejectedError (code nil_context) instead of panicking, and the
// upstream is never asked.
func TestANilContextIsRejectedNotAPanic(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	var noCtx context.Context // nil
	msgs := []polygateway.Message{polygateway.User("hi")}
	nilContext := func(what string, err error) {
		t.Helper()
		var rej *polygateway.RequestRejectedError
		if !errors.As(err, &rej) || rej.Code != "nil_context" || !errors.Is(err, polygateway.ErrGateway) {
			t.Errorf("%s: err = %v, want a RequestRejectedError with code nil_context", what, err)
		}
	}
	_, err := c.Chat(noCtx, msgs)
	nilContext("Chat", err)
	s := c.ChatStream(noCtx, msgs)
	if s.Next() {
		t.Error("ChatStream: a delta without a context")
	}
	nilContext("ChatStream", s.Err())
	if err := s.Close(); err != nil {
		t.Errorf("ChatStream.Close: %v", err)
	}
	_, _, err = polygateway.ChatInto[map[string]any](noCtx, c, msgs)
	nilContext("ChatInto", err)
	nilContext("ResetSource", c.ResetSource(noCtx, "openai_1"))
	nilContext("ResetAllSources", c.ResetAllSources(noCtx))
	nilContext("DisableSource", c.DisableSource(noCtx, "openai_1"))
	nilContext("EnableSource", c.EnableSource(noCtx, "openai_1"))
	_, err = c.Budgets(noCtx)
	nilContext("Budgets", err)
	if st := c.Sources(noCtx); st != nil {
		t.Errorf("Sources(nil) = %+v, want nil", st)
	}
	if n := srv.Requests(); n != 0 {
		t.Errorf("the upstream was asked %d times", n)
	}
}

// TestTheOperatorsControlsAfterCloseFailWithErrClientClosed: after Close,
// resetting, switching and reading the budget fail with ErrClientClosed
// (as calls do), while Sources still reports the sources.
func TestTheOperatorsControlsAfterCloseFailWithErrClientClosed(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, srv.URL()).Client(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, budgetErr := c.Budgets(ctx)
	for what, err := range map[string]error{
		"ResetSource": c.ResetSource(ctx, "openai_1"), "ResetAllSources": c.ResetAllSources(ctx),
		"DisableSource": c.DisableSource(ctx, "openai_1"), "EnableSource": c.EnableSource(ctx, "openai_1"),
		"Budgets": budgetErr,
	} {
		if !errors.Is(err, polygateway.ErrClientClosed) {
			t.Errorf("%s after Close = %v, want ErrClientClosed", what, err)
		}
	}
	if st := c.Sources(ctx); len(st) != 1 || st[0].Name != "openai_1" {
		t.Errorf("Sources after Close = %+v, want the source", st)
	}
}
