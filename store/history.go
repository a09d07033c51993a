package store

import (
	"context"
	"fmt"
	"time"
)

// Limits of a [Historian.History] call.
const (
	// DefaultHistoryLimit is how many events a History call returns when
	// [HistoryParams.Limit] is zero.
	DefaultHistoryLimit = 100
	// MaxHistoryLimit is the most events one History call returns.
	MaxHistoryLimit = 10_000
)

// Historian is implemented by stores that record how their leases moved:
// every new tenure and every release (and, for a [Windower], every window
// begun and finished), by the store's clock, kept for a
// retention the backend documents. It is for people ("who held
// nightly-billing at 03:00, with which token, and why did it move"):
// nothing decides on it. A renewal records nothing.
type Historian interface {
	// History returns the most recent p.Limit events at or after p.Since,
	// of the lease p.Name (of every lease when p.Name is empty), oldest
	// first.
	History(ctx context.Context, p HistoryParams) ([]HistoryEvent, error)
}

// ForceReleaser is implemented by stores that record an operator's forced
// release apart from a holder's own (see [Historian]). ForceRelease is
// [Store.Release], same compare-and-set, same outcome, recorded as
// [EventForceReleased].
type ForceReleaser interface {
	ForceRelease(ctx context.Context, p ReleaseParams) error
}

// HistoryParams asks for recorded events.
type HistoryParams struct {
	// Name is the lease whose events are wanted; empty means every lease.
	Name string
	// Since drops events recorded before it, by the store's clock. Zero
	// means everything the store keeps.
	Since time.Time
	// Limit is the most events returned, the most recent ones: 0 means
	// [DefaultHistoryLimit], at most [MaxHistoryLimit].
	Limit int
}

// historyEarliest and historyLatest bound a non-zero [HistoryParams.Since]:
// every backend can store and compare times in that range.
var (
	historyEarliest = time.Unix(0, 0).UTC()
	historyLatest   = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// Validate reports whether p is well formed.
func (p HistoryParams) Validate() error {
	if p.Name != "" {
		if err := ValidateName(p.Name); err != nil {
			return err
		}
	}
	if !p.Since.IsZero() && (p.Since.Before(historyEarliest) || p.Since.After(historyLatest)) {
		return fmt.Errorf("%w: history since %s is outside %d–%d; give a time in that range, or none for everything kept",
			ErrInvalid, p.Since.Format(time.RFC3339), historyEarliest.Year(), historyLatest.Year())
	}
	if p.Limit < 0 || p.Limit > MaxHistoryLimit {
		return fmt.Errorf("%w: history limit %d is outside 0–%d (0 means %d)",
			ErrInvalid, p.Limit, MaxHistoryLimit, DefaultHistoryLimit)
	}
	return nil
}

// EffectiveLimit returns p.Limit, or [DefaultHistoryLimit] when it is 0.
func (p HistoryParams) EffectiveLimit() int {
	if p.Limit == 0 {
		return DefaultHistoryLimit
	}
	return p.Limit
}

// EventKind says what a [HistoryEvent] records.
type EventKind int

const (
	// EventGranted: a new tenure began on a lease that was absent or
	// released.
	EventGranted EventKind = iota + 1
	// EventTakenOver: a new tenure began on a lease whose previous tenure
	// expired without a release (its holder stopped renewing).
	EventTakenOver
	// EventReleased: the holder released its tenure.
	EventReleased
	// EventForceReleased: an operator expired the tenure of whoever held
	// it ([ForceReleaser], `tenure release --force`).
	EventForceReleased
	// EventWindowStarted: a tenure began a window ([Windower]); when it
	// took over a window an earlier tenure began and did not complete,
	// that tenure is the previous one.
	EventWindowStarted
	// EventWindowCompleted and EventWindowFailed: the tenure that began a
	// window recorded its outcome.
	EventWindowCompleted
	EventWindowFailed
)

var eventKindNames = [...]string{
	EventGranted:         "granted",
	EventTakenOver:       "taken-over",
	EventReleased:        "released",
	EventForceReleased:   "force-released",
	EventWindowStarted:   "window-started",
	EventWindowCompleted: "window-completed",
	EventWindowFailed:    "window-failed",
}

// String returns "granted", "taken-over", "released", "force-released",
// "window-started", "window-completed" or "window-failed": the names
// backends store and the CLI prints.
func (k EventKind) String() string {
	if k >= EventGranted && int(k) < len(eventKindNames) {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// ParseEventKind returns the kind [EventKind.String] names.
func ParseEventKind(s string) (EventKind, error) {
	for k := EventGranted; int(k) < len(eventKindNames); k++ {
		if eventKindNames[k] == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("%w: %q is not a history event kind", ErrInvalid, s)
}

// HistoryEvent is one recorded change of a lease.
type HistoryEvent struct {
	Name string
	Kind EventKind
	// Holder and Token are the tenure the event is about: the new one for
	// [EventGranted] and [EventTakenOver], the ended one for
	// [EventReleased] and [EventForceReleased].
	Holder Holder
	Token  Token
	// PreviousHolder and PreviousToken name the tenure before a new one
	// ([EventGranted] after a release, [EventTakenOver]); zero for the
	// first tenure the store saw and for releases.
	PreviousHolder Holder
	PreviousToken  Token
	// At is when it happened, by the store's clock, in UTC.
	At time.Time
	// Window is the window key of the window events; empty for the others.
	Window string
}
