package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/backend/backendtest"
	"github.com/polygateway/polygateway/backend/redisstore"
	"github.com/polygateway/polygateway/core"
)

// faultHook makes scripts fail on the client: lose drops the reply of a
// script that ran (as a reset connection would), fail fails it before it
// is sent.
type faultHook struct{ lose, fail atomic.Bool }

func (h *faultHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *faultHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		script := strings.HasPrefix(strings.ToLower(cmd.Name()), "eval")
		if script && h.fail.Load() {
			err := errors.New("read tcp: connection reset by peer (injected)")
			cmd.SetErr(err)
			return err
		}
		err := next(ctx, cmd)
		if script && h.lose.Load() {
			err = errors.New("i/o timeout (injected)")
			cmd.SetErr(err)
		}
		return err
	}
}

func (h *faultHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// healed waits until the Admitter holds no reclaim.
func healed(t *testing.T, a *redisstore.Admitter) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); a.Reclaiming() > 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d reclaims still waiting after 5 s", a.Reclaiming())
		}
	}
}

type healRig struct {
	hook *faultHook
	l    *redisstore.Limiter
	b    *redisstore.Breaker
	a    *redisstore.Admitter
	cfg  core.BreakerConfig
}

func newHealRig(t *testing.T) *healRig {
	hook := &faultHook{}
	c := newClient(t, hook)
	p := freshPrefix(t, c)
	r := &healRig{hook: hook, l: redisstore.NewLimiter(c, redisstore.WithPrefix(p)), b: redisstore.NewBreaker(c, redisstore.WithPrefix(p))}
	r.a = redisstore.NewAdmitter(r.l, r.b)
	t.Cleanup(func() { _ = r.a.Close() })
	r.cfg = backendtest.SuiteBreakerConfig()
	r.cfg.Cooldown = 20 * time.Millisecond
	return r
}

func (r *healRig) req(src core.Limits) core.AdmitRequest {
	return core.AdmitRequest{Breaker: r.cfg, Permit: core.PermitRequest{Scope: "HEAL", Source: "a",
		SourceLimits: src, GlobalLimits: src, Tokens: 50, LeaseTTL: time.Hour}}
}

// openToHalf opens the circuit and waits out its cooldown.
func (r *healRig) openToHalf(t *testing.T) {
	t.Helper()
	tk, err := r.a.Admit(t.Context(), r.req(core.Limits{}))
	if err != nil || !tk.Admitted() {
		t.Fatalf("Admit = %+v, %v", tk, err)
	}
	if _, err := r.a.Finish(t.Context(), tk, core.Settlement{}, core.OutcomeDead); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * r.cfg.Cooldown)
}

// TestLostAdmitReplyIsReclaimed: an Admit whose script ran but whose reply
// was lost is a GovernanceBackendError, and the slot and the probe the
// script took are given back in the background.
func TestLostAdmitReplyIsReclaimed(t *testing.T) {
	r := newHealRig(t)
	ctx := t.Context()
	one := core.Limits{MaxConcurrency: 1, RPM: 100, TPM: 10000}
	r.openToHalf(t)
	r.hook.lose.Store(true)
	_, err := r.a.Admit(ctx, r.req(one))
	r.hook.lose.Store(false)
	var be *core.GovernanceBackendError
	if !errors.As(err, &be) {
		t.Fatalf("Admit with its reply lost: %v, want a GovernanceBackendError", err)
	}
	healed(t, r.a)
	if u, err := r.l.Usage(ctx, "HEAL", "a"); err != nil || u.InFlight != 0 || u.Tokens != 0 {
		t.Fatalf("usage after the reclaim = %+v, %v; want the slot free and the tokens refunded", u, err)
	}
	if s, err := r.b.Snapshot(ctx, "HEAL", "a", r.cfg); err != nil || s.ProbeHeld || s.State != core.StateHalfOpen {
		t.Fatalf("snapshot after the reclaim = %+v, %v; want half-open with the probe free", s, err)
	}
	tk, err := r.a.Admit(ctx, r.req(one))
	if err != nil || !tk.Admitted() || !tk.Admission.Probe {
		t.Fatalf("Admit after the reclaim = %+v, %v; want the probe and the slot", tk, err)
	}
}

