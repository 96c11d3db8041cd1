package ocr_test

import (
	"context"
	"sync"
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/ocr"
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

// TestOCRCallsTakeTheirPlaceInTheAdmissionQueue: WithPriority and
// WithTenant given to RecognizeText and ParseLayout reach the admission.
func TestOCRCallsTakeTheirPlaceInTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	adm := &placeAdmitter{Admitter: core.ComposeAdmitter(memory.NewLimiter(), memory.NewBreaker())}
	c := newClient(t, ocr.Config{}, nil, urls(fake), polygateway.WithAdmitter(adm))
	if _, err := c.RecognizeText(t.Context(), pngBytes, polygateway.WithPriority(polygateway.PriorityBatch), polygateway.WithTenant("scans")); err != nil {
		t.Fatalf("RecognizeText: %v", err)
	}
	if _, err := c.ParseLayout(t.Context(), pdfBytes, polygateway.WithPriority(polygateway.PriorityInteractive)); err != nil {
		t.Fatalf("ParseLayout: %v", err)
	}
	want := []polygateway.Place{{Priority: polygateway.PriorityBatch, Tenant: "scans"}, {Priority: polygateway.PriorityInteractive}}
	adm.mu.Lock()
	defer adm.mu.Unlock()
	if len(adm.places) != 2 || adm.places[0] != want[0] || adm.places[1] != want[1] {
		t.Errorf("admitted with places %v, want %v", adm.places, want)
	}
}
