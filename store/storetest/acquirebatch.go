package storetest

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

func testAcquireBatch(t *testing.T, h Harness) {
	batch := func(t *testing.T) (*bundle, store.BatchAcquirer) {
		t.Helper()
		b := setup(t, h)
		ba, ok := b.store.(store.BatchAcquirer)
		if !ok {
			t.Skipf("storetest: %T does not implement store.BatchAcquirer", b.store)
		}
		return b, ba
	}

	t.Run("InOrder", func(t *testing.T) {
		t.Parallel()
		b, ba := batch(t)
		me, other := testutil.Holder(t, "me"), testutil.Holder(t, "other")
		n := name(t)
		held := b.acquire(t, n+"-held", other, longTTL)
		released := b.acquire(t, n+"-released", other, longTTL)
		b.release(t, released)

		res, err := ba.AcquireBatch(t.Context(), []store.AcquireParams{
			{Name: n + "-new", Holder: me, TTL: longTTL, Payload: "addr-1"},
			{Name: held.Name, Holder: me, TTL: longTTL, Wait: true},
			{Name: released.Name, Holder: me, TTL: longTTL},
		})
		require.NoError(t, err)
		require.Len(t, res, 3)

		require.NoError(t, res[0].Err, "a new lease is granted")
		g := res[0].Grant
		require.Equal(t, n+"-new", g.Name)
		require.Equal(t, me, g.Holder)
		require.Equal(t, int64(1), g.Seq)
		require.Equal(t, "addr-1", g.Payload)
		b.requireFresh(t, longTTL, g.Remaining)
		b.requireHeld(t, g, 1)

		var he *store.HeldError
		require.ErrorAs(t, res[1].Err, &he, "a held lease is refused as Acquire refuses it")
		require.Equal(t, held.Name, he.Name)
		require.Equal(t, other, he.Holder)
		require.Equal(t, held.Token, he.Token)
		b.requireRemaining(t, longTTL, he.Remaining)
		if b.caps.Line {
			require.Equal(t, 1, he.Position, "a waiting entry of the batch is put in line")
		}

		require.NoError(t, res[2].Err, "the batch goes on after a refusal")
		require.Greater(t, res[2].Grant.Token, released.Token, "a released lease is taken with a greater token")
	})

	t.Run("Empty", func(t *testing.T) {
		t.Parallel()
		_, ba := batch(t)
		res, err := ba.AcquireBatch(t.Context(), nil)
		require.NoError(t, err)
		require.Empty(t, res)
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b, ba := batch(t)
		h := testutil.Holder(t, "holder")
		n := name(t)
		p := store.AcquireParams{Name: n, Holder: h, TTL: longTTL}
		for what, ps := range map[string][]store.AcquireParams{
			"a name twice":  {p, p},
			"a zero TTL":    {p, {Name: n + "-x", Holder: h}},
			"an empty name": {{Holder: h, TTL: longTTL}, p},
		} {
			res, err := ba.AcquireBatch(t.Context(), ps)
			require.ErrorIs(t, err, store.ErrInvalid, what)
			require.Nil(t, res, what)
		}
		b.requireAbsent(t, n, "an invalid batch changes nothing")
	})
}
