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

// testReleaseBatch checks [store.BatchReleaser] where a store offers it:
// one call releases what Release would, answers in order, and keeps every
// lease's token counter.
func testReleaseBatch(t *testing.T, h Harness) {
	batch := func(t *testing.T) (*bundle, store.BatchReleaser) {
		t.Helper()
		b := setup(t, h)
		br, ok := b.store.(store.BatchReleaser)
		if !ok {
			t.Skipf("storetest: %T does not implement store.BatchReleaser", b.store)
		}
		return b, br
	}

	t.Run("InOrder", func(t *testing.T) {
		t.Parallel()
		b, br := batch(t)
		holder, other := testutil.Holder(t, "holder"), testutil.Holder(t, "other")
		n := name(t)
		held := b.acquire(t, n+"-held", holder, longTTL)
		stale := b.acquire(t, n+"-stale", holder, longTTL)
		foreign := b.acquire(t, n+"-foreign", other, longTTL)
		gone := b.acquire(t, n+"-gone", holder, longTTL)
		b.release(t, gone)
		last := b.acquire(t, n+"-last", holder, longTTL)

		errs, err := br.ReleaseBatch(t.Context(), []store.ReleaseParams{
			{Name: held.Name, Holder: holder, Token: held.Token},
			{Name: stale.Name, Holder: holder, Token: stale.Token + 1000},
			{Name: foreign.Name, Holder: holder, Token: foreign.Token},
			{Name: gone.Name, Holder: holder, Token: gone.Token},
			{Name: n + "-never", Holder: holder, Token: 1},
			{Name: last.Name, Holder: holder, Token: last.Token},
		})
		require.NoError(t, err)
		require.Len(t, errs, 6)
		require.NoError(t, errs[0], "a held tenure is released")
		for i, what := range []string{"a wrong token", "another holder's lease", "a released lease", "a lease never taken"} {
			require.ErrorIs(t, errs[i+1], store.ErrNotHeld, what)
		}
		require.NoError(t, errs[5], "the batch goes on after refusals")

		for _, g := range []store.Grant{held, last} {
			r := b.get(t, g.Name)
			require.Equal(t, store.StateReleased, r.State, g.Name)
			require.Equal(t, g.Token, r.Token, "release keeps the token")
			again := b.acquire(t, g.Name, other, longTTL)
			require.Greater(t, again.Token, g.Token, "the next tenure of %q gets a greater token", g.Name)
		}
		b.requireHeld(t, stale, 1)
		b.requireHeld(t, foreign, 1)
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		_, br := batch(t)
		errs, err := br.ReleaseBatch(t.Context(), nil)
		require.NoError(t, err)
		require.Empty(t, errs)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b, br := batch(t)
		g := b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
		p := store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}
		for what, ps := range map[string][]store.ReleaseParams{
			"a name twice":  {p, p},
			"a zero token":  {p, {Name: g.Name + "-x", Holder: g.Holder}},
			"an empty name": {{Holder: g.Holder, Token: 1}, p},
		} {
			errs, err := br.ReleaseBatch(t.Context(), ps)
			require.ErrorIs(t, err, store.ErrInvalid, what)
			require.Nil(t, errs, what)
		}
		b.requireHeld(t, g, 1)
	})
}
