package redisstore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// errNotQueued is a refusal the queue does not wait out (a budget).
var errNotQueued = errors.New("refused and not queued")

// newQueueAdmitter returns an Admitter on c under prefix, with a Limiter
// and a Breaker of its own (opts apply to both) and cfg for its queue;
// it is closed when the test ends.
func newQueueAdmitter(t testing.TB, c redis.UniversalClient, prefix string, cfg redisstore.QueueConfig, opts ...redisstore.Option) *redisstore.Admitter {
	t.Helper()
	opts = append([]redisstore.Option{redisstore.WithPrefix(prefix)}, opts...)
	a := redisstore.NewAdmitter(redisstore.NewLimiter(c, opts...), redisstore.NewBreaker(c, opts...), redisstore.WithQueue(cfg))
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// queueAdmit admits p through a as the engine would: it asks, waits when
// queued, and asks again when woken — with its waiter, on the claim's
// source after a claim; as a new call after its place lapsed. It returns
// the admitted ticket and the first waiter it was given (nil: it never
// waited).
func queueAdmit(ctx context.Context, a *redisstore.Admitter, p core.PermitRequest, place core.Place) (core.Ticket, core.Waiter, error) {
	return queueAdmitNoting(ctx, a, p, place, nil)
}

// queueAdmitNoting is queueAdmit calling answered (when not nil) once,
// when the first Admit has answered: the call is in line (or admitted)
// from then on.
func queueAdmitNoting(ctx context.Context, a *redisstore.Admitter, p core.PermitRequest, place core.Place, answered func()) (core.Ticket, core.Waiter, error) {
	p.Place = place
	req := core.AdmitRequest{Permit: p, Breaker: core.BreakerConfig{Pool: p.Pool}}
	var first core.Waiter
	for {
		t, err := a.Admit(ctx, req)
		if answered != nil {
			answered()
			answered = nil
		}
		if err != nil {
			return t, first, err
		}
		if t.Admitted() {
			return t, first, nil
		}
		if t.Queued == nil {
			return t, first, errNotQueued
		}
		req.Permit.Waiter = t.Queued
		if first == nil {
			first = t.Queued
		}
		ev, err := t.Queued.Wait(ctx)
		if err != nil {
			return core.Ticket{}, first, err
		}
		switch ev.Kind {
		case core.WaitClaimed:
			req.Permit.Source = ev.Source
		case core.WaitLapsed:
			req.Permit.Waiter = nil
		}
	}
}

// admitOnce asks once, as a new call.
func admitOnce(ctx context.Context, a *redisstore.Admitter, p core.PermitRequest, place core.Place) (core.Ticket, error) {
	p.Place = place
	return a.Admit(ctx, core.AdmitRequest{Permit: p, Breaker: core.BreakerConfig{Pool: p.Pool}})
}

// finish ends an admitted call: its slot is released (handed on) and a
// success recorded.
func finish(ctx context.Context, a *redisstore.Admitter, t core.Ticket) error {
	_, err := a.Finish(ctx, t, core.Settlement{Kind: core.SettleRefund}, core.OutcomeSuccess)
	return err
}
