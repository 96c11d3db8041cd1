package backendtest

import (
	"time"
)

// epoch is the time every suite clock starts at: a fixed instant on a whole
// second, so that windows and cooldowns fall on exact boundaries.
func epoch() time.Time {
	return time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
}
