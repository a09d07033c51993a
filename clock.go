package tenure

import "time"

// Clock reads the two clocks a [Client] needs. The monotonic reading sets
// every local deadline; the wall reading is compared with it only to detect
// that the process was suspended (a VM paused and its wall clock re-synced on
// wake). Neither ever extends a lease: the store's clock decides expiry
// (promise P1).
type Clock interface {
	// Now returns the wall-clock time and the monotonic time since an
	// arbitrary fixed origin, read together.
	Now() (wall time.Time, mono time.Duration)
}

// NewSystemClock returns the process's own clocks.
func NewSystemClock() Clock { return systemClock{origin: time.Now()} }

type systemClock struct{ origin time.Time }

func (c systemClock) Now() (time.Time, time.Duration) {
	t := time.Now()
	return t.Round(0), t.Sub(c.origin)
}
