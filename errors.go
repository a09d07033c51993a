package tenure

import (
	"errors"

	"github.com/tenure-dev/tenure/store"
)

// Errors a [Client], a store or a fence returns. Errors that carry data are
// types matching one of these; test with [errors.Is] and [errors.As]. All
// but ErrLost are defined by package store, for backends, and are the same
// values here.
var (
	// ErrHeld: the lease is held by another tenure. See [HeldError].
	ErrHeld = store.ErrHeld
	// ErrNotHeld: the caller does not hold the lease (anymore).
	ErrNotHeld = store.ErrNotHeld
	// ErrLost: leadership ended while work was running under it. See
	// [LostError].
	ErrLost = errors.New("tenure: leadership lost")
	// ErrFenced: a resource refused a write because a greater token was
	// already accepted. See [FencedError]. Never ignore it (promise P9).
	ErrFenced = store.ErrFenced
	// ErrUnavailable: the store could not be reached or did not answer in
	// time. The call may have been applied.
	ErrUnavailable = store.ErrUnavailable
	// ErrClosed: the store or client was closed.
	ErrClosed = store.ErrClosed
	// ErrNotRunning: [Client.Acquire], [Client.Campaign] or [Client.Do]
	// waited one TTL for the client's Run to start, and it did not: the
	// caller forgot go client.Run(ctx).
	ErrNotRunning = errors.New("tenure: the client's Run is not running")
	// ErrInvalid: the input was refused before anything was changed.
	ErrInvalid = store.ErrInvalid
	// ErrNotMigrated: the store's tables or functions are missing or older
	// than this library; run `tenure migrate` or the store's Migrate.
	ErrNotMigrated = store.ErrNotMigrated
)

// HeldError reports a lease held by another tenure: its holder, token,
// renewal seq and remaining time by the store's clock. It matches [ErrHeld].
type HeldError = store.HeldError

// FencedError reports a write refused by a fence. It matches [ErrFenced].
type FencedError = store.FencedError
