package e2e

import (
	"log/slog"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestALoggedFailoverAndBreakerOpenCarryTheCallID(t *testing.T) {
	t.Parallel()
	primary := fu.NewServer(t, fu.WithBehavior(fu.BadKey())) // dead: opens at once, fails over at once
	fallback := fu.NewServer(t)
	logs := &testkit.Logs{}
	c := testenv.Base().Source("openai", 1, primary.URL()).Source("qwen", 1, fallback.URL(), "PRIORITY", "1").
		Client(t, polygateway.WithLogger(slog.New(logs)))
	first, err := testenv.Ask(t, c)
	if err != nil {
		t.Fatal(err)
	}
	fo := logs.Find("polygateway: attempt failed, trying again")
	if len(fo) != 1 || fo[0].Level != slog.LevelInfo || fo[0].Attrs["call_id"] != first.CallID ||
		fo[0].Attrs["source"] != "openai_1" || fo[0].Attrs["scope"] != "LLM" || fo[0].Attrs["attempt"] != "1" || fo[0].Attrs["class"] == "" {
		t.Fatalf("failover records %+v, want one INFO record of call %s naming openai_1, attempt 1 and the class", fo, first.CallID)
	}
	// The failure that opened the circuit says so, with its call's id.
	open := logs.Find("polygateway: breaker open")
	if len(open) != 1 || open[0].Level != slog.LevelWarn || open[0].Attrs["call_id"] != first.CallID ||
		open[0].Attrs["source"] != "openai_1" || open[0].Attrs["from"] != "closed" {
		t.Fatalf("breaker records %+v, want one WARN record of call %s for openai_1 (closed to open)", open, first.CallID)
	}
	// A later call skips the open source without logging it again.
	if _, err := testenv.Ask(t, c); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Find("polygateway: breaker open")); n != 1 {
		t.Errorf("%d breaker-open records after a second call, want the one", n)
	}
	for _, r := range logs.Records() {
		if r.Attrs["call_id"] == "" && r.Level >= slog.LevelInfo {
			t.Errorf("a record about a call without call_id: %+v", r)
		}
	}
}
