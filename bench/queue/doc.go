// Package queue holds the benchmark of the admission queue (make
// queuebench): callers contending for the slots of one concurrency gate,
// through each backend's Admitter, reporting how much of the gate is used,
// how long each priority class waits, what Redis runs per admission and
// per waiter-second, and what a waiting call costs in memory.
package queue
