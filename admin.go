package polygateway

import (
	"context"

	"github.com/polygateway/polygateway/internal/kernel"
)

// kernelRef names the kernel's reference under an unexported field name.
type kernelRef = kernel.Ref

// Admin is the operators' controls of a client's sources: their state,
// breaker resets, switching them off and on, and the spend budget. The
// chat (GatewayClient), embeddings (package embed) and OCR (package ocr)
// clients embed it. Its methods are safe for concurrent use; the zero
// Admin belongs to no client, and its calls, like those after Close, fail
// with ErrClientClosed (Sources still reports a closed client's sources).
type Admin struct{ kernelRef }

// client returns the assembled client, nil for the zero Admin.
func (a Admin) client() *kernel.Client { return kernel.Of(a.kernelRef) }

// open returns the assembled client for a call under ctx: ErrClientClosed
// for the zero Admin and after Close, the nil_context RequestRejectedError
// for a nil ctx.
func (a Admin) open(ctx context.Context) (*kernel.Client, error) {
	k := a.client()
	if k == nil || k.Closed() {
		return nil, ErrClientClosed
	}
	return k, kernel.CheckContext(ctx)
}

// Sources reports every source's breaker state, in-flight count, health and
// limits. It never includes API keys. It is nil for the zero Admin and for
// a nil ctx.
func (a Admin) Sources(ctx context.Context) []SourceStatus {
	k := a.client()
	if k == nil || ctx == nil {
		return nil
	}
	return k.Sources(ctx)
}

// ResetSource closes the breaker of the named source at once and clears its
// local health history: the operators' emergency key after fixing a source.
func (a Admin) ResetSource(ctx context.Context, source string) error {
	k, err := a.open(ctx)
	switch {
	case err != nil:
		return err
	case source == "":
		return &UnknownSourceError{Scope: k.Settings().Scope}
	}
	return k.Reset(ctx, source)
}

// ResetAllSources closes the breaker of every source of the scope and
// clears their local health history. It tries every source and returns the
// first failure. A switched-off source stays off.
func (a Admin) ResetAllSources(ctx context.Context) error {
	k, err := a.open(ctx)
	if err != nil {
		return err
	}
	return k.Reset(ctx, "")
}

// DisableSource switches the named source off at runtime: no request goes
// to it until EnableSource, from this client and, with a shared breaker
// backend (Redis), from every process using it (they see it within a
// second). Its circuit's state and history are kept. A call whose sources
// are all off fails with a GatewayUnavailableError of reason disabled.
func (a Admin) DisableSource(ctx context.Context, source string) error {
	k, err := a.open(ctx)
	if err != nil {
		return err
	}
	return k.SetEnabled(ctx, source, false)
}

// EnableSource switches a source DisableSource switched off on again.
func (a Admin) EnableSource(ctx context.Context, source string) error {
	k, err := a.open(ctx)
	if err != nil {
		return err
	}
	return k.SetEnabled(ctx, source, true)
}

// Budgets reports the current window of the scope's spend budget
// ({SCOPE}__BUDGET__USD): its limit, what is spent (settled costs plus the
// reservations of calls in flight, across every process on a shared
// backend) and when the window ends. Nil without a budget.
func (a Admin) Budgets(ctx context.Context) ([]BudgetUsage, error) {
	k, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	return k.Budgets(ctx)
}

// Close releases connections and the backends the client created (not
// those given through options); queued telemetry is flushed. It is
// idempotent; calls after Close fail with ErrClientClosed.
func (a Admin) Close() error {
	if k := a.client(); k != nil {
		return k.Close()
	}
	return nil
}

// Closed reports whether Close was called.
func (a Admin) Closed() bool {
	k := a.client()
	return k == nil || k.Closed()
}
