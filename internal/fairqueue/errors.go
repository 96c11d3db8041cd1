package fairqueue

import (
	"errors"
	"fmt"
	"strconv"
	"time"
)

// MaxTenant is the longest tenant name a queue accepts, in bytes.
const MaxTenant = 256

// ErrTenant is returned for a tenant name longer than MaxTenant.
var ErrTenant = errors.New("fairqueue: tenant name longer than " + strconv.Itoa(MaxTenant) + " bytes")

// ClassError is returned for a class that is not one of the classes.
type ClassError struct {
	// Value is the class given: its name, or its number.
	Value string
}

func (e *ClassError) Error() string {
	return "fairqueue: unknown class " + strconv.Quote(e.Value) + " (want interactive, normal or batch)"
}

// DeadlineError is returned by Enqueue when the waiter's deadline cannot
// be met given the queue ahead of it.
type DeadlineError struct {
	// Ahead is how many waiters would be admitted before it.
	Ahead int
	// Estimate is when it would be admitted: (Ahead+1) times the recent
	// interval between admissions (see Queue.Interval); 0 when the queue
	// has no interval yet (the deadline had already passed).
	Estimate time.Duration
	// Left is what was left of the deadline.
	Left time.Duration
}

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("fairqueue: the deadline cannot be met: %d calls ahead, admitted in about %v, %v left",
		e.Ahead, e.Estimate, e.Left)
}

// ErrDone is returned by Wait for a waiter that has already been admitted
// or has left.
var ErrDone = errors.New("fairqueue: the waiter is no longer queued")
