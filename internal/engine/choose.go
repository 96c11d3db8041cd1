package engine

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/polygateway/polygateway/core"
)

// maxInline is the number of sources a call tracks without allocating.
const maxInline = 128

// sourceSet is a set of source indexes; allocation-free up to maxInline sources.
type sourceSet struct {
	small [maxInline / 64]uint64
	big   []uint64
}

func (s *sourceSet) words(n int) []uint64 {
	if n <= maxInline {
		return s.small[:]
	}
	if s.big == nil {
		s.big = make([]uint64, (n+63)/64)
	}
	return s.big
}

func (s *sourceSet) add(i, n int)      { w := s.words(n); w[i/64] |= 1 << (i % 64) }
func (s *sourceSet) has(i, n int) bool { w := s.words(n); return w[i/64]&(1<<(i%64)) != 0 }
func (s *sourceSet) clear() {
	s.small = [maxInline / 64]uint64{}
	for i := range s.big {
		s.big[i] = 0
	}
}

// Eligibility levels, best first: never tried in this call and not in the
// memo; tried but not in the memo; in a soft memo.
const (
	levelFresh = iota
	levelTried
	levelSoft
	levelNone
)

// choice is the working memory of one choose: the candidates of the best
// group and their source indexes. Pooled so that choosing never allocates.
type choice struct {
	cands []core.Candidate
	idxs  []int
}

var choices = sync.Pool{New: func() any {
	return &choice{cands: make([]core.Candidate, 0, 8), idxs: make([]int, 0, 8)}
}}

// choose picks the source of the call's next attempt (see Engine.choose).
func (r *run) choose(ctx context.Context, now time.Time) (int, error) {
	var st *stickiness
	if r.sticky.on && now.Before(r.sticky.until) {
		st = &r.sticky
	}
	return r.e.choose(ctx, now, &r.tried, &r.excluded, &r.busy, &r.wrongModel, st)
}

// choose picks the source for the next attempt, or -1 when none is eligible
// (every source is excluded for this round, in a hard memo or of a model
// that refused the request).
//
// Among eligible sources it keeps the best level, then the best group
// (region preference, then PRIORITY tier), then asks the Selector.
//
// Sources in busy (at their adaptive concurrency limit this round) are not
// candidates, but they are not forgotten either: when a busy source is
// better placed than every candidate (a better level or group), or is healthy
// while every candidate in its group is weak (health-gated selectors),
// choose returns -1 so that the call waits a moment for a slot instead of
// spilling onto a source that just failed.
//
// With st (a call holding to a tier), only sources of st.group are
// candidates, and st.source — whose own blip put it in the memo — is one
// again once st.ready has passed and no hard memo holds it back.
func (e *Engine) choose(ctx context.Context, now time.Time, tried, excluded, busy, wrong *sourceSet, st *stickiness) (int, error) {
	n := len(e.sources)
	busyLevel, busyGroup := levelNone, math.MaxInt
	busyHealthy := false
	ch := choices.Get().(*choice)
	defer func() {
		clear(ch.cands)
		ch.cands, ch.idxs = ch.cands[:0], ch.idxs[:0]
		choices.Put(ch)
	}()
	bestLevel, bestGroup := levelNone, math.MaxInt
	for i, s := range e.sources {
		if wrong.has(i, n) || st != nil && e.group(s) != st.group {
			continue
		}
		if st != nil && i == st.source && !busy.has(i, n) && !excluded.has(i, n) {
			if now.Before(st.readyAt(s, now)) {
				continue
			}
			if bestLevel > levelTried || bestGroup > st.group {
				bestLevel, bestGroup = levelTried, st.group
				ch.cands, ch.idxs = ch.cands[:0], ch.idxs[:0]
			}
			if bestLevel == levelTried {
				ch.idxs = append(ch.idxs, i)
				ch.cands = append(ch.cands, s.candidate(now, true))
			}
			continue
		}
		if busy.has(i, n) {
			level := levelFresh
			if kind, _ := s.memo(now); kind.hard() {
				// Not eligible with a slot either: nothing to wait for.
				continue
			} else if kind != memoNone {
				level = levelSoft
			} else if tried.has(i, n) {
				level = levelTried
			}
			group := e.group(s)
			if level < busyLevel || (level == busyLevel && group < busyGroup) {
				busyLevel, busyGroup, busyHealthy = level, group, false
			}
			if level == busyLevel && group == busyGroup && e.healthGated && s.health(now) >= healthyScore {
				busyHealthy = true
			}
			continue
		}
		if excluded.has(i, n) {
			continue
		}
		level := levelFresh
		kind, health := s.view(now)
		if kind != memoNone {
			if kind.hard() {
				continue
			}
			level = levelSoft
		} else if tried.has(i, n) {
			level = levelTried
		}
		group := e.group(s)
		if level > bestLevel || (level == bestLevel && group > bestGroup) {
			continue
		}
		if level < bestLevel || group < bestGroup {
			bestLevel, bestGroup = level, group
			ch.cands, ch.idxs = ch.cands[:0], ch.idxs[:0]
		}
		ch.idxs = append(ch.idxs, i)
		ch.cands = append(ch.cands, s.candidateAt(health, tried.has(i, n)))
	}
	if len(ch.cands) == 0 {
		return -1, nil
	}
	if busyLevel != levelNone {
		if busyLevel < bestLevel || (busyLevel == bestLevel && busyGroup < bestGroup) {
			return -1, nil
		}
		if busyHealthy && busyLevel == bestLevel && busyGroup == bestGroup && allWeak(ch.cands) {
			return -1, nil
		}
	}
	if len(ch.cands) == 1 {
		return ch.idxs[0], nil
	}
	k, err := e.selector.Select(ctx, ch.cands)
	if err != nil || k < 0 || k >= len(ch.cands) {
		return -1, &core.SelectorError{Choice: k, Candidates: len(ch.cands), Err: err}
	}
	return ch.idxs[k], nil
}

// group orders sources: same region first when a region is preferred, then
// by PRIORITY (lower first).
func (e *Engine) group(s *sourceState) int {
	grp := s.cfg.Priority
	if e.settings.PreferredRegion != "" && s.cfg.Region != e.settings.PreferredRegion {
		grp += 1 << 30
	}
	return grp
}

// allWeak reports whether every candidate is below the healthy score.
func allWeak(cands []core.Candidate) bool {
	for _, c := range cands {
		if c.Health >= healthyScore {
			return false
		}
	}
	return true
}
