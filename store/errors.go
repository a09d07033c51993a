package store

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors a store (and a store-side fence) returns. Errors that
// carry data are types matching one of these; test with [errors.Is] and
// [errors.As]. Package tenure re-exports each under the same name.
var (
	// ErrHeld: the lease is held by another tenure. See [HeldError].
	ErrHeld = errors.New("tenure: lease is held")
	// ErrNotHeld: the caller does not hold the lease (anymore).
	ErrNotHeld = errors.New("tenure: lease is not held by this holder")
	// ErrNotFound: the store has never seen a lease of that name.
	ErrNotFound = errors.New("tenure: lease not found")
	// ErrFenced: a resource refused a write because a greater token was
	// already accepted. See [FencedError]. Never ignore it (promise P9).
	ErrFenced = errors.New("tenure: fenced: stale token")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time. The call may have been applied.
	ErrUnavailable = errors.New("tenure: store unavailable")
	// ErrClosed: the store or client was closed.
	ErrClosed = errors.New("tenure: closed")
	// ErrInvalid: the input was refused before anything was changed.
	ErrInvalid = errors.New("tenure: invalid argument")
	// ErrNotMigrated: the store's tables or functions are missing or older
	// than this library; run `tenure migrate` or the store's Migrate.
	ErrNotMigrated = errors.New("tenure: store schema is not migrated")
)

// HeldError reports a lease held by another tenure, with what the store
// said about it.
type HeldError struct {
	Name      string
	Holder    Holder
	Token     Token
	Seq       int64
	Remaining time.Duration // by the store's clock
	// Payload is what the holder published with its tenure (see
	// [AcquireParams.Payload]), so that a refused follower learns, say,
	// the leader's address in the same round trip.
	Payload string
	// Position is the caller's place in the line of followers (1: next),
	// when it asked to wait ([AcquireParams.Wait]) and the store keeps a
	// line; 0 otherwise.
	Position int
	// Next is the follower a just released lease is kept for (see
	// [Handoff]); Holder is then zero, and Remaining is the time left of
	// that hold.
	Next Holder
}

func (e *HeldError) Error() string {
	if e.Holder == (Holder{}) && e.Next != (Holder{}) {
		return fmt.Sprintf("tenure: lease %q was released and is kept for the next follower in line, %s, for another %s",
			e.Name, e.Next, e.Remaining.Round(time.Millisecond))
	}
	return fmt.Sprintf("tenure: lease %q is held by %s with token %d for another %s",
		e.Name, e.Holder, e.Token, e.Remaining.Round(time.Millisecond))
}

// Is matches [ErrHeld].
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// FencedError reports a write refused by a fence: Offered was lower than the
// Recorded token for Resource.
type FencedError struct {
	Resource string
	Offered  Token
	Recorded Token
}

func (e *FencedError) Error() string {
	return fmt.Sprintf("tenure: fenced: resource %q already accepted token %d; token %d is stale (its holder was superseded)",
		e.Resource, e.Recorded, e.Offered)
}

// Is matches [ErrFenced].
func (e *FencedError) Is(target error) bool { return target == ErrFenced }
