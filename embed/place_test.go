package embed_test

import (
	"context"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
)

// placeAdmitter records the place every admission asks with.
type placeAdmitter struct {
	core.Admitter
	mu     sync.Mutex
	places []polygateway.Place
}

func (a *placeAdmitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	a.mu.Lock()
	a.places = append(a.places, req.Permit.Place)
	a.mu.Unlock()
	return a.Admitter.Admit(ctx, req)
}

// TestEveryBatchTakesTheCallsPlaceInTheAdmissionQueue: WithPriority and
// WithTenant given to Embed reach the admission of every batch.
func TestEveryBatchTakesTheCallsPlaceInTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	f := newFake(t, 4)
	adm := &placeAdmitter{Admitter: core.ComposeAdmitter(memory.NewLimiter(), memory.NewBreaker())}
	c := newClient(t, env(f.URL(), "2"), polygateway.WithAdmitter(adm))
	if _, err := c.Embed(ctxT(t), texts(5), polygateway.WithPriority(polygateway.PriorityBatch), polygateway.WithTenant("index")); err != nil {
		t.Fatalf("Embed: %v", err)
	}
	want := polygateway.Place{Priority: polygateway.PriorityBatch, Tenant: "index"}
	adm.mu.Lock()
	defer adm.mu.Unlock()
	if len(adm.places) != 3 {
		t.Fatalf("%d admissions, want one per batch (3)", len(adm.places))
	}
	for i, p := range adm.places {
		if p != want {
			t.Errorf("batch %d admitted with place %v, want %v", i, p, want)
		}
	}
}
