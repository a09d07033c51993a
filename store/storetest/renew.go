package storetest

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// bigBatch is how many leases the large renew batch carries.
const bigBatch = 1_000

func testRenew(t *testing.T, h Harness) {
	t.Run("KeepsTokenAdvancesSeq", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		before := b.get(t, g.Name)

		for seq := int64(1); seq <= 3; seq++ {
			res := b.renew(t, store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: seq}, longTTL)
			require.True(t, res.Renewed, "renewal at seq %d", seq)
			require.Equal(t, g.Holder, res.Grant.Holder)
			require.Equal(t, g.Token, res.Grant.Token, "a renewal keeps the token")
			require.Equal(t, seq+1, res.Grant.Seq, "a renewal advances seq by exactly one")
			b.requireFresh(t, longTTL, res.Grant.Remaining)
		}
		r := b.requireHeld(t, g, 4)
		require.True(t, before.AcquiredAt.Equal(r.AcquiredAt), "a renewal does not start a new tenure")
	})

	t.Run("StoreTimeKeepsPace", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		sent := time.Now()
		g := b.acquire(t, name(t), testutil.Holder(t, "holder"), longTTL)
		res := b.renew(t, g, longTTL)
		elapsed := time.Since(sent)
		require.True(t, res.Renewed)
		if g.At.IsZero() {
			require.True(t, res.Grant.At.IsZero(), "a store that reports no time on a grant reports none on a renewal either")
			return
		}
		require.False(t, res.Grant.At.IsZero(), "a store that reports its time on a grant reports it on a renewal too")
		// Both readings fell between the acquire's send and the renewal's
		// reply: the engine relies on exactly this bound (store.Grant.At).
		between := res.Grant.At.Sub(g.At)
		require.GreaterOrEqual(t, between, time.Duration(0), "the store's clock went backwards between two calls")
		require.LessOrEqual(t, between, elapsed+time.Microsecond,
			"the store's clock advanced %s while %s passed here: wrong unit or origin", between, elapsed)
	})

	t.Run("RefreshesRemaining", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		res := b.renew(t, g, 2*longTTL)
		require.True(t, res.Renewed)
		b.requireFresh(t, 2*longTTL, res.Grant.Remaining)
		b.requireFresh(t, 2*longTTL, b.requireHeld(t, g, 2).Remaining)
	})

	t.Run("StaleSeq", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		require.True(t, b.renew(t, g, longTTL).Renewed)

		res := b.renew(t, g, longTTL)
		require.False(t, res.Renewed, "a renewal with a stale seq is a mismatch")
		require.Equal(t, g.Holder, res.Grant.Holder)
		require.Equal(t, g.Token, res.Grant.Token)
		require.Equal(t, int64(2), res.Grant.Seq, "a mismatch reports the current seq")
		b.requireRemaining(t, longTTL, res.Grant.Remaining)

		b.requireHeld(t, g, 2)
	})

	t.Run("FutureSeq", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		res := b.renew(t, store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: 2}, longTTL)
		require.False(t, res.Renewed)
		require.Equal(t, int64(1), res.Grant.Seq)
		b.requireHeld(t, g, 1)
	})

	t.Run("OtherHolder", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		for _, other := range append(otherHolders(t, g), store.Holder{Label: g.Holder.Label + "x", Instance: g.Holder.Instance}) {
			res := b.renew(t, store.Grant{Name: g.Name, Holder: other, Token: g.Token, Seq: g.Seq}, longTTL)
			require.False(t, res.Renewed, "renewal by %s of a lease held by %s", other, g.Holder)
			require.Equal(t, g.Holder, res.Grant.Holder, "the result names the real holder")
			require.Equal(t, g.Token, res.Grant.Token)
			require.Equal(t, int64(1), res.Grant.Seq)
		}
		b.requireHeld(t, g, 1)
	})

	t.Run("WrongToken", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)

		res := b.renew(t, store.Grant{Name: g.Name, Holder: g.Holder, Token: g.Token + 1, Seq: g.Seq}, longTTL)
		require.False(t, res.Renewed)
		require.Equal(t, g.Token, res.Grant.Token)
		b.requireHeld(t, g, 1)
	})

	t.Run("Absent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)

		res := b.renewOne(t, store.RenewParams{Name: n, Holder: testutil.Holder(t, "holder"), Token: 1, Seq: 1, TTL: longTTL})
		require.False(t, res.Renewed)
		require.Equal(t, store.Grant{Name: n}, res.Grant, "an absent lease has no holder, token, seq or time")

		b.requireAbsent(t, n, "a failed renewal creates nothing")
	})

	t.Run("AfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		g := b.expired(t, name(t), testutil.Holder(t, "holder"))

		b.requireNotRenewable(t, g, store.StateExpired, "an expired lease")
	})

	t.Run("AfterRelease", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		b.release(t, g)

		b.requireNotRenewable(t, g, store.StateReleased, "a released lease")
	})

	t.Run("EmptyBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		rs, err := b.store.Renew(t.Context(), nil)
		require.NoError(t, err)
		require.Empty(t, rs)
	})

	t.Run("Batch1000", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		prefix := name(t)
		holder := testutil.Holder(t, "holder")
		grants := make([]store.Grant, bigBatch)
		for i := range grants {
			grants[i] = b.acquire(t, fmt.Sprintf("%s_%04d", prefix, i), holder, longTTL)
		}
		rand.Shuffle(len(grants), func(i, j int) { grants[i], grants[j] = grants[j], grants[i] })
		ps := make([]store.RenewParams, len(grants))
		for i, g := range grants {
			ps[i] = store.RenewParams{Name: g.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, TTL: longTTL}
		}

		rs, err := b.store.Renew(t.Context(), ps)
		require.NoError(t, err)
		require.Len(t, rs, len(ps))
		for i, res := range rs {
			g := grants[i]
			require.Equal(t, g.Name, res.Grant.Name, "results come back in the order of the batch")
			require.True(t, res.Renewed, "lease %q", g.Name)
			require.Equal(t, g.Token, res.Grant.Token)
			require.Equal(t, int64(2), res.Grant.Seq)
		}
		b.requireHeld(t, grants[0], 2)
		b.requireHeld(t, grants[len(grants)-1], 2)
	})

	t.Run("MixedBatch", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		prefix := name(t)
		holder := testutil.Holder(t, "holder")
		other := testutil.Holder(t, "other")
		ok1 := b.acquire(t, prefix+"_ok1", holder, longTTL)
		stale := b.acquire(t, prefix+"_stale", holder, longTTL)
		require.True(t, b.renew(t, stale, longTTL).Renewed)
		taken := b.acquire(t, prefix+"_taken", other, longTTL)
		released := b.acquire(t, prefix+"_released", holder, longTTL)
		b.release(t, released)
		ok2 := b.acquire(t, prefix+"_ok2", holder, longTTL)

		ps := []store.RenewParams{
			{Name: stale.Name, Holder: holder, Token: stale.Token, Seq: 1, TTL: longTTL},
			{Name: ok1.Name, Holder: holder, Token: ok1.Token, Seq: 1, TTL: longTTL},
			{Name: taken.Name, Holder: holder, Token: taken.Token, Seq: 1, TTL: longTTL},
			{Name: prefix + "_absent", Holder: holder, Token: 1, Seq: 1, TTL: longTTL},
			{Name: released.Name, Holder: holder, Token: released.Token, Seq: 1, TTL: longTTL},
			{Name: ok2.Name, Holder: holder, Token: ok2.Token, Seq: 1, TTL: longTTL},
		}
		rs, err := b.store.Renew(t.Context(), ps)
		require.NoError(t, err)
		require.Len(t, rs, len(ps))
		for i, p := range ps {
			require.Equal(t, p.Name, rs[i].Grant.Name, "results come back in the order of the batch")
		}

		require.False(t, rs[0].Renewed, "stale seq")
		require.Equal(t, holder, rs[0].Grant.Holder)
		require.Equal(t, stale.Token, rs[0].Grant.Token)
		require.Equal(t, int64(2), rs[0].Grant.Seq)

		require.True(t, rs[1].Renewed)
		require.Equal(t, int64(2), rs[1].Grant.Seq)

		require.False(t, rs[2].Renewed, "held by another holder")
		require.Equal(t, other, rs[2].Grant.Holder)
		require.Equal(t, taken.Token, rs[2].Grant.Token)

		require.False(t, rs[3].Renewed, "absent")
		require.Zero(t, rs[3].Grant.Holder)

		require.False(t, rs[4].Renewed, "released")
		require.Zero(t, rs[4].Grant.Holder)

		require.True(t, rs[5].Renewed)
		require.Equal(t, int64(2), rs[5].Grant.Seq)

		b.requireHeld(t, stale, 2)
		b.requireHeld(t, ok1, 2)
		b.requireHeld(t, taken, 1)
		b.requireHeld(t, ok2, 2)
	})
}

// requireNotRenewable checks that renewing g, whose lease ended in state,
// fails, names no holder and no time, and leaves the state alone. what
// names the lease in messages ("an expired lease").
func (b *bundle) requireNotRenewable(t *testing.T, g store.Grant, state store.State, what string) {
	t.Helper()
	res := b.renew(t, g, longTTL)
	require.False(t, res.Renewed, what+" cannot be renewed")
	require.Zero(t, res.Grant.Holder, "nobody holds "+what)
	require.Zero(t, res.Grant.Remaining)
	require.Equal(t, state, b.get(t, g.Name).State)
}
