package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// Faults is how a harness fails the server under a store for the suite's
// Faults area, or why it cannot. Every fault is either injected (its
// function in the [Fault] that NewStore returns is set) or declined with a
// reason here; a harness that does neither fails the suite, so that no
// backend passes by saying nothing.
type Faults struct {
	// NewStore returns a store, as [Harness.NewStore] does, and the Fault
	// that fails its server without disturbing the harness's other
	// stores: a proxy of its own between the store and the server, or a
	// server of its own. Nil when every fault is declined.
	NewStore func(tb testing.TB) (store.Store, Fault)

	// NoCut is why the harness cannot cut a store off from its server
	// (there is no server: the store is a file in this process); empty
	// when it can, and then [Fault.Cut] and [Fault.Restore] are set.
	NoCut string

	// NoRestart is why the harness cannot restart a store's server (the
	// tests share the machine's server, which other tests use meanwhile);
	// empty when it can, and then [Fault.Restart] is set.
	NoRestart string
}

// Fault fails the server under one store made by [Faults.NewStore].
type Fault struct {
	// Cut partitions the store from its server until Restore: every open
	// connection is closed, and no byte of a new one gets through, so that
	// a call fails at once or hangs until its deadline. It returns once
	// the partition is in place.
	Cut func(tb testing.TB)

	// Restore ends Cut: the store's connections reach the server again.
	Restore func(tb testing.TB)

	// Kill crashes the store's server and leaves it down until Restart.
	// Nil for a store with no server of its own to crash (a file this
	// process opens), whose Restart is a restart of the process.
	Kill func(tb testing.TB)

	// Restart crashes the store's server if it runs and starts it again
	// on the data it kept, returns once the server answers, and returns
	// the store to go on with: the same store, whose client reconnects by
	// itself, or, for a store with no server, a new one opened on the
	// same data (a restart of the process).
	Restart func(tb testing.TB) store.Store
}

const (
	// cutDeadline is the deadline of each call made while the store is
	// cut off from its server.
	cutDeadline = time.Second
	// deadlineSlack is how long after its deadline a call made while the
	// store is cut off may take to return: the time a loaded machine takes
	// to schedule it, not time the store may spend waiting.
	deadlineSlack = 5 * time.Second
	// recoverTimeout bounds the wait for a store to answer again after a
	// restore or a restart: clients reconnect with backoff.
	recoverTimeout = 30 * time.Second
)

