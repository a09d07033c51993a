package engine

import "time"

// Instant is one reading of both clocks. Mono never goes backwards; Wall may
// jump, and is compared with Mono only to detect suspension.
type Instant struct {
	Mono time.Duration
	Wall time.Time
}

// Holder identifies one holder instance.
type Holder struct {
	Label    string
	Instance string
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

// Grant is what the store reported about a lease.
type Grant struct {
	Holder    Holder
	Token     int64
	Seq       int64
	Remaining time.Duration
}

// RenewItem is one lease in a renewal batch.
type RenewItem struct {
	Name   string
	Holder Holder
	Token  int64
	Seq    int64
}

// RenewOutcome is the store's answer for one RenewItem.
type RenewOutcome struct {
	Renewed bool
	Grant   Grant
}
