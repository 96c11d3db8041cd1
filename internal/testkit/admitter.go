package testkit

import (
	"context"
	"sync"

	"github.com/polygateway/polygateway/core"
)

// PlaceAdmitter is a core.Admitter that records the place every admission
// asks with and hands the admission to the Admitter it wraps.
type PlaceAdmitter struct {
	core.Admitter

	mu     sync.Mutex
	places []core.Place
}

var _ core.Admitter = (*PlaceAdmitter)(nil)

// Admit records req's place and admits req through the wrapped Admitter.
func (a *PlaceAdmitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	a.mu.Lock()
	a.places = append(a.places, req.Permit.Place)
	a.mu.Unlock()
	return a.Admitter.Admit(ctx, req)
}

// Places returns the places recorded so far, in the order the admissions
// asked.
func (a *PlaceAdmitter) Places() []core.Place {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]core.Place(nil), a.places...)
}
