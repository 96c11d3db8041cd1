package core

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Priority is a call's priority class. When the gates are full, a waiting
// call of a higher class is admitted before any waiting call of a lower
// one (a share of admissions keeps the lower classes from starving). The
// zero value is PriorityNormal.
type Priority uint8

// The priorities. The zero value is the default, PriorityNormal.
const (
	// PriorityNormal is the default.
	PriorityNormal Priority = iota
	// PriorityInteractive is for a person waiting on the answer.
	PriorityInteractive
	// PriorityBatch is for bulk work that can wait (embeddings, OCR, bulk
	// chat).
	PriorityBatch
)

// NumPriorities is the number of priority classes.
const NumPriorities = 3

// priorityNames is indexed by Priority; ranks by Priority.
var (
	priorityNames = [NumPriorities]string{"normal", "interactive", "batch"}
	priorityRanks = [NumPriorities]int{1, 0, 2}
)

// String returns "interactive", "normal" or "batch".
func (p Priority) String() string {
	if p.Valid() {
		return priorityNames[p]
	}
	return "priority(" + strconv.Itoa(int(p)) + ")"
}

// Valid reports whether p is one of the priorities.
func (p Priority) Valid() bool { return p < NumPriorities }

// Rank is the order in which classes are served: 0 for
// PriorityInteractive, 1 for PriorityNormal, 2 for PriorityBatch. Queues
// index their classes by it. An invalid priority ranks as normal.
func (p Priority) Rank() int {
	if !p.Valid() {
		return priorityRanks[PriorityNormal]
	}
	return priorityRanks[p]
}

// PriorityOfRank is the inverse of Rank.
func PriorityOfRank(r int) Priority {
	for p, pr := range priorityRanks {
		if pr == r {
			return Priority(p)
		}
	}
	return PriorityNormal
}

// ParsePriority reads a priority by its name: "interactive", "normal" or
// "batch". Anything else is a *PriorityError.
func ParsePriority(s string) (Priority, error) {
	for i, n := range priorityNames {
		if s == n {
			return Priority(i), nil
		}
	}
	return PriorityNormal, &PriorityError{Value: s}
}

// PriorityError is returned for a priority that is not one of the
// priorities.
type PriorityError struct {
	// Value is the priority given: its name, or its number.
	Value string
}

func (e *PriorityError) Error() string {
	return "polygateway: unknown priority " + strconv.Quote(e.Value) + " (want interactive, normal or batch)"
}

// MaxTenant is the longest tenant name a queue accepts, in bytes.
const MaxTenant = 256

// ErrTenantTooLong is returned for a tenant name longer than MaxTenant.
var ErrTenantTooLong = errors.New("polygateway: tenant name longer than " + strconv.Itoa(MaxTenant) + " bytes")

// Place is where a call stands in a queue: its class, and whose work it is.
// Within a class, waiting tenants are served in turn; within a tenant,
// first come first served. The zero value is a normal call of the
// anonymous tenant.
type Place struct {
	// Priority is the call's class (default PriorityNormal).
	Priority Priority
	// Tenant names whose work the call is (default "", one anonymous
	// tenant); at most MaxTenant bytes.
	Tenant string
}

// Check refuses a place a queue cannot take: a *PriorityError for an
// invalid priority, ErrTenantTooLong for a tenant over MaxTenant bytes.
func (p Place) Check() error {
	if !p.Priority.Valid() {
		return &PriorityError{Value: strconv.Itoa(int(p.Priority))}
	}
	if len(p.Tenant) > MaxTenant {
		return ErrTenantTooLong
	}
	return nil
}

// WaitKind says why Waiter.Wait returned.
type WaitKind uint8

// The ways a wait ends without an error.
const (
	// WaitClaimed: a unit freed by a release was reserved for the waiter
	// (WaitEvent.Source names the source it is reserved on): it admits
	// again now, on that source, with its waiter.
	WaitClaimed WaitKind = iota + 1
	// WaitTurn: the waiter is the head of the line and the room it waits
	// for (a rate window) is due: it admits again now, with its waiter.
	WaitTurn
	// WaitLapsed: the waiter held a claim too long and lost its place: it
	// admits again as a new call (no waiter).
	WaitLapsed
)

// WaitEvent is what Waiter.Wait returns.
type WaitEvent struct {
	// Kind says why the wait ended.
	Kind WaitKind
	// Source is the source a WaitClaimed reservation is on ("" otherwise).
	Source string
	// ClaimLeft is how long a WaitClaimed reservation stays the waiter's
	// from when Wait returns (the admission must come before); 0 when the
	// queue does not say, and the engine then assumes DefaultClaimLeft.
	ClaimLeft time.Duration
}

// DefaultClaimLeft is how long a WaitClaimed reservation is assumed to
// last when WaitEvent.ClaimLeft is 0: the claim period of the in-process
// and Redis queues by default.
const DefaultClaimLeft = 2 * time.Second

// QueueDepth counts the calls waiting in a scope's admission queue, by
// class: QueueDepth[p] is the number waiting of Priority p.
type QueueDepth [NumPriorities]int

// Total is the number of waiting calls of every class.
func (d QueueDepth) Total() int {
	n := 0
	for _, v := range d {
		n += v
	}
	return n
}

// Waiter is a call's place in an admission queue, returned in
// Ticket.Queued when the gates refused and the call queued.
//
// Contract: Wait blocks until the call may admit again or ctx ends; it
// starts no goroutine of its own. When ctx ends, the waiter leaves the
// queue (a reservation it held passes to the next) and Wait returns a
// *CanceledError. Leave gives up the place at once (a reservation passes
// on); it is idempotent. After WaitClaimed or WaitTurn the caller passes
// the waiter back in AdmitRequest.Waiter; after WaitLapsed, Leave, or an
// error it must not. A Waiter is used by one goroutine at a time.
type Waiter interface {
	Wait(ctx context.Context) (WaitEvent, error)
	Leave(ctx context.Context)
}

// QueueDeadlineError is returned by Admitter.Admit when a call's deadline
// cannot be met given the queue ahead of it. The engine turns it into a
// GatewayUnavailableError whose RetryAfter is Estimate.
type QueueDeadlineError struct {
	// Ahead is how many waiting calls would be admitted before it.
	Ahead int
	// Estimate is when it would be admitted, from the recent interval
	// between admissions; 0 when there is no interval yet (the deadline
	// had already passed).
	Estimate time.Duration
	// Left is what was left of the deadline.
	Left time.Duration
}

func (e *QueueDeadlineError) Error() string {
	return fmt.Sprintf("polygateway: the deadline cannot be met in the queue: %d calls ahead, admitted in about %v, %v left",
		e.Ahead, e.Estimate, e.Left)
}
