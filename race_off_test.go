//go:build !race

package polygateway_test

// raceEnabled: the race detector is on (instrumentation allocates, so heap
// measurements mean nothing).
const raceEnabled = false
