package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/polygateway/polygateway/internal/core"
)

var _ core.Finisher = (*Limiter)(nil)

// Finish releases p and records the attempt's outcome on b in one round
// trip: the two scripts go to Redis in one pipeline. It reports ok=false
// (doing nothing) when b is not a Breaker of this package on the same
// client. A script the server does not know yet (NOSCRIPT after a restart
// or a SCRIPT FLUSH) is run again on its own, so correctness never depends
// on the pipeline.
func (l *Limiter) Finish(ctx context.Context, p core.Permit, s core.Settlement, b core.Breaker, scope, source string, adm core.Admission, o core.Outcome, cfg core.BreakerConfig) (applied, ok bool, err error) {
	br, same := b.(*Breaker)
	if !same || br.c != l.c {
		return false, false, nil
	}
	if p.Lease == 0 || !adm.Allowed {
		// Nothing to pipeline: fall back to the plain calls.
		return false, false, nil
	}
	now, _ := l.opt.nowArg()
	relKeys := l.keys(p.Scope, p.Source)
	relArgs := []any{now, strconv.FormatUint(p.Lease, 10), int(s.Kind), max(s.Tokens, 0)}
	bnow, _ := br.opt.nowArg()
	probe := 0
	if adm.Probe {
		probe = 1
	}
	recKeys := br.key(scope, source)
	recArgs := append([]any{bnow, strconv.FormatUint(adm.Epoch, 10), probe, int(o)}, cfgArgs(cfg)...)

	pipe := l.c.Pipeline()
	rel := releaseScript.EvalSha(ctx, pipe, relKeys, relArgs...)
	rec := recordScript.EvalSha(ctx, pipe, recKeys, recArgs...)
	_, _ = pipe.Exec(ctx)

	if err := rel.Err(); isNoScript(err) {
		err = releaseScript.Run(ctx, l.c, relKeys, relArgs...).Err()
		if err != nil {
			return false, true, fmt.Errorf("polygateway: redisstore: limiter release: %w", err)
		}
	} else if err != nil {
		return false, true, fmt.Errorf("polygateway: redisstore: limiter release: %w", err)
	}
	n, err := rec.Int64()
	if isNoScript(err) {
		n, err = recordScript.Run(ctx, br.c, recKeys, recArgs...).Int64()
	}
	if err != nil {
		return false, true, fmt.Errorf("polygateway: redisstore: breaker record: %w", err)
	}
	return n == 1, true, nil
}

// isNoScript reports whether err is Redis's NOSCRIPT reply.
func isNoScript(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT")
}
