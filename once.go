package tenure

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"
)

// ErrWindowDone: the window already ran (or began and may not be retried).
// See [WindowDoneError] and [Client.Once].
var ErrWindowDone = store.ErrWindowDone

// WindowDoneError reports a window [Client.Once] did not run: its Window
// says who ran it, when (by the store's clock; the caller's on etcd) and
// with which token. It matches [ErrWindowDone].
type WindowDoneError = store.WindowDoneError

// Window is the record of a window (see [Client.Once]).
type Window = store.Window

// OnceWindow names the window of a [Client.Once] call: a Key the caller
// chooses (a date, a batch id, the schedule's intended time), or a Period
// from which the store derives the window on its own clock (its now
// divided by Period; never the caller's clock). Exactly one of them.
type OnceWindow struct {
	Key    string
	Period time.Duration
	// RetryFailed lets this run take over a window an earlier run began
	// and did not complete: it failed, or its tenure ended halfway (a
	// crash, a lost lease, a pause). Without it such a window is not run
	// again: the job ran at most once, perhaps partly.
	RetryFailed bool
}

// Once runs fn at most once per window of the lease name, across every
// process that calls it with the same store: it campaigns for the lease
// (waiting while another holds it), then asks the store, in one step that
// checks this tenure still holds the lease, to begin the window; only then
// does fn run. When fn returns nil while the tenure is still held, the
// window is recorded completed, in a step with the same check; otherwise
// failed. The lease is released when Once returns.
//
// A window that already ran is not run again: Once returns a
// [*WindowDoneError] (errors.Is(err, [ErrWindowDone])) naming who ran it,
// when and with which token. So does a window begun by an earlier run that
// did not complete, unless w.RetryFailed.
//
// A tenure that ends while fn runs (fn's ctx is cancelled, as with
// [Client.Do]) cannot record its window completed: the store refuses the
// finish of a tenure it no longer holds (errors.Is(err, [ErrNotHeld])),
// and the window stays begun and not completed, for the next run to take
// over with RetryFailed, or to refuse without. A paused process that
// wakes after another took the window over is fenced the same way.
//
// The store must implement [store.Windower] (PostgreSQL, SQLite, Redis,
// etcd, memstore); etcd refuses a Period (it has no clock a transaction
// can read): give it a Key.
func (c *Client) Once(ctx context.Context, name string, w OnceWindow, fn func(ctx context.Context, l *Lease) error) error {
	ws, ok := c.store.(store.Windower)
	if !ok {
		return fmt.Errorf("tenure: once: %w: the store %T records no windows (it does not implement store.Windower); use PostgreSQL, SQLite, Redis or etcd", ErrInvalid, c.store)
	}
	if err := store.ValidateWindow(name, w.Key, w.Period); err != nil {
		return fmt.Errorf("tenure: once: %w", err)
	}
	start := store.StartWindowParams{Name: name, Key: w.Key, Period: w.Period, RetryFailed: w.RetryFailed}
	if w.Key != "" {
		// A window known to have completed is refused without taking the
		// lease; any other is decided under it.
		if done, err := ws.GetWindow(ctx, name, w.Key); err == nil && done.State == store.WindowCompleted {
			return &WindowDoneError{Window: done}
		}
	}
	return c.Do(ctx, name, func(ctx context.Context, l *Lease) error {
		start.Holder, start.Token = l.Holder(), l.Token()
		begun, err := ws.StartWindow(ctx, start)
		if err != nil {
			return err
		}
		ferr := fn(ctx, l)
		outcome := store.WindowCompleted
		if ferr != nil || l.Err() != nil {
			outcome = store.WindowFailed
		}
		// The outcome is recorded even when ctx ended with fn, and waits
		// for the store no longer than a release would.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), maxReleaseWait)
		defer cancel()
		_, err = ws.FinishWindow(fctx, store.FinishWindowParams{
			Name: name, Key: begun.Key, Holder: begun.Holder, Token: begun.Token, Outcome: outcome})
		if err != nil {
			err = fmt.Errorf("tenure: once: the window %s ran but could not be recorded %s: %w",
				store.WindowKeyString(begun.Key), outcome, err)
		}
		return errors.Join(ferr, err)
	})
}
