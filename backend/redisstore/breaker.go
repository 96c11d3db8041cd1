package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/polygateway/polygateway/core"
)

// Breaker is the core.Breaker on Redis: one circuit per (scope, source),
// shared by every process that uses the same Redis and prefix, and with it
// the operator's switch (SetEnabled) and the upstream's pushback
// (PushBack).
//
// Its semantics are exactly those of the in-process memory.Breaker (see its
// documentation): the consecutive channel with the threshold passed in the
// configuration, the failure-rate window of 10 buckets with the suppression
// rule, 429s ignored, timeouts weighted, OutcomeDead opening at once, the
// cooldown doubling on every failed probe up to the maximum, the single
// half-open probe with a lease of ProbeTTL, HalfOpenSuccesses, and epoch
// fencing (the epoch changes on every open, probe grant and Reset), the
// operator's switch and the upstream's pushback, and their precedence in
// Allow: switched off, then pushed back, then the circuit.
//
// Each method is one atomic Lua script on the circuit's key (a HASH per
// circuit, which holds its switch and its pushback too), so two processes can never both take the probe, and a circuit
// opened (or a source pushed back) by one process is so for all at once. The configuration travels with every
// call; nothing of it is stored. State is computed lazily from the server's
// TIME (WithClock replaces it in tests): an open circuit becomes half-open
// by time alone.
//
// A scope's circuits live under its pool when cfg.Pool names one (every
// method is given the scope's configuration), so that a pooled scope's
// Admit touches one Redis Cluster slot; a scope that moves to another pool
// starts with fresh circuits there.
//
// Differences from memory.Breaker that a shared store brings: a circuit
// untouched for a day (plus its remaining cooldown) vanishes from Redis and
// reads as closed and new, Opens included; Reset of a circuit never seen
// still bumps its epoch; buckets of the window are aligned to the
// server's clock rather than to the breaker's creation; and times are kept
// in whole microseconds (a pushback's d is rounded up to one).
//
// A Breaker is safe for concurrent use. It does not own its client.
// Create one with NewBreaker.
type Breaker struct {
	c   redis.UniversalClient
	opt options
}

var _ core.Breaker = (*Breaker)(nil)

// NewBreaker returns a Breaker on c. WithPrefix and WithClock apply.
func NewBreaker(c redis.UniversalClient, opts ...Option) *Breaker {
	return &Breaker{c: c, opt: buildOptions(opts)}
}

// key returns the circuit's key; cfg.Pool says where it lives.
func (b *Breaker) key(scope, source string, cfg *core.BreakerConfig) []string {
	return []string{circuitKey(b.opt.prefix, scope, source, cfg.Pool)}
}

// Allow admits a call when the circuit is closed, grants the single probe
// when it is half-open and the probe is free, and refuses otherwise; a
// source switched off is refused with Disabled, and one pushed back (see
// PushBack) with PushedBack. One script reads the circuit, its switch and
// its pushback in one HMGET. An error means Redis failed.
func (b *Breaker) Allow(ctx context.Context, scope, source string, cfg core.BreakerConfig) (core.Admission, error) {
	w := newRequest()
	w.open()
	b.writeAllow(w, &cfg, "")
	w.close()
	res, err := allowScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Int64Slice()
	if err != nil {
		return core.Admission{}, fmt.Errorf("polygateway: redisstore: breaker allow: %w", err)
	}
	if len(res) != allowReply {
		return core.Admission{}, fmt.Errorf("polygateway: redisstore: breaker allow: unexpected reply %v", res)
	}
	return admission(res), nil
}

// allowReply is the length of an allow reply (lua/lib/allow.lua).
const allowReply = 7

// admission reads an allow reply {allowed, probe, epoch, state, retry
// after, disabled, pushed back}.
func admission(res []int64) core.Admission {
	return core.Admission{
		Allowed:    res[0] == 1,
		Probe:      res[1] == 1,
		Epoch:      uint64(res[2]),
		State:      core.BreakerState(res[3]),
		RetryAfter: fromMicros(max(res[4], 0)),
		Disabled:   res[5] == 1,
		PushedBack: res[6] == 1,
	}
}

// writeAllow writes the fields of an allow request (lua/lib/allow.lua);
// holder is the lease of the attempt, recorded with a granted probe.
func (b *Breaker) writeAllow(w *request, cfg *core.BreakerConfig, holder string) {
	w.now(&b.opt)
	w.int("probe_ttl", micros(cfg.ProbeTTL))
	if holder != "" {
		w.str("holder", holder)
	}
}

// Record applies the outcome of an admitted call if adm is of the
// circuit's current epoch, and reports whether it did. A refused admission
// is never applied and costs no round trip. An error means Redis failed.
func (b *Breaker) Record(ctx context.Context, scope, source string, adm core.Admission, o core.Outcome, cfg core.BreakerConfig) (bool, error) {
	if !adm.Allowed {
		return false, nil
	}
	w := newRequest()
	w.open()
	b.writeRecord(w, adm, o, &cfg, 0)
	w.close()
	n, err := recordScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Int64()
	if err != nil {
		return false, fmt.Errorf("polygateway: redisstore: breaker record: %w", err)
	}
	return n == 1, nil
}

