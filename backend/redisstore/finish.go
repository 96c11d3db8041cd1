package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/polygateway/polygateway/internal/core"
)

// Admitter is the native admission port of a Limiter and a Breaker of this
// package on the same client: Admit and Finish each run one script (one
// round trip). Safe for concurrent use.
type Admitter struct {
	l *Limiter
	b *Breaker
}

var _ core.Admitter = (*Admitter)(nil)

// NewAdmitter returns the native Admitter of l and b, or nil when they do
// not share one client (compose them with core.ComposeAdmitter then).
func NewAdmitter(l *Limiter, b *Breaker) *Admitter {
	if l == nil || l.partner(b) == nil {
		return nil
	}
	return &Admitter{l: l, b: b}
}

// Admit implements core.Admitter.
func (a *Admitter) Admit(ctx context.Context, req core.AdmitRequest) (core.Ticket, error) {
	p := req.Permit
	adm, grant, _, err := a.l.Admit(ctx, a.b, p.Scope, p.Source, req.Breaker, p)
	if err != nil {
		return core.Ticket{}, &core.GovernanceBackendError{Backend: "limiter", Op: "admit", Err: err}
	}
	return core.Ticket{Admission: adm, Grant: grant, Breaker: req.Breaker}, nil
}

// Finish implements core.Admitter.
func (a *Admitter) Finish(ctx context.Context, t core.Ticket, s core.Settlement, o core.Outcome) (bool, error) {
	p := t.Grant.Permit
	applied, ok, err := a.l.Finish(ctx, p, s, a.b, p.Scope, p.Source, t.Admission, o, t.Breaker)
	if !ok {
		return core.ComposeAdmitter(a.l, a.b).Finish(ctx, t, s, o)
	}
	if err != nil {
		return false, &core.GovernanceBackendError{Backend: "limiter", Op: "finish", Err: err}
	}
	return applied, nil
}

// partner returns b as a Breaker of this package on the same client, or nil.
func (l *Limiter) partner(b core.Breaker) *Breaker {
	if br, ok := b.(*Breaker); ok && br.c == l.c {
		return br
	}
	return nil
}

// Admit runs the breaker's Allow and, when it admits, TryAcquire in one
// script (one round trip); a probe the breaker grants is given back inside
// the same script when the limiter refuses. ok=false (nothing done) when b
// is not a Breaker of this package on the same client.
func (l *Limiter) Admit(ctx context.Context, b core.Breaker, scope, source string, cfg core.BreakerConfig, req core.PermitRequest) (core.Admission, core.Grant, bool, error) {
	br := l.partner(b)
	if br == nil {
		return core.Admission{}, core.Grant{}, false, nil
	}
	bnow, _ := br.opt.nowArg()
	now, nowT := l.opt.nowArg()
	s, g := req.SourceLimits, req.GlobalLimits
	lease := newLease(s, g)
	tokens := max(req.Tokens, 0)
	sk := l.scriptKeys(req.Scope, req.Source)
	keys := sk.withCircuit(l, br, scope, source)
	member, global := sk.members(lease)
	res, err := admitScript.Run(ctx, l.c, keys,
		bnow, micros(cfg.ProbeTTL),
		now, member, tokens, micros(req.LeaseTTL),
		max(s.MaxConcurrency, 0), max(s.RPM, 0), max(s.TPM, 0),
		max(g.MaxConcurrency, 0), max(g.RPM, 0), max(g.TPM, 0), global,
	).Int64Slice()
	if err != nil {
		return core.Admission{}, core.Grant{}, true, fmt.Errorf("polygateway: redisstore: admit: %w", err)
	}
	if len(res) != 9 {
		return core.Admission{}, core.Grant{}, true, fmt.Errorf("polygateway: redisstore: admit: unexpected reply %v", res)
	}
	adm := core.Admission{
		Allowed: res[0] == 1, Probe: res[1] == 1, Epoch: uint64(res[2]),
		State: core.BreakerState(res[3]), RetryAfter: fromMicros(max(res[4], 0)),
	}
	if !adm.Allowed {
		return adm, core.Grant{}, true, nil
	}
	if res[5] != 1 {
		return adm, core.Grant{Gate: core.Gate(res[6]), RetryAfter: fromMicros(max(res[7], 0))}, true, nil
	}
	if l.opt.clock == nil {
		nowT = time.UnixMicro(res[8])
	}
	return adm, core.Grant{OK: true, Permit: core.Permit{
		Scope: req.Scope, Source: req.Source, Lease: lease, Tokens: tokens, AcquiredAt: nowT,
	}}, true, nil
}

// Finish releases p and records the attempt's outcome on b in one script
// (one round trip). It reports ok=false (doing nothing) when b is not a
// Breaker of this package on the same client, or when there is nothing to
// combine (no lease, or an admission that was refused).
func (l *Limiter) Finish(ctx context.Context, p core.Permit, s core.Settlement, b core.Breaker, scope, source string, adm core.Admission, o core.Outcome, cfg core.BreakerConfig) (applied, ok bool, err error) {
	br := l.partner(b)
	if br == nil || p.Lease == 0 || !adm.Allowed {
		return false, false, nil
	}
	now, _ := l.opt.nowArg()
	bnow, _ := br.opt.nowArg()
	probe := 0
	if adm.Probe {
		probe = 1
	}
	sk := l.scriptKeys(p.Scope, p.Source)
	keys := sk.withCircuit(l, br, scope, source)
	member, global := sk.members(p.Lease)
	args := append([]any{now, member, int(s.Kind), max(s.Tokens, 0), p.Lease & leaseLevels, global,
		bnow, strconv.FormatUint(adm.Epoch, 10), probe, int(o)}, cfgArgs(cfg)...)
	n, err := finishScript.Run(ctx, l.c, keys, args...).Int64()
	if err != nil {
		return false, true, fmt.Errorf("polygateway: redisstore: finish: %w", err)
	}
	return n == 1, true, nil
}
