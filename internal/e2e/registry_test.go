package e2e

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// countingLimiter is a third party's limiter: the memory one, counting
// its acquires.
type countingLimiter struct {
	core.Limiter
	acquires atomic.Int64
}

func (l *countingLimiter) TryAcquire(ctx context.Context, req core.PermitRequest) (core.Grant, error) {
	l.acquires.Add(1)
	return l.Limiter.TryAcquire(ctx, req)
}

var (
	thirdParty   = &countingLimiter{Limiter: memory.NewLimiter()}
	factoryScope atomic.Value
)

// A package outside the module registers its backend the way a database/sql
// driver does; this external test package stands for it.
func init() {
	backend.RegisterLimiter("thirdparty", func(b backend.Context) (core.Limiter, error) {
		factoryScope.Store(b.Settings().Scope)
		return thirdParty, nil
	})
	backend.RegisterBreaker("broken", func(backend.Context) (core.Breaker, error) {
		return nil, errors.New("cannot reach the breaker store")
	})
}

func TestABackendRegisteredFromOutsideIsSelectedByNameFromTheEnvironment(t *testing.T) {
	srv := fu.NewServer(t)
	c := testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_LIMITER_BACKEND", "thirdparty").Client(t)
	if _, err := c.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")}); err != nil {
		t.Fatal(err)
	}
	if n := thirdParty.acquires.Load(); n < 1 {
		t.Fatalf("the registered limiter saw %d acquires, want the call's", n)
	}
	if got := factoryScope.Load(); got != "LLM" {
		t.Errorf("the factory was given the settings of scope %v, want LLM", got)
	}
}

func TestAnUnknownBackendNameListsTheRegisteredOnes(t *testing.T) {
	t.Parallel()
	env := testenv.Base().Set("LLM__OPENAI__1__BASE_URL", "http://127.0.0.1:1/v1", "LLM__OPENAI__1__API_KEY", "k",
		"LLM__OPENAI__1__MODEL", "m", "LLM__OPENAI__1__TIMEOUT_S", "5", "PGW_LIMITER_BACKEND", "thirdpary")
	_, err := polygateway.LoadSettings("LLM", env)
	var ce *polygateway.ConfigError
	if !errors.As(err, &ce) || ce.Key != "PGW_LIMITER_BACKEND" {
		t.Fatalf("LoadSettings = %v, want a ConfigError naming PGW_LIMITER_BACKEND", err)
	}
	if want := "thirdparty"; !strings.Contains(ce.Error(), want) {
		t.Errorf("error %q does not list the registered backend %q", ce.Error(), want)
	}
}

func TestAFailingRegisteredFactoryIsAnAssemblyError(t *testing.T) {
	t.Parallel()
	srv := fu.NewServer(t)
	_, err := polygateway.FromEnv("LLM", polygateway.WithEnv(testenv.Base().Source("openai", 1, srv.URL()).Set("PGW_BREAKER_BACKEND", "broken")))
	if err == nil || !strings.Contains(err.Error(), "cannot reach the breaker store") {
		t.Fatalf("FromEnv = %v, want the factory's error", err)
	}
}

func TestRegisteringABuiltInNamePanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("registering \"memory\" did not panic")
		}
	}()
	backend.RegisterCache("memory", func(backend.Context) (core.Cache, error) { return nil, nil })
}
