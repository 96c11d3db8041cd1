package fairqueue

import "errors"

// ErrDone is returned by Wait for a waiter that has already been admitted
// or has left.
var ErrDone = errors.New("fairqueue: the waiter is no longer queued")
