package transport

import (
	"context"
	"errors"
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

// watchdog enforces the stream's time-to-first-token and inter-token
// limits with a single timer and no goroutine of its own: the timer's
// function cancels the attempt's context with a cause (errTTFTTimeout or
// errStalled). Tokens only store a timestamp; when the timer fires early
// (because tokens kept coming) it re-arms itself for the remaining time.
// Anything that is not a token (keep-alive comments, role-only chunks,
// usage) never touches it, so it cannot keep a stalled stream alive.
//
// It also measures TTFT and the largest gap between tokens.
type watchdog struct {
	cancel      context.CancelCauseFunc
	ttft, inter time.Duration
	start       time.Time
	timer       *time.Timer
	// last is the time of the last token in nanoseconds since start, -1
	// before the first token. Written by the reader, read by the timer.
	last atomic.Int64

	// Measurements, owned by the reader.
	firstAt, lastAt time.Duration
	maxGap          time.Duration
	tokens          int
}

// begin arms the watchdog at the start of the attempt. Zero durations
// disable the respective limit; the timer is only created when one is set.
func (w *watchdog) begin(start time.Time, ttft, inter time.Duration, cancel context.CancelCauseFunc) {
	w.start = start
	w.ttft, w.inter = ttft, inter
	w.cancel = cancel
	w.last.Store(-1)
	switch {
	case ttft > 0:
		w.timer = time.AfterFunc(ttft, w.fire)
	case inter > 0:
		// No first-token limit: the timer waits, stopped, for the first token.
		w.timer = time.AfterFunc(time.Hour, w.fire)
		w.timer.Stop()
	}
}

func (w *watchdog) fire() {
	l := w.last.Load()
	if l < 0 {
		w.cancel(errTTFTTimeout)
		return
	}
	if w.inter <= 0 {
		return
	}
	idle := time.Since(w.start) - time.Duration(l)
	if idle >= w.inter {
		w.cancel(errStalled)
		return
	}
	w.timer.Reset(w.inter - idle)
}

// token records a token arriving now.
func (w *watchdog) token() {
	now := time.Since(w.start)
	if w.tokens == 0 {
		w.firstAt = now
		w.last.Store(int64(now))
		switch {
		case w.timer == nil:
		case w.inter <= 0:
			w.timer.Stop()
		default:
			w.timer.Reset(w.inter)
		}
	} else {
		w.maxGap = max(w.maxGap, now-w.lastAt)
		w.last.Store(int64(now))
	}
	w.lastAt = now
	w.tokens++
}

// stop disarms the timer.
func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
}
