package core

import (
	"context"
	"errors"
	"testing"
)

// queueLimiter answers TryAcquire with a set grant or error.
type queueLimiter struct {
	grant Grant
	err   error
	seen  PermitRequest
}

func (l *queueLimiter) TryAcquire(_ context.Context, req PermitRequest) (Grant, error) {
	l.seen = req
	return l.grant, l.err
}
func (*queueLimiter) Release(context.Context, Permit, Settlement) error { return nil }
func (*queueLimiter) Usage(context.Context, string, string) (LimiterUsage, error) {
	return LimiterUsage{}, nil
}

// probeBreaker admits with the probe, or refuses; it counts the probes
// given back.
type probeBreaker struct {
	refuse   bool
	returned int
}

func (b *probeBreaker) Allow(context.Context, string, string, BreakerConfig) (Admission, error) {
	if b.refuse {
		return Admission{State: StateOpen}, nil
	}
	return Admission{Allowed: true, Probe: true, State: StateHalfOpen}, nil
}

func (b *probeBreaker) Record(_ context.Context, _, _ string, adm Admission, o Outcome, _ BreakerConfig) (bool, error) {
	if adm.Probe && o == OutcomeAbandoned {
		b.returned++
	}
	return true, nil
}

func (*probeBreaker) Snapshot(context.Context, string, string, BreakerConfig) (BreakerSnapshot, error) {
	return BreakerSnapshot{}, nil
}
func (*probeBreaker) Reset(context.Context, string, string, BreakerConfig) error { return nil }

// countingWaiter counts Leave.
type countingWaiter struct{ left int }

func (*countingWaiter) Wait(context.Context) (WaitEvent, error) { return WaitEvent{}, nil }
func (w *countingWaiter) Leave(context.Context)                 { w.left++ }

func TestComposedAdmitterQueuedTicketGivesProbeBack(t *testing.T) {
	t.Parallel()
	w := &countingWaiter{}
	l := &queueLimiter{grant: Grant{Gate: GateSourceConcurrency, Queued: w}}
	b := &probeBreaker{}
	place := Place{Priority: PriorityBatch, Tenant: "etl"}
	tk, err := ComposeAdmitter(l, b).Admit(t.Context(), AdmitRequest{Permit: PermitRequest{Scope: "s", Source: "a", Place: place}})
	if err != nil || tk.Admitted() || tk.Queued != w {
		t.Fatalf("Admit = %+v, %v; want a refused ticket queued on the limiter's waiter", tk, err)
	}
	if b.returned != 1 || l.seen.Place != place {
		t.Fatalf("probes given back %d, place seen %+v; want 1 and %+v", b.returned, l.seen.Place, place)
	}
}

func TestComposedAdmitterReturnsQueueDeadlineAsIs(t *testing.T) {
	t.Parallel()
	late := &QueueDeadlineError{Ahead: 3}
	b := &probeBreaker{}
	_, err := ComposeAdmitter(&queueLimiter{err: late}, b).Admit(t.Context(), AdmitRequest{})
	var gbe *GovernanceBackendError
	if err != late || errors.As(err, &gbe) || b.returned != 1 { //nolint:errorlint // the QueueDeadlineError itself must come back, not wrapped
		t.Fatalf("Admit = %v (probes given back %d); want the QueueDeadlineError itself and the probe back", err, b.returned)
	}
	_, err = ComposeAdmitter(&queueLimiter{err: errors.New("down")}, b).Admit(t.Context(), AdmitRequest{})
	if !errors.As(err, &gbe) {
		t.Fatalf("Admit with a failing limiter = %v, want a GovernanceBackendError", err)
	}
}

func TestComposedAdmitterBreakerRefusalLetsWaiterGo(t *testing.T) {
	t.Parallel()
	w := &countingWaiter{}
	l := &queueLimiter{grant: Grant{OK: true}}
	tk, err := ComposeAdmitter(l, &probeBreaker{refuse: true}).Admit(t.Context(), AdmitRequest{Permit: PermitRequest{Waiter: w}})
	if err != nil || tk.Admission.Allowed || tk.Queued != nil || w.left != 1 {
		t.Fatalf("Admit = %+v, %v, waiter left %d times; want refused, not queued, the waiter gone once", tk, err, w.left)
	}
}
