package e2e

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit/testenv"
	fu "github.com/polygateway/polygateway/polygatewaytest"
)

// lastSelector always chooses the last candidate, and remembers what it
// was shown.
type lastSelector struct {
	mu    sync.Mutex
	shown [][]string
}

func (s *lastSelector) Select(_ context.Context, cands []core.Candidate) (int, error) {
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.Name
	}
	s.mu.Lock()
	s.shown = append(s.shown, names)
	s.mu.Unlock()
	return len(cands) - 1, nil
}

func TestAUserSelectorGivenByOptionChoosesTheSource(t *testing.T) {
	t.Parallel()
	a, b, c := fu.NewServer(t), fu.NewServer(t), fu.NewServer(t)
	sel := &lastSelector{}
	client := testenv.Base().Source("openai", 1, a.URL()).Source("openai", 2, b.URL()).Source("openai", 3, c.URL(), "PRIORITY", "1").
		Client(t, polygateway.WithSelector(sel))
	for range 5 {
		resp, err := client.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")})
		if err != nil || resp.SourceName != "openai_2" {
			t.Fatalf("= (%v, %v), want openai_2 (the selector's choice)", resp, err)
		}
	}
	if a.Requests() != 0 || c.Requests() != 0 || b.Requests() != 5 {
		t.Errorf("requests a=%d b=%d c=%d, want only b", a.Requests(), b.Requests(), c.Requests())
	}
	// The tier is the engine's business: the selector sees tier 0 only.
	for _, names := range sel.shown {
		if len(names) != 2 || names[0] != "openai_1" || names[1] != "openai_2" {
			t.Fatalf("selector shown %v, want the two tier-0 sources", names)
		}
	}
}

// badSelector chooses a candidate that does not exist, or fails.
type badSelector struct{ err error }

func (s badSelector) Select(_ context.Context, cands []core.Candidate) (int, error) {
	return len(cands) + 3, s.err
}

func TestASelectorChoosingAnIneligibleSourceEndsTheCallWithAnError(t *testing.T) {
	t.Parallel()
	for _, sel := range []badSelector{{}, {err: errors.New("no opinion")}} {
		a, b := fu.NewServer(t), fu.NewServer(t)
		client := testenv.Base().Source("openai", 1, a.URL()).Source("openai", 2, b.URL()).Client(t, polygateway.WithSelector(sel))
		_, err := client.Chat(context.Background(), []polygateway.Message{polygateway.User("hi")})
		var se *polygateway.SelectorError
		if !errors.As(err, &se) || !errors.Is(err, polygateway.ErrGateway) {
			t.Fatalf("err = %v (%T), want a *SelectorError", err, err)
		}
		if sel.err != nil && !errors.Is(err, sel.err) {
			t.Errorf("err = %v, want it to wrap the selector's error", err)
		}
		if a.Requests()+b.Requests() != 0 {
			t.Errorf("%d requests went upstream after a bad choice", a.Requests()+b.Requests())
		}
	}
}
