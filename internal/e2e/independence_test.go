package e2e

import (
	"context"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestTwoScopesInOneProcessAreIndependent(t *testing.T) {
	t.Parallel()
	bad := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	good := fu.NewServer(t)
	e := testenv.Base().Set(
		"SEARCH__OPENAI__1__BASE_URL", bad.URL(), "SEARCH__OPENAI__1__API_KEY", "k", "SEARCH__OPENAI__1__MODEL", "m", "SEARCH__OPENAI__1__TIMEOUT_S", "5",
		"JUDGE__OPENAI__1__BASE_URL", good.URL(), "JUDGE__OPENAI__1__API_KEY", "k", "JUDGE__OPENAI__1__MODEL", "m", "JUDGE__OPENAI__1__TIMEOUT_S", "5",
	)
	search, err := polygateway.FromEnv("SEARCH", polygateway.WithEnv(e))
	if err != nil {
		t.Fatal(err)
	}
	defer search.Close()
	judge, err := polygateway.FromEnv("JUDGE", polygateway.WithEnv(e))
	if err != nil {
		t.Fatal(err)
	}
	defer judge.Close()

	ctx := context.Background()
	if _, err := search.Chat(ctx, []polygateway.Message{polygateway.User("x")}); err == nil {
		t.Fatal("SEARCH call with a bad key succeeded")
	}
	if st := search.Sources(ctx)[0].Breaker.State; st != core.StateOpen {
		t.Fatalf("SEARCH openai_1 breaker = %s, want open", st)
	}
	if _, err := judge.Chat(ctx, []polygateway.Message{polygateway.User("x")}); err != nil {
		t.Fatalf("JUDGE call failed: %v", err)
	}
	if st := judge.Sources(ctx)[0].Breaker.State; st != core.StateClosed {
		t.Fatalf("JUDGE openai_1 breaker = %s, want closed (independent of SEARCH)", st)
	}
}

func TestClientsGivenTheSameBreakerShareItsState(t *testing.T) {
	t.Parallel()
	bad := fu.NewServer(t, fu.WithBehavior(fu.BadKey()))
	e := testenv.Base().Source("openai", 1, bad.URL())
	br := memory.NewBreaker()
	a := e.Client(t, polygateway.WithBreaker(br))
	b := e.Client(t, polygateway.WithBreaker(br))
	if _, err := testenv.Ask(t, a); err == nil {
		t.Fatal("call with a bad key succeeded")
	}
	if st := b.Sources(context.Background())[0].Breaker.State; st != core.StateOpen {
		t.Fatalf("client b sees %s, want open (shared breaker)", st)
	}
	if _, err := testenv.Ask(t, b); err == nil {
		t.Fatal("client b reached the dead source")
	}
	if n := bad.Requests(); n != 1 {
		t.Fatalf("dead source got %d requests, want 1", n)
	}
}
