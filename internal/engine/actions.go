package engine

import (
	"time"

	"github.com/tenure-dev/tenure/store"
)

// Action is an output of [Engine.Step] for the caller to carry out, in order.
type Action interface{ action() }

// SendAcquire asks the store for a new tenure. Answer with [AcquireDone]
// carrying the same Name and Holder, and SentAt: the action's, or a later
// instant taken before the request left (a caller that queues the action
// restamps it when it sends it). A tenure's trust window starts at SentAt,
// so it must not be later than the store's grant.
type SendAcquire struct {
	Name    string
	Holder  store.Holder
	TTL     time.Duration
	Payload string
	// Wait asks the store to keep the holder in line (a campaign; see
	// [store.AcquireParams.Wait]).
	Wait   bool
	SentAt Instant
}

// SendRenew renews every item in one round trip. Answer with [RenewDone]
// carrying the same Items and SentAt. Deadline is the earliest local
// deadline among the items: an answer after it is of no use.
type SendRenew struct {
	Items    []store.RenewParams
	SentAt   Instant
	Deadline time.Duration
}

// SendRelease releases a tenure at the store, best effort. Answer with
// [ReleaseDone] once the call returned, whatever it returned.
type SendRelease struct {
	Name   string
	Holder store.Holder
	Token  store.Token
}

// SendCheck asks the store who holds a lease now ([store.Store.Get]), for a
// held tenure whose lease the store announced as released or taken over.
// Answer with [CheckDone] carrying the same Name and Token.
type SendCheck struct {
	Name   string
	Holder store.Holder
	Token  store.Token
}

// Acquired reports a new tenure.
type Acquired struct {
	Name     string
	Holder   store.Holder
	Token    store.Token
	Seq      int64
	Anchor   Instant       // send time of the request that granted it
	Deadline time.Duration // local deadline on the monotonic clock
}

// Renewed reports a tenure's new seq, anchor and local deadline.
type Renewed struct {
	Name     string
	Token    store.Token
	Seq      int64
	Anchor   Instant
	Deadline time.Duration
}

// Lost reports the end of a tenure.
type Lost struct {
	Name   string
	Token  store.Token
	Reason Reason
	Err    error // the store error behind ReasonRenewError, if any
}

// AcquireFailed answers a one-shot [Want] that did not acquire, and a Want
// for a lease the engine already holds or is acquiring (Busy).
type AcquireFailed struct {
	Name string
	Held *store.HeldError // the current holder, when the lease is held
	Err  error            // the store error, when the store failed
	Busy bool
}

// ChainWriteGranted lets the first chain write waiting for the tenure
// start, presenting Seq.
type ChainWriteGranted struct {
	Name  string
	Token store.Token
	Seq   int64
}

// IdentityChanged reports a regenerated identity.
type IdentityChanged struct{ Holder store.Holder }

// Follow reports that the engine tracks lease Name from now on: hand it the
// store's announcements of the name ([Notified]). It comes before the
// engine acquires, renews or checks the name. A name already followed
// stays followed.
type Follow struct{ Name string }

// Unfollow reports that the engine no longer tracks lease Name: its
// announcements change nothing until a later Follow of the name. It comes
// last among the actions of the step that stopped tracking the name, and
// only when that step did not track it again.
type Unfollow struct{ Name string }

func (SendAcquire) action()       {}
func (SendRenew) action()         {}
func (SendCheck) action()         {}
func (SendRelease) action()       {}
func (Acquired) action()          {}
func (Renewed) action()           {}
func (Lost) action()              {}
func (AcquireFailed) action()     {}
func (ChainWriteGranted) action() {}
func (IdentityChanged) action()   {}
func (Follow) action()            {}
func (Unfollow) action()          {}
