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
)
