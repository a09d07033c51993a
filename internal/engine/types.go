package engine

import "time"

// Instant is one reading of both clocks. Mono never goes backwards; Wall may
// jump, and is compared with Mono only to detect suspension.
type Instant struct {
	Mono time.Duration
	Wall time.Time
}

// Reason says why a tenure ended.
type Reason int

const (
	ReasonExpiredLocally Reason = iota + 1
	ReasonRenewError
	ReasonSuperseded
	ReasonExpiredAtStore
	ReasonSeqMismatch
	ReasonSuspended
	ReasonRevoked
	ReasonProgressStalled
	ReasonReleased
	ReasonStoreClockAhead
)

// Releasable reports whether a tenure that ended for r may still be this
// process's alone at the store, so that its owner releases it once the work
// under it has stopped. After a moved chain, a suspension or a revoke this
// process may be a copy whose twin holds the lease; after a takeover or an
// expiry at the store there is nothing left to release.
func (r Reason) Releasable() bool {
	switch r {
	case ReasonExpiredLocally, ReasonRenewError, ReasonProgressStalled, ReasonReleased, ReasonStoreClockAhead:
		return true
	}
	return false
}
