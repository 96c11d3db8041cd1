package core

import (
	"context"
	"errors"
)

// MemoryBudget is a count of bytes a server holds in memory for its calls:
// request bodies and upstream answers together, so that the sum of what
// every call in flight buffers stays under one bound. A reader of outside
// bytes reserves what it is about to hold before it reads into it, and
// gives it back when the call no longer needs it.
//
// Contract: Reserve takes n bytes and reports true, or takes nothing and
// reports false when they do not fit; Release gives back n bytes taken
// before. Both are safe for concurrent use and never block.
type MemoryBudget interface {
	Reserve(n int64) bool
	Release(n int64)
}

// ErrMemoryBudget is the cause of an error when a call could not reserve
// the memory to hold what it reads: the server holds its maximum of
// buffered bytes. It is a local condition, not a fault of the source.
var ErrMemoryBudget = errors.New("polygateway: the memory budget for buffered bytes is full")

type memoryBudgetKey struct{}

// WithMemoryBudget returns ctx carrying b: the readers of upstream answers
// of a call made with it reserve what they buffer from b.
func WithMemoryBudget(ctx context.Context, b MemoryBudget) context.Context {
	return context.WithValue(ctx, memoryBudgetKey{}, b)
}

// MemoryBudgetFrom returns the budget ctx carries, or nil (no bound beyond
// each reader's own limits).
func MemoryBudgetFrom(ctx context.Context) MemoryBudget {
	b, _ := ctx.Value(memoryBudgetKey{}).(MemoryBudget)
	return b
}
