package core

import (
	"context"
	"errors"
	"testing"
	"time"
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
func (*queueLimiter) Budgets(context.Context, string, string, []Budget) ([]BudgetUsage, error) {
	return nil, nil
}

// probeBreaker admits with the probe, or refuses; it counts the probes
// given back and keeps the last pushback (failing it with pushErr).
type probeBreaker struct {
	refuse   bool
	returned int
	pushed   time.Duration
	pushErr  error
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
func (*probeBreaker) SetEnabled(context.Context, string, string, BreakerConfig, bool) error {
	return nil
}
func (b *probeBreaker) PushBack(_ context.Context, _, _ string, _ BreakerConfig, d time.Duration) error {
	b.pushed = d
	return b.pushErr
}

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

func TestComposedAdmitterPushBackGoesToTheBreaker(t *testing.T) {
	t.Parallel()
	b := &probeBreaker{}
	a := ComposeAdmitter(&queueLimiter{}, b)
	if err := a.PushBack(t.Context(), "s", "a", BreakerConfig{}, 0); err != nil || b.pushed != 0 {
		t.Fatalf("PushBack(0) = %v, breaker got %v; want nothing recorded", err, b.pushed)
	}
	if err := a.PushBack(t.Context(), "s", "a", BreakerConfig{}, 2*time.Second); err != nil || b.pushed != 2*time.Second {
		t.Fatalf("PushBack(2s) = %v, breaker got %v; want 2s", err, b.pushed)
	}
	b.pushErr = errors.New("down")
	var ge *GovernanceBackendError
	if err := a.PushBack(t.Context(), "s", "a", BreakerConfig{}, time.Second); !errors.As(err, &ge) || ge.Op != "pushback" || !errors.Is(err, b.pushErr) {
		t.Fatalf("PushBack on a failing breaker = %v; want a GovernanceBackendError of op pushback wrapping it", err)
	}
}
