package storetest

import (
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

func testRelease(t *testing.T, h Harness) {
	t.Run("KeepsCounter", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.acquire(t, n, testutil.Holder(t, "holder"), longTTL)
		b.release(t, first)

		r := b.get(t, n)
		require.Equal(t, store.StateReleased, r.State)
		require.Equal(t, first.Holder, r.Holder, "a released lease still names its last holder")
		require.Equal(t, first.Token, r.Token, "release keeps the token")
		require.Zero(t, r.Remaining)

		again := b.acquire(t, n, first.Holder, longTTL)
		require.Greater(t, again.Token, first.Token, "the same holder's next tenure gets a greater token")
		b.release(t, again)

		other := b.acquire(t, n, testutil.Holder(t, "other"), longTTL)
		require.Greater(t, other.Token, again.Token, "another holder's next tenure gets a greater token")
		b.requireHeld(t, other, 1)
	})

	t.Run("AfterRenewal", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		require.True(t, b.renew(t, g, longTTL).Renewed)

		b.release(t, g)
		require.Equal(t, store.StateReleased, b.get(t, g.Name).State)
	})

	t.Run("WrongToken", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		for _, token := range []store.Token{g.Token + 1, g.Token + 1000} {
			err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: token})
			require.ErrorIs(t, err, store.ErrNotHeld, "release with token %d of a tenure with token %d", token, g.Token)
		}
		if g.Token > 1 {
			err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token - 1})
			require.ErrorIs(t, err, store.ErrNotHeld)
		}
		b.requireHeld(t, g, 1)
	})

	t.Run("WrongHolder", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		for _, other := range otherHolders(t, g) {
			err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: other, Token: g.Token})
			require.ErrorIs(t, err, store.ErrNotHeld, "release by %s of a lease held by %s", other, g.Holder)
		}
		b.requireHeld(t, g, 1)
	})

	t.Run("Twice", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		b.release(t, g)

		err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token})
		require.ErrorIs(t, err, store.ErrNotHeld, "a second release finds the lease not held")
		r := b.get(t, g.Name)
		require.Equal(t, store.StateReleased, r.State)
		require.Equal(t, g.Token, r.Token)
	})

	t.Run("Absent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)

		err := b.store.Release(t.Context(), store.ReleaseParams{Name: n, Holder: testutil.Holder(t, "holder"), Token: 1})
		require.ErrorIs(t, err, store.ErrNotHeld)
		b.requireAbsent(t, n, "a refused release creates nothing")
	})

	t.Run("AfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		g := b.expired(t, name(t), testutil.Holder(t, "holder"))

		err := b.store.Release(t.Context(), store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token})
		require.ErrorIs(t, err, store.ErrNotHeld, "an expired lease is no longer held")
		require.Equal(t, store.StateExpired, b.get(t, g.Name).State)
	})

	// A late retry of an old tenure's release must not end the tenure that
	// followed, even when both have the same holder.
	t.Run("StaleTokenAfterNewTenure", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		old := b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
		b.release(t, old)
		current := b.acquire(t, old.Name, old.Holder, longTTL)

		err := b.store.Release(t.Context(), store.ReleaseParams{Name: old.Name, Holder: old.Holder, Token: old.Token})
		require.ErrorIs(t, err, store.ErrNotHeld)
		b.requireHeld(t, current, 1)
	})
}
