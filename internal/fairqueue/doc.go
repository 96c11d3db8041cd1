// Package fairqueue is the discipline by which calls that wait for a full
// rate-limit gate are admitted, one queue per scope: by class first
// (core.PriorityInteractive, then PriorityNormal, then PriorityBatch, ranked by
// core.Priority.Rank), with a share rule that never
// starves a lower class; by tenant in turn within a class (round robin);
// first come, first served within a tenant.
//
// It is the in-process implementation, used by the memory backend, and
// the reference that the Redis scripts (backend/redisstore, lua/lib/
// queue.lua) follow step for step; docs/explanation-queue.md states the
// rules and why they were chosen.
//
// # The discipline
//
// A Queue holds the waiters of one scope. The next waiter to admit is
// chosen so:
//
//  1. Waiters returned to the front (Requeue: chosen once, then refused
//     again by a gate) come first, in the order they were returned.
//  2. Otherwise a class is chosen: the highest class with waiters, unless
//     a lower class with waiters is due — one that has been passed over
//     by Config.Share consecutive choices of a higher class while it had
//     waiters. The due class passed over most is chosen then (a tie goes
//     to the higher class). So a class with waiters is passed over at
//     most Share + core.NumPriorities - 2 times in a row.
//  3. Within the class, the tenant whose turn it is (the front of the
//     class's ring of tenants with waiters) gives its oldest waiter and
//     goes to the back of the ring if it still has waiters. A tenant
//     that had no waiter joins at the back.
//
// # Handoff, claims and the head
//
// The queue does not count capacity: its owner (a limiter) does, under
// the lock it gives the queue. When a unit frees (a concurrency slot
// released) while waiters wait, the owner calls Hand: the next waiter is
// chosen, the unit stays reserved for it for Config.ClaimTTL (a claim),
// and the waiter is woken. A claim that is not taken in time lapses and
// goes to the next waiter. Room in a rate window frees at a known time
// instead: only the head of the queue (the waiter Hand would choose)
// holds a timer for it, and whoever changes the head wakes the new one.
//
// Nothing here starts a goroutine: a waiter waits in its caller's
// goroutine (Waiter.Wait), on one channel of its own and, at the head,
// one timer.
package fairqueue
