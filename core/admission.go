package core

import (
	"context"
	"errors"
	"time"
)

// AdmitRequest asks to pass one attempt on one source through the source's
// circuit breaker and the six rate-limit gates.
type AdmitRequest struct {
	// Permit names the source, its gates, the tokens to pre-deduct, the
	// lease of the concurrency slots, and the call's place in the
	// admission queue (Permit.Place, and Permit.Waiter when it was woken).
	Permit PermitRequest
	// Breaker is the source's effective breaker configuration.
	Breaker BreakerConfig
}

// Ticket is the answer to Admit: the breaker's admission and, when the
// breaker admitted, the limiter's grant. A ticket is a value; finish an
// admitted one exactly once.
type Ticket struct {
	// Admission is the breaker's answer.
	Admission Admission
	// Grant is the limiter's answer; zero when the breaker refused.
	Grant Grant
	// Breaker is the configuration the ticket was admitted under; Finish
	// records the outcome with it.
	Breaker BreakerConfig
	// Queued is the call's place in the admission queue when a gate
	// refused and the call queued (wait on it, then admit again with it in
	// Permit.Waiter); nil otherwise. A ticket with Queued set holds
	// nothing else (a probe the breaker granted was given back).
	Queued Waiter
}

// Admitted reports whether the attempt may go upstream: the breaker
// admitted it and every gate granted.
func (t Ticket) Admitted() bool { return t.Admission.Allowed && t.Grant.OK }

// Admitter is the admission port: the one place an attempt passes the
// breaker and the limiter before it goes upstream, and reports back after.
//
// Contract: Admit asks the breaker (Allow) and, only when it admits, the
// limiter (TryAcquire), as one step; when the limiter refuses, a half-open
// probe the breaker granted is given back (no verdict) inside that step, so
// a refused ticket holds nothing and needs no Finish. Finish is called
// exactly once for every admitted ticket: it releases the permit with the
// settlement and records the outcome on the circuit (fenced by the
// admission's epoch: applied=false when the circuit moved on). A backend
// that shares state across processes implements both in one round trip
// each.
//
// The queue (see Limiter): the breaker comes first, so a circuit that
// refuses is not queued, and a woken waiter (Permit.Waiter) whose breaker
// now refuses leaves the queue (a claim it held passes to the next). A
// gate refusal that the queue takes is a refused ticket with Queued set;
// a deadline that cannot be met in the queue is a *QueueDeadlineError,
// returned as it is.
//
// An error means the backend failed: from Admit, nothing is held
// (an implementation whose reply may be lost after the backend acted
// releases what it took by itself); from Finish, the implementation keeps
// trying to release the permit until it lands or the permit's lease ends,
// so a slot never outlives its lease.
//
// Pushback (see Breaker): after a 429 the engine records the source's
// wait with PushBack, and Admit refuses the source while it lasts
// (Admission with PushedBack), exactly as the breaker's Allow does: a
// pushback recorded through the Admitter is seen by the Breaker and the
// other way round. An error from PushBack means the backend failed.
//
// Safe for concurrent use.
type Admitter interface {
	Admit(ctx context.Context, req AdmitRequest) (Ticket, error)
	Finish(ctx context.Context, t Ticket, s Settlement, o Outcome) (applied bool, err error)
	// PushBack records that source is not to be asked before d has passed
	// (Breaker.PushBack); d <= 0 records nothing.
	PushBack(ctx context.Context, scope, source string, cfg BreakerConfig, d time.Duration) error
}

// ComposeAdmitter returns the Admitter made of a separate Limiter and
// Breaker: Admit is Allow then TryAcquire (a probe is given back when the
// limiter refuses or queues the call), Finish is Release then Record (the
// limiter's Release hands a freed unit to its queue's next waiter). It
// makes two backend calls where a native Admitter makes one; use a
// backend's own Admitter when limiter and breaker live in the same store.
func ComposeAdmitter(l Limiter, b Breaker) Admitter { return composed{l: l, b: b} }

type composed struct {
	l Limiter
	b Breaker
}

var _ Admitter = composed{}

// PushBack implements Admitter: it records the pushback on the breaker.
func (c composed) PushBack(ctx context.Context, scope, source string, cfg BreakerConfig, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if err := c.b.PushBack(ctx, scope, source, cfg, d); err != nil {
		return &GovernanceBackendError{Backend: "breaker", Op: "pushback", Err: err}
	}
	return nil
}

// Admit implements Admitter.
func (c composed) Admit(ctx context.Context, req AdmitRequest) (Ticket, error) {
	t := Ticket{Breaker: req.Breaker}
	p := req.Permit
	adm, err := c.b.Allow(ctx, p.Scope, p.Source, req.Breaker)
	if err != nil {
		return Ticket{}, &GovernanceBackendError{Backend: "breaker", Op: "allow", Err: err}
	}
	t.Admission = adm
	if !adm.Allowed {
		if p.Waiter != nil {
			// Its claim passes on, whatever the caller's context.
			p.Waiter.Leave(context.WithoutCancel(ctx))
		}
		return t, nil
	}
	grant, err := c.l.TryAcquire(ctx, p)
	if err != nil || !grant.OK {
		if adm.Probe {
			// Give the probe back with no verdict; the caller's context
			// may be the reason the acquire failed.
			_, rerr := c.b.Record(context.WithoutCancel(ctx), p.Scope, p.Source, adm, OutcomeAbandoned, req.Breaker)
			if err != nil && rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
	}
	if err != nil {
		var late *QueueDeadlineError
		if errors.As(err, &late) {
			return Ticket{}, err
		}
		return Ticket{}, &GovernanceBackendError{Backend: "limiter", Op: "acquire", Err: err}
	}
	t.Grant, t.Queued = grant, grant.Queued
	return t, nil
}

// Finish implements Admitter.
func (c composed) Finish(ctx context.Context, t Ticket, s Settlement, o Outcome) (bool, error) {
	p := t.Grant.Permit
	rerr := c.l.Release(ctx, p, s)
	applied, berr := c.b.Record(ctx, p.Scope, p.Source, t.Admission, o, t.Breaker)
	var err error
	if rerr != nil {
		err = &GovernanceBackendError{Backend: "limiter", Op: "release", Err: rerr}
	}
	if berr != nil {
		err = errors.Join(err, &GovernanceBackendError{Backend: "breaker", Op: "record", Err: berr})
	}
	return applied, err
}