func testFaults(t *testing.T, h Harness) {
	f := h.Capabilities().Faults

	t.Run("InjectedOrDeclined", func(t *testing.T) {
		t.Parallel()
		if f.NewStore == nil {
			require.NotEmpty(t, f.NoCut, "Capabilities.Faults has no NewStore: set it, or say in NoCut why the harness cannot cut a store off from its server")
			require.NotEmpty(t, f.NoRestart, "Capabilities.Faults has no NewStore: set it, or say in NoRestart why the harness cannot restart a store's server")
		}
	})

	t.Run("ContextDone", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		for _, c := range b.calls(g) {
			err := c.call(ctx)
			require.ErrorIs(t, err, store.ErrUnavailable, "%s with a context already done", c.name)
			require.ErrorIs(t, err, context.Canceled, "%s with a context already done wraps the context's error", c.name)
		}
	})

	t.Run("Cut", func(t *testing.T) {
		t.Parallel()
		if f.NoCut != "" {
			t.Skip("storetest: the harness declines to cut a store off: " + f.NoCut)
		}
		b, fault := setupFaulty(t, h)
		require.NotNil(t, fault.Cut, "Faults.NoCut is empty but Fault.Cut is nil: inject the cut, or say in NoCut why not")
		require.NotNil(t, fault.Restore, "Fault.Cut is set but Fault.Restore is nil")
		g := b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
		var heard *testutil.Notifications
		if b.caps.Notify {
			heard = b.listen(t)
		}

		fault.Cut(t)
		restored := false
		t.Cleanup(func() {
			if !restored {
				fault.Restore(t)
			}
		})
		b.requireUnavailable(t, g, "cut off from its server")

		fault.Restore(t)
		restored = true
		b.answers(t)
		if heard != nil {
			b.hears(t, heard)
		}
	})

	t.Run("Restart", func(t *testing.T) {
		t.Parallel()
		if f.NoRestart != "" {
			t.Skip("storetest: the harness declines to restart a store's server: " + f.NoRestart)
		}
		b, fault := setupFaulty(t, h)
		require.NotNil(t, fault.Restart, "Faults.NoRestart is empty but Fault.Restart is nil: inject the restart, or say in NoRestart why not")
		g := b.acquire(t, name(t), testutil.Holder(t, "before"), longTTL)
		b.release(t, g)
		var heard *testutil.Notifications
		if b.caps.Notify {
			heard = b.listen(t)
		}

		if fault.Kill != nil {
			held := b.acquire(t, name(t)+"_held", testutil.Holder(t, "holder"), longTTL)
			fault.Kill(t)
			b.requireUnavailable(t, held, "down")
		}
		s := fault.Restart(t)
		require.NotNil(t, s, "Fault.Restart returned no store")
		reopened := s != b.store
		if reopened {
			b = &bundle{store: s, caps: b.caps}
		}
		b.answers(t)
		next := b.acquireAgain(t, g.Name, testutil.Holder(t, "after"))
		require.Greater(t, next.Token, g.Token, "the first tenure after the server restarted has a token greater than every one before (P2)")
		if reopened && b.caps.Notify {
			heard = b.listen(t)
		}
		if heard != nil {
			b.hears(t, heard)
		}
	})
}

// setupFaulty is setup on a store that can be failed.
func setupFaulty(t *testing.T, h Harness) (*bundle, Fault) {
	t.Helper()
	caps := h.Capabilities()
	require.NotNil(t, caps.Faults.NewStore, "Capabilities.Faults injects a fault but has no NewStore")
	s, fault := caps.Faults.NewStore(t)
	require.NotNil(t, s, "Faults.NewStore returned no store")
	caps.MinTTL = max(caps.MinTTL, store.MinTTLOf(s))
	return &bundle{store: s, caps: caps}, fault
}

// call is one call of the store's API, made for its error.
type call struct {
	name string
	call func(ctx context.Context) error
}

// calls returns a call of every method of the store's API, optional
// interfaces included, on the tenure g (and, for Acquire, on another
// name).
func (b *bundle) calls(g store.Grant) []call {
	renew := store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
	release := store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}
	acquire := store.AcquireParams{Name: g.Name + "_other", Holder: g.Holder, TTL: longTTL}
	cs := []call{
		{"Acquire", func(ctx context.Context) error { _, err := b.store.Acquire(ctx, acquire); return err }},
		{"Renew", func(ctx context.Context) error { _, err := b.store.Renew(ctx, []store.RenewParams{renew}); return err }},
		{"Get", func(ctx context.Context) error { _, err := b.store.Get(ctx, g.Name); return err }},
	}
	if s, ok := b.store.(store.Lister); ok {
		cs = append(cs, call{"List", func(ctx context.Context) error { _, err := s.List(ctx); return err }})
	}
	if s, ok := b.store.(store.BatchAcquirer); ok {
		cs = append(cs, call{"AcquireBatch", func(ctx context.Context) error {
			_, err := s.AcquireBatch(ctx, []store.AcquireParams{acquire})
			return err
		}})
	}
	if s, ok := b.store.(store.Historian); ok {
		cs = append(cs, call{"History", func(ctx context.Context) error {
			_, err := s.History(ctx, store.HistoryParams{Name: g.Name})
			return err
		}})
	}
	if s, ok := b.store.(store.BatchReleaser); ok {
		cs = append(cs, call{"ReleaseBatch", func(ctx context.Context) error {
			_, err := s.ReleaseBatch(ctx, []store.ReleaseParams{release})
			return err
		}})
	}
	if s, ok := b.store.(store.ForceReleaser); ok {
		cs = append(cs, call{"ForceRelease", func(ctx context.Context) error { return s.ForceRelease(ctx, release) }})
	}
	return append(cs, call{"Release", func(ctx context.Context) error { return b.store.Release(ctx, release) }})
}

