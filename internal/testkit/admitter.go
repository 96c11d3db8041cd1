package testkit

import (
	"context"
	"sync"
	"time"

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

// SlowAdmitter is a core.Admitter whose every Admit takes RTT (on the
// clock of the time package, so a synctest bubble's), as a backend across
// the network (Redis) does: callers racing for a source are all inside
// Admit at once. A cancelled context ends the wait.
type SlowAdmitter struct {
	core.Admitter
	RTT time.Duration
}

var _ core.Admitter = SlowAdmitter{}

// Admit waits RTT, then admits through the embedded Admitter.
func (a SlowAdmitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	t := time.NewTimer(a.RTT)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return core.Ticket{}, ctx.Err()
	case <-t.C:
	}
	return a.Admitter.Admit(ctx, req)
}
