package redisstore_test

import (
	"context"
	"errors"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// errNotQueued is a refusal the queue does not wait out (a budget).
var errNotQueued = errors.New("refused and not queued")

// queueAcquire admits req through q as the engine would: it asks, waits
// when queued, and asks again when woken — on the claim's source after a
// claim, as a new call after its place lapsed. sources gives the request
// of each source a claim may name.
func queueAcquire(ctx context.Context, q *redisstore.Queue, req core.PermitRequest, place core.Place) (core.Grant, *redisstore.QueueWaiter, error) {
	var w *redisstore.QueueWaiter
	var first *redisstore.QueueWaiter
	for {
		g, nw, err := q.Admit(ctx, req, place, w)
		if err != nil {
			return g, first, err
		}
		if g.OK {
			return g, first, nil
		}
		if nw == nil {
			return g, first, errNotQueued
		}
		w = nw
		if first == nil {
			first = w
		}
		ev, err := w.Wait(ctx)
		if err != nil {
			return core.Grant{}, first, err
		}
		switch ev.Kind {
		case core.WaitClaimed:
			req.Source = ev.Source
		case core.WaitLapsed:
			w = nil
		}
	}
}
