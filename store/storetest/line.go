package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

func testLine(t *testing.T, h Harness) {
	if !h.Capabilities().Line {
		t.Skip("storetest: the backend keeps no line of followers (Capabilities.Line is false)")
	}

	t.Run("PlacesFirstComeFirst", func(t *testing.T) {
		t.Parallel()
		b, g := setupHeld(t, h)
		first, second := testutil.Holder(t, "first"), testutil.Holder(t, "second")
		require.Equal(t, 1, b.wait(t, g.Name, first, longTTL).Position)
		require.Equal(t, 2, b.wait(t, g.Name, second, longTTL).Position)
		require.Equal(t, 1, b.wait(t, g.Name, first, longTTL).Position, "asking again keeps the place")
		require.Zero(t, b.acquireHeld(t, g.Name, testutil.Holder(t, "passer-by"), longTTL).Position,
			"an acquisition that does not wait gets no place")
		require.Equal(t, 2, b.wait(t, g.Name, second, longTTL).Position, "nor does it take one")
	})

	t.Run("ReleaseKeepsLeaseForNext", func(t *testing.T) {
		t.Parallel()
		if h.Capabilities().NoHandoff {
			t.Skip("storetest: the backend keeps no released lease for the next in line (Capabilities.NoHandoff)")
		}
		b, g := setupHeld(t, h)
		first, second := testutil.Holder(t, "first"), testutil.Holder(t, "second")
		b.wait(t, g.Name, first, longTTL)
		b.wait(t, g.Name, second, longTTL)
		b.release(t, g)

		kept := b.wait(t, g.Name, second, longTTL)
		require.Equal(t, first, kept.Next, "the released lease is kept for the head of the line")
		require.Zero(t, kept.Holder, "a kept lease has no holder")
		require.Positive(t, kept.Remaining)
		require.LessOrEqual(t, kept.Remaining, store.Handoff)
		require.Equal(t, first, b.acquireHeld(t, g.Name, testutil.Holder(t, "passer-by"), longTTL).Next)

		next := b.acquireWait(t, g.Name, first, longTTL)
		require.Greater(t, next.Token, g.Token)
		require.Equal(t, 1, b.wait(t, g.Name, second, longTTL).Position, "the new holder left the line")
	})

	t.Run("ReleaseFreesLeaseAtOnce", func(t *testing.T) {
		t.Parallel()
		if !h.Capabilities().NoHandoff {
			t.Skip("storetest: the backend keeps a released lease for the next in line (see ReleaseKeepsLeaseForNext)")
		}
		b, g := setupHeld(t, h)
		first, second := testutil.Holder(t, "first"), testutil.Holder(t, "second")
		b.wait(t, g.Name, first, longTTL)
		b.wait(t, g.Name, second, longTTL)
		b.release(t, g)

		next := b.acquireWait(t, g.Name, second, longTTL)
		require.Greater(t, next.Token, g.Token, "a released lease is free at once, for any follower")
		held := b.wait(t, g.Name, first, longTTL)
		require.Equal(t, 1, held.Position, "the new holder left the line, the others kept their places")
		require.Equal(t, second, held.Holder)
		require.Zero(t, held.Next, "a store without a hold names no follower in a refusal")
	})

	t.Run("KeptOnlyForHandoff", func(t *testing.T) {
		t.Parallel()
		if h.Capabilities().NoHandoff {
			t.Skip("storetest: the backend keeps no released lease for the next in line (Capabilities.NoHandoff)")
		}
		b, g := setupHeld(t, h)
		b.wait(t, g.Name, testutil.Holder(t, "gone"), longTTL)
		b.release(t, g)
		kept := b.acquireHeld(t, g.Name, testutil.Holder(t, "other"), longTTL)
		b.waitExpiry(t, kept.Remaining)
		b.acquire(t, g.Name, testutil.Holder(t, "other"), longTTL)
	})

	t.Run("ForgetsFollowersThatStopAsking", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		held := b.acquire(t, n, testutil.Holder(t, "holder"), b.short())
		start := time.Now()
		b.wait(t, n, testutil.Holder(t, "gone"), b.expiring())
		// The follower is forgotten twice its TTL after the expiry it was
		// told; the holder renews meanwhile, so the lease never expires.
		forgotten := b.short() + 2*b.expiring() + b.caps.ExpiryLag + expirySlack
		for time.Since(start) < forgotten {
			r := b.renew(t, held, b.short())
			require.True(t, r.Renewed)
			held.Seq = r.Grant.Seq
			time.Sleep(b.short() / 4) // the store's own timer is the event waited for
		}
		if b.caps.NoHandoff {
			require.Equal(t, 1, b.wait(t, n, testutil.Holder(t, "other"), longTTL).Position,
				"a forgotten follower leaves the line")
			return
		}
		b.release(t, held)
		b.acquire(t, n, testutil.Holder(t, "other"), longTTL)
	})

	t.Run("NoticesNameNextAndHolder", func(t *testing.T) {
		t.Parallel()
		if !h.Capabilities().Notify {
			t.Skip("storetest: the backend does not notify (Capabilities.Notify is false)")
		}
		b, g := setupHeld(t, h)
		r := b.listen(t)
		next := testutil.Holder(t, "next")
		b.wait(t, g.Name, next, longTTL)
		b.release(t, g)
		require.True(t, r.WaitFor(func(n store.Notice) bool {
			return n.Name == g.Name && n.Kind == store.NoticeReleased && n.Next == next
		}, eventTimeout), "no release notice naming the next follower within %s; got %+v", eventTimeout, r.Of(g.Name))
		b.acquireWait(t, g.Name, next, longTTL)
		require.True(t, r.WaitFor(func(n store.Notice) bool {
			return n.Name == g.Name && n.Kind == store.NoticeAcquired && n.Holder == next &&
				n.Remaining > longTTL-remainingTolerance && n.Remaining <= longTTL+b.caps.ExpiryLag
		}, eventTimeout), "no acquisition notice naming the new holder within %s; got %+v", eventTimeout, r.Of(g.Name))
	})
}

// wait is an acquisition that asks to wait and must be refused; it returns
// the refusal.
func (b *bundle) wait(t *testing.T, name string, h store.Holder, ttl time.Duration) *store.HeldError {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl, Wait: true})
	require.ErrorIs(t, err, store.ErrHeld, "acquire %q by %s, waiting, returned grant %+v", name, h, g)
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	require.Equal(t, name, held.Name)
	return held
}

// acquireWait is an acquisition that asks to wait and must succeed.
func (b *bundle) acquireWait(t *testing.T, name string, h store.Holder, ttl time.Duration) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: ttl, Wait: true})
	require.NoError(t, err, "acquire %q by %s, waiting", name, h)
	require.Equal(t, h, g.Holder)
	require.Equal(t, int64(1), g.Seq)
	return g
}