// TestFailedFinishIsReclaimedWithoutItsOutcome: a Finish that fails is
// retried in the background until the release lands: the slot frees and
// the tokens settle as Finish said, and the outcome is dropped (never
// counted twice); a probe goes back with no verdict.
func TestFailedFinishIsReclaimedWithoutItsOutcome(t *testing.T) {
	r := newHealRig(t)
	ctx := t.Context()
	one := core.Limits{MaxConcurrency: 1, RPM: 100, TPM: 10000}
	tk, err := r.a.Admit(ctx, r.req(one))
	if err != nil || !tk.Admitted() {
		t.Fatalf("Admit = %+v, %v", tk, err)
	}
	r.hook.fail.Store(true)
	if _, err := r.a.Finish(ctx, tk, core.Settlement{Kind: core.SettleActual, Tokens: 7}, core.OutcomeFailure); err == nil {
		t.Fatal("Finish succeeded with Redis failing")
	}
	time.Sleep(150 * time.Millisecond) // the first reclaims fail too
	if r.a.Reclaiming() != 1 {
		t.Fatalf("%d reclaims waiting, want the one being retried", r.a.Reclaiming())
	}
	r.hook.fail.Store(false)
	healed(t, r.a)
	if u, err := r.l.Usage(ctx, "HEAL", "a"); err != nil || u.InFlight != 0 || u.Tokens != 7 {
		t.Fatalf("usage after the reclaim = %+v, %v; want the slot free and 7 tokens settled", u, err)
	}
	if s, err := r.b.Snapshot(ctx, "HEAL", "a", r.cfg); err != nil || s.ConsecutiveFailures != 0 {
		t.Fatalf("snapshot = %+v, %v; want the failed Finish's outcome dropped", s, err)
	}

	// A probe whose Finish fails is given back with no verdict.
	r.openToHalf(t)
	p, err := r.a.Admit(ctx, r.req(one))
	if err != nil || !p.Admission.Probe {
		t.Fatalf("Admit = %+v, %v; want the probe", p, err)
	}
	r.hook.fail.Store(true)
	_, _ = r.a.Finish(ctx, p, core.Settlement{Kind: core.SettleActual}, core.OutcomeSuccess)
	r.hook.fail.Store(false)
	healed(t, r.a)
	if s, err := r.b.Snapshot(ctx, "HEAL", "a", r.cfg); err != nil || s.ProbeHeld || s.State != core.StateHalfOpen {
		t.Fatalf("snapshot = %+v, %v; want half-open, the probe free and no verdict", s, err)
	}
}

// TestAdmitterCloseGivesUpInBoundedTime: Close with reclaims that cannot
// land (Redis unreachable) returns within about a second and leaves no
// goroutine behind (goleak, in TestMain).
func TestAdmitterCloseGivesUpInBoundedTime(t *testing.T) {
	r := newHealRig(t)
	tk, err := r.a.Admit(t.Context(), r.req(core.Limits{MaxConcurrency: 2}))
	if err != nil {
		t.Fatal(err)
	}
	r.hook.fail.Store(true)
	_, _ = r.a.Finish(t.Context(), tk, core.Settlement{}, core.OutcomeSuccess)
	start := time.Now()
	if err := r.a.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 1500*time.Millisecond {
		t.Fatalf("Close took %v", d)
	}
	if err := r.a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if n := r.a.Reclaiming(); n != 0 {
		t.Fatalf("%d reclaims counted after Close", n)
	}
}

// TestLostRepliesSettleBudgets: the reclaim of an Admit whose reply was
// lost refunds the budgets it reserved, with or without gates; the reclaim
// of a failed Finish settles them as Finish said, once.
func TestLostRepliesSettleBudgets(t *testing.T) {
	r := newHealRig(t)
	ctx := t.Context()
	window := safeWindow(t, newClient(t))
	for i, gates := range []core.Limits{{}, {MaxConcurrency: 1, RPM: 100}} {
		b := core.Budget{Key: "client:heal" + strconv.Itoa(i), Limit: 1000, Window: window}
		spent := func() int64 {
			t.Helper()
			us, err := r.l.Budgets(ctx, "HEAL", "", []core.Budget{b})
			if err != nil {
				t.Fatal(err)
			}
			return us[0].Spent
		}
		req := r.req(gates)
		req.Permit.Budgets, req.Permit.Cost = []core.Budget{b}, 400
		lostAdmit := func() {
			t.Helper()
			r.hook.lose.Store(true)
			_, err := r.a.Admit(ctx, req)
			r.hook.lose.Store(false)
			if err == nil {
				t.Fatal("Admit succeeded with its reply lost")
			}
			healed(t, r.a)
		}
		lostAdmit()
		if s := spent(); s != 0 {
			t.Fatalf("gates %+v: %d spent after the reclaim of a lost Admit, want the reservation refunded", gates, s)
		}
		tk, err := r.a.Admit(ctx, req)
		if err != nil || !tk.Admitted() {
			t.Fatalf("Admit = %+v, %v", tk, err)
		}
		r.hook.fail.Store(true)
		_, err = r.a.Finish(ctx, tk, core.Settlement{Kind: core.SettleActual, Cost: 150}, core.OutcomeSuccess)
		r.hook.fail.Store(false)
		if err == nil {
			t.Fatal("Finish succeeded with Redis failing")
		}
		healed(t, r.a)
		if s := spent(); s != 150 {
			t.Fatalf("gates %+v: %d spent after the reclaim of a failed Finish, want the actual 150", gates, s)
		}
		lostAdmit()
		if s := spent(); s != 150 {
			t.Fatalf("gates %+v: %d spent after a second lost Admit, want 150", gates, s)
		}
	}
}