// requireUnavailable checks that every call on the tenure g fails with
// [store.ErrUnavailable] by its deadline while the store's server is in
// the state named.
func (b *bundle) requireUnavailable(t *testing.T, g store.Grant, state string) {
	t.Helper()
	for _, c := range b.calls(g) {
		ctx, cancel := context.WithTimeout(t.Context(), cutDeadline)
		start := time.Now()
		err := c.call(ctx)
		took := time.Since(start)
		cancel()
		require.ErrorIs(t, err, store.ErrUnavailable, "%s while the store's server is %s", c.name, state)
		require.Less(t, took, cutDeadline+deadlineSlack, "%s while the store's server is %s returned %s after its deadline of %s", c.name, state, took-cutDeadline, cutDeadline)
	}
}

// answers waits until the store answers a Get again after a fault.
func (b *bundle) answers(t *testing.T) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(recoverTimeout); time.Now().Before(deadline); {
		if err = b.tryGet(t, name(t)+"_probe"); err == nil {
			return
		}
		require.ErrorIs(t, err, store.ErrUnavailable, "Get after a fault")
	}
	t.Fatalf("the store did not answer within %s of the fault's end: %v", recoverTimeout, err)
}

// tryGet asks for name within [cutDeadline]; a lease that is not found is
// an answer.
func (b *bundle) tryGet(t *testing.T, name string) error {
	ctx, cancel := context.WithTimeout(t.Context(), cutDeadline)
	defer cancel()
	_, err := b.store.Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// acquireAgain acquires name for h, trying again while the store is
// unavailable (a client may find a dead connection or two in its pool
// after a restart).
func (b *bundle) acquireAgain(t *testing.T, name string, h store.Holder) store.Grant {
	t.Helper()
	var err error
	for deadline := time.Now().Add(recoverTimeout); time.Now().Before(deadline); {
		var g store.Grant
		g, err = b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: longTTL})
		if err == nil {
			return g
		}
		// An acquisition whose reply was lost may have been applied.
		if held := (*store.HeldError)(nil); errors.As(err, &held) && held.Holder == h {
			return store.Grant{Name: name, Holder: h, Token: held.Token, Seq: held.Seq, Remaining: held.Remaining}
		}
		require.ErrorIs(t, err, store.ErrUnavailable, "acquire %q by %s after the server restarted", name, h)
	}
	t.Fatalf("no acquisition within %s of the restart: %v", recoverTimeout, err)
	return store.Grant{}
}

// hears checks that the listener r hears releases again after a fault:
// it releases a lease of its own until r reports it.
func (b *bundle) hears(t *testing.T, r *testutil.Notifications) {
	t.Helper()
	holder := testutil.Holder(t, "after")
	for i, deadline := 0, time.Now().Add(recoverTimeout); time.Now().Before(deadline); i++ {
		// A lease of its own each round: an acquisition that failed may
		// have been applied.
		warmup := fmt.Sprintf("%s_after%d", name(t), i)
		g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: warmup, Holder: holder, TTL: longTTL})
		if err == nil {
			err = b.store.Release(t.Context(), store.ReleaseParams{Name: warmup, Holder: holder, Token: g.Token})
		}
		if err != nil {
			require.ErrorIs(t, err, store.ErrUnavailable, "acquire and release %q after a fault", warmup)
		}
		if r.Wait(warmup, warmupWait) {
			return
		}
	}
	t.Fatalf("the listener heard no release within %s of the fault's end: a Listen reconnects by itself", recoverTimeout)
}
