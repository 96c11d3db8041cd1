package transport

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Causes with which the transport cancels an attempt's context; they tell
// the attempt's own limits apart from the caller's cancellation.
var (
	errAttemptTimeout = errors.New("polygateway: attempt timeout")
	errTTFTTimeout    = errors.New("polygateway: no first token in time")
	errStalled        = errors.New("polygateway: stream stalled")
)

// tokenClock measures a stream: the time to the first token and the
// largest gap between tokens. It is owned by the reading goroutine and
// feeds the attempt's watchdog, if any.
type tokenClock struct {
	start           time.Time
	firstAt, lastAt time.Duration
	maxGap          time.Duration
	tokens          int
	wd              *watchdog
}

func (k *tokenClock) reset(start time.Time, wd *watchdog) {
	*k = tokenClock{start: start, wd: wd}
}

// token records a token (content, thinking or tool-call delta) arriving now.
func (k *tokenClock) token() {
	now := time.Since(k.start)
	if k.tokens == 0 {
		k.firstAt = now
	} else {
		k.maxGap = max(k.maxGap, now-k.lastAt)
	}
	k.lastAt = now
	k.tokens++
	if k.wd != nil {
		k.wd.token(now, k.tokens == 1)
	}
}

// watchdog enforces an attempt's time limits — the whole attempt
// (SourceConfig.Timeout), the time to the first token and the largest gap
// between tokens — with one timer and no goroutine of its own: when a
// limit passes, the timer's function cancels the attempt's context with a
// cause (errAttemptTimeout, errTTFTTimeout, errStalled).
//
// Tokens only store a timestamp; when the timer fires while tokens kept
// coming it re-arms itself for the remaining time. Anything that is not a
// token (keep-alive comments, role-only chunks, usage) never touches it,
// so it cannot keep a stalled stream alive.
//
// Watchdogs are pooled per Client. Every decision is taken under mu from
// the current attempt's fields, so a late timer callback left over from a
// previous attempt only re-evaluates (or finds the watchdog disarmed) and
// can never cancel the wrong attempt.
type watchdog struct {
	timer *time.Timer

	mu       sync.Mutex
	armed    bool
	cancel   context.CancelCauseFunc
	start    time.Time
	deadline time.Duration // since start; 0 = none
	ttft     time.Duration // 0 = no first-token limit
	inter    time.Duration // 0 = no inter-token limit

	// last is the time of the last token in nanoseconds since start, -1
	// before the first token.
	last atomic.Int64
}

func newWatchdog() *watchdog {
	w := &watchdog{}
	w.timer = time.AfterFunc(time.Hour, w.fire)
	w.timer.Stop()
	return w
}

// arm starts watching an attempt that began at start.
func (w *watchdog) arm(start time.Time, timeout, ttft, inter time.Duration, cancel context.CancelCauseFunc) {
	w.mu.Lock()
	w.armed = true
	w.cancel = cancel
	w.start = start
	w.deadline, w.ttft, w.inter = timeout, ttft, inter
	w.last.Store(-1)
	wait, _ := w.check(time.Since(start))
	w.mu.Unlock()
	w.timer.Reset(max(wait, time.Nanosecond))
}

// disarm stops watching; the watchdog may then be reused.
func (w *watchdog) disarm() {
	w.mu.Lock()
	w.armed = false
	w.cancel = nil
	w.mu.Unlock()
	w.timer.Stop()
}

// check returns the cause of a limit that has passed at now (since start)
// with wait 0, or else how long until the next limit could pass (0 = none
// left) with a nil cause.
// Called with mu held.
func (w *watchdog) check(now time.Duration) (wait time.Duration, cause error) {
	next := func(at time.Duration) {
		if d := at - now; wait == 0 || d < wait {
			wait = d
		}
	}
	if w.deadline > 0 {
		if now >= w.deadline {
			return 0, errAttemptTimeout
		}
		next(w.deadline)
	}
	if l := time.Duration(w.last.Load()); l < 0 {
		if w.ttft > 0 {
			if now >= w.ttft {
				return 0, errTTFTTimeout
			}
			next(w.ttft)
		}
	} else if w.inter > 0 {
		if now >= l+w.inter {
			return 0, errStalled
		}
		next(l + w.inter)
	}
	return wait, nil
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.armed {
		return
	}
	wait, cause := w.check(time.Since(w.start))
	if cause != nil {
		w.armed = false
		w.cancel(cause)
		return
	}
	if wait > 0 {
		w.timer.Reset(wait)
	}
}

// token records a token at now (since start). The first token moves the
// next check to the inter-token limit when that comes sooner.
func (w *watchdog) token(now time.Duration, first bool) {
	w.last.Store(int64(now))
	if first && w.inter > 0 {
		wait := w.inter
		if w.deadline > 0 {
			wait = min(wait, max(w.deadline-now, time.Nanosecond))
		}
		w.timer.Reset(wait)
	}
}
