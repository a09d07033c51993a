package engine

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Event is an input to [Engine.Step].
type Event interface{ event() }

// Tick wakes the engine. A tick from the caller's timer sets Timer and Due,
// the monotonic instant the timer was set for (from [Engine.Next]); a timer
// that fires far later than Due means the process was stopped.
type Tick struct {
	Timer bool
	Due   time.Duration
}

// Want asks for a lease. With Campaign the engine keeps trying until it is
// acquired or [Unwant] arrives; without it, it tries once and answers with
// [Acquired] or [AcquireFailed].
type Want struct {
	Name     string
	Campaign bool
}

// Unwant withdraws a Want that has not been granted yet.
type Unwant struct{ Name string }

// AcquireDone carries the answer to a [SendAcquire].
type AcquireDone struct {
	Name   string
	Holder store.Holder
	SentAt Instant
	// Exactly one of the following describes the outcome.
	Grant *store.Grant     // acquired
	Held  *store.HeldError // held by someone (possibly this very identity), or kept for the next in line
	Err   error            // failed; the outcome is unknown
	// Permanent marks an Err that retrying cannot cure (bad input, a store
	// that is not set up): a campaign ends with it instead of backing off.
	Permanent bool
}

// RenewDone carries the answer to a [SendRenew].
type RenewDone struct {
	SentAt  Instant
	Items   []store.RenewParams
	Results []store.RenewResult // one per item, unless Err is set
	Err     error
}

// ReleaseDone answers a [SendRelease]: the call returned Err (nil when the
// store released the lease). Either way the name is free for new attempts.
type ReleaseDone struct {
	Name  string
	Token store.Token
	Err   error
}

// CheckDone answers a [SendCheck]: the lease as the store reports it, or
// the error that kept it from answering.
type CheckDone struct {
	Name   string
	Token  store.Token
	Record store.Record
	Err    error
}

// Notified reports what the store announced of a lease (see
// [store.Notice]); an empty Name means the store's listener has just
// (re)subscribed and may have missed announcements, so every waiting
// campaign looks again.
type Notified struct{ store.Notice }

// Progress reports that the work under a tenure made progress at At.
type Progress struct {
	Name  string
	Token store.Token
	At    Instant
}

// ChainWriteBegin asks to start a fenced write that advances the renewal
// chain (a strict check). Such writes and the tenure's renewals never
// overlap, and neither do two such writes: the engine answers each with
// [ChainWriteGranted], in the order asked, once no renewal and no other
// chain write of the tenure is in flight and no renewal is due, and sends
// no renewal for it until the granted write has ended. A renewal or write
// that then finds the chain moved on can only have met a clone.
type ChainWriteBegin struct {
	Name  string
	Token store.Token
}

// ChainWriteEnd reports that a chain write ended. Seq is the seq its
// transaction committed, or 0 when it did not commit (or nobody knows).
type ChainWriteEnd struct {
	Name  string
	Token store.Token
	Seq   int64
}

// Release ends a tenure on its owner's request and gives the lease back at
// the store: at once when the tenure is still held, or after a loss, once
// the work under it has stopped. The engine answers with [SendRelease] (or
// lets a release of the same tenure already in flight answer), and holds
// back new attempts for the name until the [ReleaseDone].
type Release struct {
	Name   string
	Holder store.Holder
	Token  store.Token
}

// Drop ends a tenure without giving it back at the store: one that the
// caller found expired or suspended on its own hot path (a token read), so
// that it is never reported held again, or one whose work must stop before
// its owner gives it back with [Release] (a client shutting down).
type Drop struct {
	Name   string
	Token  store.Token
	Reason Reason
}

// Adopt makes the engine hold a tenure exactly as another process holds
// it, identity included, trusted for Remaining from now: what a snapshot
// of that process restored a second time would believe. It exists for
// fault injection; the engine answers with [Acquired], or with
// [AcquireFailed] (Busy) when it already has the name.
type Adopt struct {
	Name      string
	Holder    store.Holder
	Token     store.Token
	Seq       int64
	Remaining time.Duration
}

// Granted hands the engine a tenure its caller acquired at the store
// itself, through a call the engine did not send (one slot of several,
// taken in one store step: see store.SlotAcquirer), sent at SentAt by
// Holder. The engine treats it as the answer to a one-shot [Want] of
// Grant.Name: it answers with [Acquired], or gives the grant back when it
// cannot trust it (an identity retired meanwhile, a reply too late). When
// it already tracks the name it answers [AcquireFailed] (Busy) and gives
// the grant back.
type Granted struct {
	Holder store.Holder
	SentAt Instant
	Grant  store.Grant
}

// Revoke drops every tenure and regenerates the identity; campaigns in
// progress go on with the new identity.
type Revoke struct{}

func (Tick) event()            {}
func (Want) event()            {}
func (Unwant) event()          {}
func (AcquireDone) event()     {}
func (RenewDone) event()       {}
func (CheckDone) event()       {}
func (ReleaseDone) event()     {}
func (Notified) event()        {}
func (Progress) event()        {}
func (ChainWriteBegin) event() {}
func (ChainWriteEnd) event()   {}
func (Release) event()         {}
func (Drop) event()            {}
func (Adopt) event()           {}
func (Granted) event()         {}
func (Revoke) event()          {}
