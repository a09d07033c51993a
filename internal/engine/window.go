package engine

import "time"

// Window is the span in which a tenure may be trusted: from the send time of
// the last renewal seen to succeed (Anchor) to the local Deadline.
type Window struct {
	Anchor   Instant
	Deadline time.Duration
}

// Check returns 0 while the tenure may be trusted at now, and otherwise why
// not: the deadline passed, or the wall and monotonic clocks disagree about
// the time since Anchor by more than tolerance (the process was suspended).
// The engine applies the same rule on every step; a holder's token reads
// apply it in between.
func (w Window) Check(now Instant, tolerance time.Duration) Reason {
	wall := time.Duration(now.Wall.UnixNano() - w.Anchor.Wall.UnixNano())
	skew := wall - (now.Mono - w.Anchor.Mono)
	switch {
	case skew > tolerance || skew < -tolerance:
		return ReasonSuspended
	case now.Mono >= w.Deadline:
		return ReasonExpiredLocally
	}
	return 0
}
