package ocr_test

import (
	"testing"

	"github.com/polygateway/polygateway"
	"github.com/polygateway/polygateway/backend/memory"
	"github.com/polygateway/polygateway/core"
	"github.com/polygateway/polygateway/internal/testkit"
	"github.com/polygateway/polygateway/ocr"
)

// TestOCRCallsTakeTheirPlaceInTheAdmissionQueue: WithPriority and
// WithTenant given to RecognizeText and ParseLayout reach the admission.
func TestOCRCallsTakeTheirPlaceInTheAdmissionQueue(t *testing.T) {
	t.Parallel()
	fake := newFake(t)
	adm := &testkit.PlaceAdmitter{Admitter: core.ComposeAdmitter(memory.NewLimiter(), memory.NewBreaker())}
	c := newClient(t, ocr.Config{}, nil, urls(fake), polygateway.WithAdmitter(adm))
	if _, err := c.RecognizeText(t.Context(), pngBytes, polygateway.WithPriority(polygateway.PriorityBatch), polygateway.WithTenant("scans")); err != nil {
		t.Fatalf("RecognizeText: %v", err)
	}
	if _, err := c.ParseLayout(t.Context(), pdfBytes, polygateway.WithPriority(polygateway.PriorityInteractive)); err != nil {
		t.Fatalf("ParseLayout: %v", err)
	}
	want := []polygateway.Place{{Priority: polygateway.PriorityBatch, Tenant: "scans"}, {Priority: polygateway.PriorityInteractive}}
	places := adm.Places()
	if len(places) != 2 || places[0] != want[0] || places[1] != want[1] {
		t.Errorf("admitted with places %v, want %v", places, want)
	}
}
