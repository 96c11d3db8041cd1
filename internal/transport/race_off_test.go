//go:build !race

package transport

// raceEnabled: the race detector is on (sync.Pool drops items at random
// and instrumentation allocates, so allocation counts mean nothing).
const raceEnabled = false
