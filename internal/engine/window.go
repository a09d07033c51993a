package engine

import "time"

// Window is the span in which a tenure may be trusted: from the send time of
// the last renewal seen to succeed (its anchor) to the local Deadline.
type Window struct {
	// offset is the anchor's wall reading in Unix nanoseconds minus its
	// monotonic reading. Two readings taken together differ by the same
	// offset until one of the clocks jumps, so Check compares offsets and
	// reads the anchor's wall clock once, here, not on every call.
	offset   int64
	Deadline time.Duration
}

// NewWindow returns the window from anchor to deadline.
func NewWindow(anchor Instant, deadline time.Duration) Window {
	return Window{offset: anchor.Wall.UnixNano() - int64(anchor.Mono), Deadline: deadline}
}

// Check returns 0 while the tenure may be trusted at now, and otherwise why
// not: the deadline passed, or the wall and monotonic clocks disagree about
// the time since the anchor by more than tolerance (the process was
// suspended). The engine applies the same rule on every step; a holder's
// token reads apply it in between.
func (w Window) Check(now Instant, tolerance time.Duration) Reason {
	skew := time.Duration(now.Wall.UnixNano() - int64(now.Mono) - w.offset)
	switch {
	case skew > tolerance || skew < -tolerance:
		return ReasonSuspended
	case now.Mono >= w.Deadline:
		return ReasonExpiredLocally
	}
	return 0
}
