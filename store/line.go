package store

import (
	"fmt"
	"time"
)

// Handoff is how long a store that keeps followers in line holds a
// released lease for the follower at the head of the line (see
// [AcquireParams.Wait]): meanwhile an acquisition by anyone else is
// refused with a [*HeldError] naming that follower in Next. The follower
// hears of the release and takes the lease within a round trip; the
// window only matters when it does not (it died while waiting), and then
// delays the handover by at most this much.
const Handoff = 250 * time.Millisecond

// NoticeKind says what a [Notice] announces.
type NoticeKind int

const (
	// NoticeChanged: the lease was released, taken over or expired at the
	// store (etcd announces an expiry so); the store does not say which, or
	// who is next. Every follower of the lease may try now.
	NoticeChanged NoticeKind = iota
	// NoticeReleased: the lease was released. Next names the follower it
	// is kept for, if the store keeps followers in line.
	NoticeReleased
	// NoticeAcquired: a new tenure began, for Holder, with Remaining left.
	NoticeAcquired
)

// String returns "changed", "released" or "acquired".
func (k NoticeKind) String() string {
	switch k {
	case NoticeChanged:
		return "changed"
	case NoticeReleased:
		return "released"
	case NoticeAcquired:
		return "acquired"
	}
	return fmt.Sprintf("NoticeKind(%d)", int(k))
}

// Notice is one announcement of a [Notifier]: lease Name changed hands. An
// empty Name says that announcements may have been lost (see
// [Notifier.Listen]).
type Notice struct {
	Name string
	Kind NoticeKind
	// Holder is the new tenure's holder (NoticeAcquired).
	Holder Holder
	// Remaining is the new tenure's time left by the store's clock when it
	// began (NoticeAcquired): its followers need not try before then,
	// unless they hear of a release.
	Remaining time.Duration
	// Next is the follower at the head of the line, for whom the store
	// keeps the released lease for [Handoff] when it keeps a hold
	// (NoticeReleased); zero when the store keeps no line or nobody waits.
	Next Holder
}
