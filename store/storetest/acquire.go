package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// racers is how many goroutines race for one lease.
const racers = 16

func testAcquire(t *testing.T, h Harness) {
	t.Run("AcquireOnEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "first"), longTTL)
		b.requireFresh(t, longTTL, g.Remaining)

		r := b.requireHeld(t, g, 1)
		b.requireFresh(t, longTTL, r.Remaining)
		require.False(t, r.AcquiredAt.IsZero(), "Get reports when the tenure began")
	})

	t.Run("AtStoreMinTTL", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		// A client accepts any TTL from store.MinTTLOf up; the store must
		// grant it as asked (its floor is the one it reports).
		floor := store.MinTTLOf(b.store)
		g := b.acquire(t, name(t), testutil.Holder(t, "holder"), floor)
		require.Positive(t, g.Remaining)
		require.LessOrEqual(t, g.Remaining, floor+b.caps.ExpiryLag, "a lease granted for the store's own minimum TTL")
	})

	t.Run("HeldReportsHolder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.acquire(t, n, testutil.Holder(t, "first"), longTTL)
		renewed := b.renew(t, first, longTTL)
		require.True(t, renewed.Renewed)

		held := b.acquireHeld(t, n, testutil.Holder(t, "second"), longTTL)
		require.Equal(t, first.Holder, held.Holder)
		require.Equal(t, first.Token, held.Token)
		require.Equal(t, int64(2), held.Seq)
		b.requireRemaining(t, longTTL, held.Remaining)

		b.requireHeld(t, first, 2)
	})

	t.Run("HeldBySameHolder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.acquire(t, n, testutil.Holder(t, "first"), longTTL)

		held := b.acquireHeld(t, n, first.Holder, longTTL)
		require.Equal(t, first.Holder, held.Holder)
		require.Equal(t, first.Token, held.Token)
		require.Equal(t, int64(1), held.Seq)

		b.requireHeld(t, first, 1)
	})

	t.Run("NotTakeableBeforeExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.acquire(t, n, testutil.Holder(t, "first"), b.short())
		second := testutil.Holder(t, "second")

		held := b.acquireHeld(t, n, second, b.short())
		require.Equal(t, first.Holder, held.Holder)
		require.Equal(t, first.Token, held.Token)
		b.requireRemaining(t, b.short(), held.Remaining)

		b.waitExpiry(t, held.Remaining)
		r := b.get(t, n)
		require.Equal(t, store.StateExpired, r.State)
		require.Equal(t, first.Holder, r.Holder, "an expired lease still names its last holder")
		require.Equal(t, first.Token, r.Token)
		require.Zero(t, r.Remaining)

		next := b.acquire(t, n, second, longTTL)
		require.Greater(t, next.Token, first.Token, "a takeover gets a greater token")
		b.requireHeld(t, next, 1)
	})

	t.Run("SameHolderAfterExpiry", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		first := b.expired(t, n, testutil.Holder(t, "first"))

		next := b.acquire(t, n, first.Holder, longTTL)
		require.Greater(t, next.Token, first.Token, "a new tenure gets a greater token even for the same holder")
	})

	t.Run("RaceOnEmpty", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		winner := b.race(t, n)
		b.requireHeld(t, winner, 1)
	})

	t.Run("RaceOnExpired", func(t *testing.T) {
		t.Parallel()
		b := setup(t, h)
		n := name(t)
		previous := b.expired(t, n, testutil.Holder(t, "previous"))

		winner := b.race(t, n)
		require.Greater(t, winner.Token, previous.Token, "the takeover's token exceeds the expired tenure's")
		b.requireHeld(t, winner, 1)
	})
}

// race has [racers] holders acquire name at once and checks that exactly one
// wins and every other is told the winner.
func (b *bundle) race(t *testing.T, name string) store.Grant {
	t.Helper()
	type outcome struct {
		holder store.Holder
		grant  store.Grant
		err    error
	}
	outcomes := make([]outcome, racers)
	for i := range outcomes {
		outcomes[i].holder = testutil.Holder(t, fmt.Sprintf("racer-%d", i))
	}
	ctx := t.Context()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range outcomes {
		wg.Go(func() {
			<-start
			p := store.AcquireParams{Name: name, Holder: outcomes[i].holder, TTL: longTTL}
			outcomes[i].grant, outcomes[i].err = b.store.Acquire(ctx, p)
		})
	}
	close(start)
	wg.Wait()

	var winners []store.Grant
	for _, o := range outcomes {
		if o.err == nil {
			require.Equal(t, o.holder, o.grant.Holder)
			require.Positive(t, o.grant.Token)
			require.Equal(t, int64(1), o.grant.Seq)
			winners = append(winners, o.grant)
		}
	}
	require.Len(t, winners, 1, "exactly one of %d racing acquirers wins", racers)
	winner := winners[0]
	for _, o := range outcomes {
		if o.err == nil {
			continue
		}
		var held *store.HeldError
		require.True(t, errors.As(o.err, &held), "a losing acquirer gets a *store.HeldError, not %v", o.err)
		require.Equal(t, winner.Holder, held.Holder, "a losing acquirer is told the winner")
		require.Equal(t, winner.Token, held.Token)
	}
	return winner
}