// writeRecord writes the fields of a record request (lua/lib/record.lua):
// the admission, the outcome and the configuration, each field by name
// (durations in microseconds), and the attempt's lease (0 = none).
func (b *Breaker) writeRecord(w *request, adm core.Admission, o core.Outcome, cfg *core.BreakerConfig, lease uint64) {
	w.now(&b.opt)
	if lease != 0 {
		w.str("lease", strconv.FormatUint(lease, 10))
	}
	w.uint("epoch", adm.Epoch)
	w.bool("probe", adm.Probe)
	w.int("outcome", int64(o))
	w.object("config")
	w.int("threshold", int64(max(cfg.FailThreshold, 0)))
	w.int("cooldown", micros(cfg.Cooldown))
	w.int("max_cooldown", micros(cfg.MaxCooldown))
	w.int("min_calls", int64(cfg.MinCalls))
	w.float("fail_rate", cfg.FailRate)
	w.int("window", micros(cfg.Window))
	w.int("half_open_successes", int64(cfg.HalfOpenSuccesses))
	w.float("timeout_weight", cfg.TimeoutWeight)
	w.close()
}

// Snapshot reports the circuit's state as of now; an unknown circuit is
// closed. An error means Redis failed. Of cfg only Pool is used.
func (b *Breaker) Snapshot(ctx context.Context, scope, source string, cfg core.BreakerConfig) (core.BreakerSnapshot, error) {
	w := newRequest()
	w.open()
	w.now(&b.opt)
	w.close()
	res, err := snapshotScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Slice()
	if err != nil {
		return core.BreakerSnapshot{}, fmt.Errorf("polygateway: redisstore: breaker snapshot: %w", err)
	}
	if len(res) != 7 {
		return core.BreakerSnapshot{}, fmt.Errorf("polygateway: redisstore: breaker snapshot: unexpected reply %v", res)
	}
	var v [7]int64
	for i, x := range res {
		if i == 2 {
			continue
		}
		n, ok := x.(int64)
		if !ok {
			return core.BreakerSnapshot{}, fmt.Errorf("polygateway: redisstore: breaker snapshot: unexpected reply %v", res)
		}
		v[i] = n
	}
	consText, _ := res[2].(string)
	cons, err := strconv.ParseFloat(consText, 64)
	if err != nil {
		return core.BreakerSnapshot{}, fmt.Errorf("polygateway: redisstore: breaker snapshot: bad consecutive weight %q", consText)
	}
	return core.BreakerSnapshot{
		State:               core.BreakerState(v[0]),
		Epoch:               uint64(v[1]),
		ConsecutiveFailures: cons,
		Opens:               int(v[3]),
		RetryAfter:          fromMicros(max(v[4], 0)),
		ProbeHeld:           v[5] == 1,
		Disabled:            v[6] == 1,
	}, nil
}

// Reset closes the circuit, clears its history and increments its epoch so
// that calls admitted before it are fenced; a source switched off stays
// off. An error means Redis failed. Of cfg only Pool is used.
func (b *Breaker) Reset(ctx context.Context, scope, source string, cfg core.BreakerConfig) error {
	w := newRequest()
	w.open()
	w.now(&b.opt)
	w.close()
	if err := resetScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Err(); err != nil {
		return fmt.Errorf("polygateway: redisstore: breaker reset: %w", err)
	}
	return nil
}

// SetEnabled switches the source on or off, for every process on this
// Redis and prefix at once: one script on the circuit's key, which keeps
// its state, epoch and history either way. A source switched off is
// refused by Allow and Admit with Disabled until it is switched on; its
// circuit keeps no TTL meanwhile, so the switch outlasts any idle time,
// and Reset leaves it. An error means Redis failed. Of cfg only Pool is
// used: like the circuit, the switch lives under the scope's pool.
func (b *Breaker) SetEnabled(ctx context.Context, scope, source string, cfg core.BreakerConfig, enabled bool) error {
	w := newRequest()
	w.open()
	w.now(&b.opt)
	w.bool("on", enabled)
	w.close()
	if err := switchScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Err(); err != nil {
		return fmt.Errorf("polygateway: redisstore: breaker switch: %w", err)
	}
	return nil
}

// PushBack records, for every process on this Redis and prefix at once,
// that the source is not to be asked before d has passed on the server's
// clock (its TIME, read by the script; WithClock replaces it in tests):
// Allow and Admit refuse it meanwhile with PushedBack (see
// core.Breaker), without touching its circuit's state. A pushback never
// shortens one that ends later. It is one script writing the pushback's
// end in the circuit's hash (field pb, read by Allow's and Admit's one
// HMGET of the circuit), whose key is kept at least a second past that
// end and, for a circuit that did not exist, no longer. d is rounded up to a whole
// microsecond; d <= 0 records nothing and costs no round trip. An error
// means Redis failed. Of cfg only Pool is used: like the circuit, the
// pushback lives under the scope's pool.
func (b *Breaker) PushBack(ctx context.Context, scope, source string, cfg core.BreakerConfig, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	w := newRequest()
	w.open()
	w.now(&b.opt)
	w.int("d", ceilMicros(d))
	w.close()
	if err := pushbackScript.Run(ctx, b.c, b.key(scope, source, &cfg), w.String()).Err(); err != nil {
		return fmt.Errorf("polygateway: redisstore: breaker pushback: %w", err)
	}
	return nil
}
