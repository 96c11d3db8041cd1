//go:build race

package e2e

// raceEnabled: the race detector is on (instrumentation allocates, so heap
// measurements mean nothing).
const raceEnabled = true
