package redisstore

import (
	"context"
	"time"
)

// An entry whose waiter left while Redis could not be reached stays in
// line: the process no longer waits on it, and a claim handed to it would
// only lapse after QueueConfig.ClaimTTL, one entry after the other, so a
// line of such entries would hold every live waiter behind it for a claim
// TTL each. The waker therefore keeps the entries it could not take out
// (abandoned) and takes them out as soon as Redis answers again: on the
// checks goroutine, retried with backoff, and at once when a message for
// one of them arrives.

// abandoned is an entry whose leave failed: its queue, the label of a
// claim it may hold, when the next try is due and how many failed.
type abandoned struct {
	k     *queueKeys
	label string
	retry time.Time
	fails int
}

// abandon notes that the leave of entry id of k failed (mu not held).
func (wk *waker) abandon(k *queueKeys, id uint64, label string) {
	now := wk.a.l.opt.clockOrSystem().Now()
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if wk.closed || len(wk.abandoned) >= maxEarly {
		return // it lapses with its lease
	}
	wk.abandoned[waitKey{k.prefix, id}] = abandoned{k: k, label: label, retry: now.Add(backoff(1)), fails: 1}
	wk.anyAbandoned.Store(true)
	wk.startChecks()
}

// answered is told that Redis answered a script: the abandoned entries'
// leaves are due at once rather than after their backoff, so that a line
// does not wait on entries of calls that gave up during an outage. It
// costs one atomic load while nothing is abandoned.
func (wk *waker) answered() {
	if !wk.anyAbandoned.Load() {
		return
	}
	wk.mu.Lock()
	defer wk.mu.Unlock()
	if len(wk.abandoned) == 0 {
		wk.anyAbandoned.Store(false)
		return
	}
	due := false
	for key, e := range wk.abandoned {
		if !e.retry.IsZero() {
			e.retry = time.Time{}
			wk.abandoned[key] = e
			due = true
		}
	}
	if due && !wk.closed {
		wk.startChecks()
	}
}

// heardAbandoned takes a message for an entry that was abandoned (mu
// held): a claim's label is the one to give back, and the leave is tried
// at once. It reports whether key was abandoned.
func (wk *waker) heardAbandoned(key waitKey, m wakeMsg) bool {
	e, ok := wk.abandoned[key]
	if !ok {
		return false
	}
	if m.K == "claim" {
		e.label = m.Lb
	}
	e.retry = time.Time{}
	wk.abandoned[key] = e
	if !wk.closed {
		wk.startChecks()
	}
	return true
}

// dueAbandoned takes the abandoned entries due at now out of the map and
// returns them, and the earliest retry of the others (mu held).
func (wk *waker) dueAbandoned(now time.Time) (due map[waitKey]abandoned, next time.Time) {
	for key, e := range wk.abandoned {
		if now.Before(e.retry) {
			if next.IsZero() || e.retry.Before(next) {
				next = e.retry
			}
			continue
		}
		if due == nil {
			due = map[waitKey]abandoned{}
		}
		due[key] = e
		delete(wk.abandoned, key)
	}
	return due, next
}

// retryLeaves takes the due entries out of their queues; one that still
// fails is tried again after a backoff.
func (wk *waker) retryLeaves(now time.Time, due map[waitKey]abandoned) {
	for key, e := range due {
		ctx, cancel := context.WithTimeout(context.Background(), queueOpTimeout)
		_, err := wk.a.leave(ctx, e.k, key.id, e.label)
		cancel()
		if err == nil {
			continue
		}
		e.fails++
		e.retry = now.Add(backoff(e.fails))
		wk.mu.Lock()
		if !wk.closed {
			if cur, ok := wk.abandoned[key]; ok && cur.label != "" {
				e.label = cur.label // a claim heard meanwhile
			}
			wk.abandoned[key] = e
		}
		wk.mu.Unlock()
	}
}
