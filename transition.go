package tenure

import (
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/internal/engine"
)

// TransitionKind says whether a tenure began or ended.
type TransitionKind int

const (
	// TransitionAcquired: a new tenure began, with a new token.
	TransitionAcquired TransitionKind = iota + 1
	// TransitionLost: a tenure ended; Reason says why.
	TransitionLost
)

// String returns "acquired" or "lost".
func (k TransitionKind) String() string {
	switch k {
	case TransitionAcquired:
		return "acquired"
	case TransitionLost:
		return "lost"
	}
	return fmt.Sprintf("TransitionKind(%d)", int(k))
}

// LossReason says why a tenure ended. Every reason but LossReleased and
// LossClosed means the holder may have been superseded: stop writing.
type LossReason int

const (
	// LossExpiredLocally: no renewal was seen succeed before the local
	// deadline (the store's expiry less the safety margin and grace).
	LossExpiredLocally LossReason = iota + 1
	// LossRenewError: a renewal failed or timed out; its outcome is unknown,
	// and unknown is no (promise P3).
	LossRenewError
	// LossSuperseded: the store reports another holder or token.
	LossSuperseded
	// LossExpiredAtStore: the store reports the tenure expired.
	LossExpiredAtStore
	// LossSeqMismatch: the store reports this holder and token with a
	// renewal seq this client did not produce: a clone of this process (a
	// snapshot restored twice, a fork) renewed it (promise P6).
	LossSeqMismatch
	// LossSuspended: the wall and monotonic clocks disagree, or a timer
	// fired far too late: the process was paused.
	LossSuspended
	// LossRevoked: [Client.Revoke] was called.
	LossRevoked
	// LossProgressStalled: the work did not call [Lease.Progress] within
	// Config.ProgressTimeout.
	LossProgressStalled
	// LossReleased: the holder released the lease.
	LossReleased
	// LossClosed: [Client.Run] returned; its leases were released.
	LossClosed
	// LossStoreClockAhead: between two renewals the store's wall clock
	// advanced more than this host's monotonic clock, by more than
	// Config.SuspendTolerance: the store's clock stepped forward (or runs
	// fast) and expires its leases early, before this holder's deadline.
	// Only stores whose expiry runs on a wall clock report their time
	// (see store.Grant.At).
	LossStoreClockAhead
)

var lossReasonNames = map[LossReason]string{
	LossExpiredLocally:  "expired locally",
	LossRenewError:      "renew error",
	LossSuperseded:      "superseded",
	LossExpiredAtStore:  "expired at store",
	LossSeqMismatch:     "clone or seq mismatch",
	LossSuspended:       "suspension detected",
	LossRevoked:         "revoked",
	LossProgressStalled: "progress stalled",
	LossReleased:        "released",
	LossClosed:          "client closed",
	LossStoreClockAhead: "store clock ran ahead",
}

// releasable reports whether a tenure that ended for r may still be this
// process's alone at the store (see [engine.Reason.Releasable]).
func (r LossReason) releasable() bool {
	if r == LossClosed {
		return true
	}
	for er, lr := range lossReasons {
		if lr == r {
			return er.Releasable()
		}
	}
	return false
}

// String describes the reason in a few words.
func (r LossReason) String() string {
	if s, ok := lossReasonNames[r]; ok {
		return s
	}
	return fmt.Sprintf("LossReason(%d)", int(r))
}

var lossReasons = map[engine.Reason]LossReason{
	engine.ReasonExpiredLocally:  LossExpiredLocally,
	engine.ReasonRenewError:      LossRenewError,
	engine.ReasonSuperseded:      LossSuperseded,
	engine.ReasonExpiredAtStore:  LossExpiredAtStore,
	engine.ReasonSeqMismatch:     LossSeqMismatch,
	engine.ReasonSuspended:       LossSuspended,
	engine.ReasonRevoked:         LossRevoked,
	engine.ReasonProgressStalled: LossProgressStalled,
	engine.ReasonReleased:        LossReleased,
	engine.ReasonStoreClockAhead: LossStoreClockAhead,
}

// Transition is one change of leadership, as [Config.OnTransition] sees it.
type Transition struct {
	Name   string
	Kind   TransitionKind
	Holder Holder
	Token  Token
	// Reason and Err are set for TransitionLost; Err is a [*LostError].
	Reason LossReason
	Err    error
	// At is the wall-clock time the client noticed, for logs only.
	At time.Time
}

// LostError reports the end of a tenure. It matches [ErrLost].
type LostError struct {
	Name   string
	Token  Token
	Reason LossReason
	Cause  error // the store error behind LossRenewError, if any
}

func (e *LostError) Error() string {
	msg := fmt.Sprintf("tenure: lease %q with token %d lost: %s", e.Name, e.Token, e.Reason)
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Is matches [ErrLost].
func (e *LostError) Is(target error) bool { return target == ErrLost }

// Unwrap returns the store error behind the loss, if any.
func (e *LostError) Unwrap() error { return e.Cause }
