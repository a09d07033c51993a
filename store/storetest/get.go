package storetest

import (
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

func testGet(t *testing.T, h Harness) {
	t.Run("NotFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		_, err := b.store.Get(t.Context(), name(t))
		require.ErrorIs(t, err, store.ErrNotFound)
	})

	t.Run("NewTenureNewAcquiredAt", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		first := b.acquire(t, name(t), testutil.Holder(t, "first"), longTTL)
		before := b.get(t, first.Name)
		b.release(t, first)
		require.True(t, before.AcquiredAt.Equal(b.get(t, first.Name).AcquiredAt), "release keeps the tenure's start")

		second := b.acquire(t, first.Name, testutil.Holder(t, "second"), longTTL)
		after := b.requireHeld(t, second, 1)
		require.False(t, after.AcquiredAt.Before(before.AcquiredAt), "a later tenure does not begin earlier")
	})

	t.Run("List", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		lister, ok := b.store.(store.Lister)
		if !ok {
			t.Skipf("storetest: %T does not implement store.Lister", b.store)
		}
		empty, err := lister.List(t.Context())
		require.NoError(t, err)
		require.Empty(t, empty, "a fresh store lists nothing")

		prefix := name(t)
		holder := testutil.Holder(t, "holder")
		expired := b.acquire(t, prefix+"_d", holder, b.expiring())
		held := b.acquire(t, prefix+"_c", holder, longTTL)
		released := b.acquire(t, prefix+"_a", holder, longTTL)
		b.release(t, released)
		renewed := b.acquire(t, prefix+"_b", holder, longTTL)
		require.True(t, b.renew(t, renewed, longTTL).Renewed)
		b.waitExpiry(t, expired.Remaining)

		records, err := lister.List(t.Context())
		require.NoError(t, err)
		want := []struct {
			grant store.Grant
			state store.State
			seq   int64
		}{
			{released, store.StateReleased, 1},
			{renewed, store.StateHeld, 2},
			{held, store.StateHeld, 1},
			{expired, store.StateExpired, 1},
		}
		require.Len(t, records, len(want))
		for i, w := range want {
			r := records[i]
			require.Equal(t, w.grant.Name, r.Name, "List orders by name")
			require.Equal(t, w.state, r.State, "lease %q", r.Name)
			require.Equal(t, holder, r.Holder, "lease %q names its last holder", r.Name)
			require.Equal(t, w.grant.Token, r.Token, "lease %q", r.Name)
			require.Equal(t, w.seq, r.Seq, "lease %q", r.Name)
			require.False(t, r.AcquiredAt.IsZero(), "lease %q", r.Name)
			if w.state == store.StateHeld {
				require.Positive(t, r.Remaining, "lease %q", r.Name)
			} else {
				require.Zero(t, r.Remaining, "lease %q", r.Name)
			}
		}
	})
}
