package testenv_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestAClientOfTheBaseEnvAsksItsSource(t *testing.T) {
	srv := fu.NewServer(t, fu.WithBehavior(fu.OK().WithTokens(3)))
	e := testenv.Base().Source("openai", 2, srv.URL(), "PRIORITY", "1").Set("LLM__RETRY__MAX_ATTEMPTS", "1")
	for k, want := range map[string]string{
		"LLM__OPENAI__2__API_KEY": "sk-test-openai", "LLM__OPENAI__2__MODEL": "openai-model",
		"LLM__OPENAI__2__TIMEOUT_S": "5", "LLM__OPENAI__2__PRIORITY": "1", "LLM__RETRY__MAX_ATTEMPTS": "1",
		"PGW_CACHE_BACKEND": "none",
	} {
		if e[k] != want {
			t.Errorf("%s = %q, want %q", k, e[k], want)
		}
	}
	resp, err := testenv.Ask(t, e.Client(t))
	if err != nil || resp.Content != fu.Tokens(3) || resp.SourceName != "openai_2" {
		t.Fatalf("Ask = (%+v, %v), want the answer of openai_2", resp, err)
	}
	if got := srv.Requests(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
}
