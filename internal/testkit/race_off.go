//go:build !race

package testkit

// RaceEnabled says whether the race detector is on: then instrumentation
// allocates and sync.Pool drops items at random, so heap and allocation
// measurements mean nothing.
const RaceEnabled = false
