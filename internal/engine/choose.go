package engine

import (
	"cmp"
	"context"
	"math"
	"slices"
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
// hold; tried but not in the hold; in a soft hold.
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
// (every source is excluded for this round, in a hard hold or of a model
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
// candidates, and st.source — whose own blip put it in the hold — is one
// again once st.ready has passed and no hard hold keeps it back.
func (e *Engine) choose(ctx context.Context, now time.Time, tried, excluded, busy, wrong *sourceSet, st *stickiness) (int, error) {
	n := len(e.sources)
	ch := choices.Get().(*choice)
	defer func() {
		clear(ch.cands)
		ch.cands, ch.idxs = ch.cands[:0], ch.idxs[:0]
		choices.Put(ch)
	}()
	sc := scan{choice: ch, bestLevel: levelNone, bestGroup: math.MaxInt, busyLevel: levelNone, busyGroup: math.MaxInt}
	for i, s := range e.sources {
		switch {
		case wrong.has(i, n) || st != nil && e.group(s) != st.group:
		case st != nil && i == st.source && !busy.has(i, n) && !excluded.has(i, n):
			sc.addHeld(s, i, now, st)
		case busy.has(i, n):
			sc.noteBusy(e, s, now, tried.has(i, n))
		case !excluded.has(i, n):
			sc.add(e, s, i, now, tried.has(i, n))
		}
	}
	return e.chooseAmong(ctx, &sc)
}

// scan is what choose learns going over the sources: the candidates of the
// best level and group so far, and the best placed busy source.
type scan struct {
	*choice
	bestLevel, bestGroup int
	busyLevel, busyGroup int
	// busyHealthy: a busy source of the busy level and group is healthy.
	busyHealthy bool
}

// addHeld considers the source a call holding to its tier waits for: a
// candidate of the tried level once st's ready time has passed.
func (sc *scan) addHeld(s *sourceState, i int, now time.Time, st *stickiness) {
	if now.Before(st.readyAt(s, now)) {
		return
	}
	if sc.bestLevel > levelTried || sc.bestGroup > st.group {
		sc.bestLevel, sc.bestGroup = levelTried, st.group
		sc.cands, sc.idxs = sc.cands[:0], sc.idxs[:0]
	}
	if sc.bestLevel == levelTried {
		sc.idxs = append(sc.idxs, i)
		sc.cands = append(sc.cands, s.candidate(now, true))
	}
}

// noteBusy remembers a source at its adaptive concurrency limit when it is
// better placed than the busy sources seen so far.
func (sc *scan) noteBusy(e *Engine, s *sourceState, now time.Time, tried bool) {
	level := levelFresh
	if kind, _ := s.hold(now); kind.hard() {
		// Not eligible with a slot either: nothing to wait for.
		return
	} else if kind != holdNone {
		level = levelSoft
	} else if tried {
		level = levelTried
	}
	group := e.group(s)
	if level < sc.busyLevel || (level == sc.busyLevel && group < sc.busyGroup) {
		sc.busyLevel, sc.busyGroup, sc.busyHealthy = level, group, false
	}
	if level == sc.busyLevel && group == sc.busyGroup && e.healthGated && s.health(now) >= healthyScore {
		sc.busyHealthy = true
	}
}

// add makes source i a candidate when it is eligible and as well placed as
// the best so far (a better one replaces the candidates).
func (sc *scan) add(e *Engine, s *sourceState, i int, now time.Time, tried bool) {
	level := levelFresh
	kind, health := s.view(now)
	if kind != holdNone {
		if kind.hard() {
			return
		}
		level = levelSoft
	} else if tried {
		level = levelTried
	}
	group := e.group(s)
	if level > sc.bestLevel || (level == sc.bestLevel && group > sc.bestGroup) {
		return
	}
	if level < sc.bestLevel || group < sc.bestGroup {
		sc.bestLevel, sc.bestGroup = level, group
		sc.cands, sc.idxs = sc.cands[:0], sc.idxs[:0]
	}
	sc.idxs = append(sc.idxs, i)
	sc.cands = append(sc.cands, s.candidateAt(health, tried))
}

// chooseAmong returns the source chosen among the scan's candidates, or -1 when
// there is none or the call should wait for a busy source's slot.
func (e *Engine) chooseAmong(ctx context.Context, sc *scan) (int, error) {
	if len(sc.cands) == 0 {
		return -1, nil
	}
	if sc.busyLevel != levelNone {
		if sc.busyLevel < sc.bestLevel || (sc.busyLevel == sc.bestLevel && sc.busyGroup < sc.bestGroup) {
			return -1, nil
		}
		if sc.busyHealthy && sc.busyLevel == sc.bestLevel && sc.busyGroup == sc.bestGroup && allWeak(sc.cands) {
			return -1, nil
		}
	}
	if len(sc.cands) == 1 {
		return sc.idxs[0], nil
	}
	k, err := e.selector.Select(ctx, sc.cands)
	if err != nil || k < 0 || k >= len(sc.cands) {
		return -1, &core.SelectorError{Choice: k, Candidates: len(sc.cands), Err: err}
	}
	return sc.idxs[k], nil
}

// group orders sources: same region first when a region is preferred, then
// by PRIORITY (lower first). It is the source's rank in that order, set by
// rankGroups.
func (e *Engine) group(s *sourceState) int { return s.group }

// rankGroups gives every source its group: the rank of (another region
// than the preferred one, PRIORITY) among the scope's sources, 0 first.
// A rank, not a sum, so that no PRIORITY, however large or negative, can
// move a source across the region order.
func (e *Engine) rankGroups() {
	away := func(s *sourceState) bool {
		return e.settings.PreferredRegion != "" && s.cfg.Region != e.settings.PreferredRegion
	}
	order := func(a, b *sourceState) int {
		if aa, ab := away(a), away(b); aa != ab {
			if aa {
				return 1
			}
			return -1
		}
		return cmp.Compare(a.cfg.Priority, b.cfg.Priority)
	}
	sorted := slices.SortedFunc(slices.Values(e.sources), order)
	rank := 0
	for i, s := range sorted {
		if i > 0 && order(sorted[i-1], s) != 0 {
			rank++
		}
		s.group = rank
	}
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
