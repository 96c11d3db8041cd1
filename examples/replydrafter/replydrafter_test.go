package replydrafter_test

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/examples/replydrafter"
	"github.com/polygateway/polygateway/polygatewaytest"
)

// newDrafter builds the code under test on a client configured by env.
func newDrafter(t *testing.T, env map[string]string) *replydrafter.Drafter {
	t.Helper()
	client, err := polygateway.FromEnv("LLM", polygateway.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return replydrafter.New(client)
}

func TestDraftFailsOverWhenThePrimaryModelIsDown(t *testing.T) {
	t.Parallel()
	fake := polygatewaytest.NewServer(t,
		polygatewaytest.WithModel("primary", polygatewaytest.ServerError(503)),
		polygatewaytest.WithModel("fallback", polygatewaytest.OK().WithContent("Sorry for the wait. Your refund is on its way.")))

	env := fake.Env("LLM", polygatewaytest.EnvModel("primary"))
	maps.Copy(env, fake.Env("LLM", polygatewaytest.EnvSource("openai", 2),
		polygatewaytest.EnvModel("fallback"), polygatewaytest.EnvField("PRIORITY", "1")))
	env["LLM__RETRY__TIER_PATIENCE_S"] = "0" // fail over at once
	drafter := newDrafter(t, env)

	reply, err := drafter.Draft(context.Background(), "Where is my refund?")
	if err != nil {
		t.Fatal(err)
	}
	if reply != "Sorry for the wait. Your refund is on its way." {
		t.Errorf("reply %q", reply)
	}
	primary, fallback := fake.AttemptsFor("primary"), fake.AttemptsFor("fallback")
	if len(primary) != 1 || primary[0].Status != 503 || len(fallback) != 1 {
		t.Fatalf("primary saw %d requests, fallback %d; want 1 and 1", len(primary), len(fallback))
	}
	if !bytes.Contains(fallback[0].Body, []byte("Where is my refund?")) {
		t.Errorf("the fallback got %s", fallback[0].Body)
	}
}

func TestARateLimitedPrimaryIsLeftAloneUntilItsRetryAfter(t *testing.T) {
	t.Parallel()
	fake := polygatewaytest.NewServer(t,
		polygatewaytest.WithModel("primary", polygatewaytest.RateLimited("30")), // 429, Retry-After: 30
		polygatewaytest.WithModel("fallback", polygatewaytest.OK().WithContent("Done.")))

	env := fake.Env("LLM", polygatewaytest.EnvModel("primary"))
	maps.Copy(env, fake.Env("LLM", polygatewaytest.EnvSource("openai", 2),
		polygatewaytest.EnvModel("fallback"), polygatewaytest.EnvField("PRIORITY", "1")))
	drafter := newDrafter(t, env)

	for range 3 {
		if reply, err := drafter.Draft(context.Background(), "Cancel my subscription"); err != nil || reply != "Done." {
			t.Fatalf("Draft = (%q, %v)", reply, err)
		}
	}
	if n := len(fake.AttemptsFor("primary")); n != 1 {
		t.Errorf("the primary saw %d requests; after its 429 it must be left alone for 30 s", n)
	}
	if n := len(fake.AttemptsFor("fallback")); n != 3 {
		t.Errorf("the fallback saw %d requests, want 3", n)
	}
}

func TestDraftWaitsOutAShortRetryAfterOnTheOnlySource(t *testing.T) {
	t.Parallel()
	fake := polygatewaytest.NewServer(t, polygatewaytest.WithScript(
		polygatewaytest.RateLimited("1"), // 429, Retry-After: 1
		polygatewaytest.OK().WithContent("Done.")))
	drafter := newDrafter(t, fake.Env("LLM"))

	reply, err := drafter.Draft(context.Background(), "Cancel my subscription")
	if err != nil || reply != "Done." {
		t.Fatalf("Draft = (%q, %v), want the answer after the wait", reply, err)
	}
	arrivals := fake.Arrivals()
	if len(arrivals) != 2 {
		t.Fatalf("the fake saw %d requests, want 2", len(arrivals))
	}
	if gap := arrivals[1].Sub(arrivals[0]); gap < 900*time.Millisecond {
		t.Errorf("the second request came %v after the 429, before its Retry-After of 1 s", gap)
	}
}

func TestDraftAsksToRetryLaterWhenTheOnlyKeyIsRefused(t *testing.T) {
	t.Parallel()
	fake := polygatewaytest.NewServer(t, polygatewaytest.WithBehavior(polygatewaytest.BadKey()))
	drafter := newDrafter(t, fake.Env("LLM"))

	_, err := drafter.Draft(context.Background(), "Hello?")
	var later *replydrafter.RetryLaterError
	if !errors.As(err, &later) || later.After <= 0 {
		t.Fatalf("err = %v, want a *RetryLaterError with a delay", err)
	}
	var dead *polygateway.SourceDeadError
	if !errors.Is(err, polygateway.ErrCircuitOpen) || !errors.As(err, &dead) || dead.StatusCode != 401 {
		t.Errorf("err = %v, want the open circuit and the 401 behind it", err)
	}
}

func TestDraftNeverReturnsACutStream(t *testing.T) {
	t.Parallel()
	const answer = "Your parcel left the warehouse today. It arrives on Monday."
	fake := polygatewaytest.NewServer(t, polygatewaytest.WithScript(
		polygatewaytest.CutAfter(3).WithContent(answer), // the connection drops after three tokens
		polygatewaytest.OK().WithContent(answer)))

	env := fake.Env("LLM")
	env["LLM__RETRY__BACKOFF_BASE_S"] = "0.01"
	env["LLM__RETRY__BACKOFF_MAX_S"] = "0.05"
	drafter := newDrafter(t, env)

	reply, err := drafter.Draft(context.Background(), "Where is my parcel?")
	if err != nil {
		t.Fatal(err)
	}
	if reply != answer {
		t.Errorf("reply %q, want the whole answer, never the cut one", reply)
	}
	attempts := fake.Attempts()
	if len(attempts) != 2 || attempts[0].Kind != polygatewaytest.KindCut || !attempts[0].Stream {
		t.Errorf("attempts %+v, want a cut stream and then a retry", attempts)
	}
}
