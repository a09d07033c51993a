package storetest

import (
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// testHistory checks [store.Historian] for stores that implement it.
func testHistory(t *testing.T, h Harness) {
	t.Run("Tenures", func(t *testing.T) {
		t.Parallel()
		b, hs := setupHistory(t, h)
		n := name(t)
		a, c := testutil.Holder(t, "a"), testutil.Holder(t, "c")

		first := b.acquire(t, n, a, longTTL)
		for seq := first.Seq; seq < first.Seq+3; seq++ {
			res := b.renewOne(t, store.RenewParams{Name: n, Holder: a, Token: first.Token, Seq: seq, TTL: longTTL})
			require.True(t, res.Renewed)
		}
		b.release(t, first)
		second := b.expired(t, n, a)
		third := b.acquire(t, n, c, longTTL)

		events := history(t, hs, store.HistoryParams{Name: n})
		want := []store.HistoryEvent{
			{Name: n, Kind: store.EventGranted, Holder: a, Token: first.Token},
			{Name: n, Kind: store.EventReleased, Holder: a, Token: first.Token},
			{Name: n, Kind: store.EventGranted, Holder: a, Token: second.Token, PreviousHolder: a, PreviousToken: first.Token},
			{Name: n, Kind: store.EventTakenOver, Holder: c, Token: third.Token, PreviousHolder: a, PreviousToken: second.Token},
		}
		requireEvents(t, want, events, "renewals record nothing")
		for i, g := range []store.Grant{first, second, third} {
			if !g.At.IsZero() {
				ev := events[[]int{0, 2, 3}[i]]
				require.False(t, ev.At.After(g.At), "a grant's event is recorded by the store's clock no later than the grant reports")
			}
		}
	})

	t.Run("ForceRelease", func(t *testing.T) {
		t.Parallel()
		b, hs := setupHistory(t, h)
		fr, ok := b.store.(store.ForceReleaser)
		if !ok {
			t.Skip("the store does not implement store.ForceReleaser: it records no forced release")
		}
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "holder"), longTTL)
		err := fr.ForceRelease(t.Context(), store.ReleaseParams{Name: n, Holder: g.Holder, Token: g.Token + 1})
		require.ErrorIs(t, err, store.ErrNotHeld, "a forced release compares holder and token like Release")
		require.NoError(t, fr.ForceRelease(t.Context(), store.ReleaseParams{Name: n, Holder: g.Holder, Token: g.Token}))
		require.Equal(t, store.StateReleased, b.get(t, n).State)
		next := b.acquire(t, n, testutil.Holder(t, "next"), longTTL)
		requireEvents(t, []store.HistoryEvent{
			{Name: n, Kind: store.EventGranted, Holder: g.Holder, Token: g.Token},
			{Name: n, Kind: store.EventForceReleased, Holder: g.Holder, Token: g.Token},
			{Name: n, Kind: store.EventGranted, Holder: next.Holder, Token: next.Token, PreviousHolder: g.Holder, PreviousToken: g.Token},
		}, history(t, hs, store.HistoryParams{Name: n}), "a forced release is told apart from a holder's own")
	})

	t.Run("RefusedCallsRecordNothing", func(t *testing.T) {
		t.Parallel()
		b, hs := setupHistory(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "holder"), longTTL)
		other := testutil.Holder(t, "other")
		b.acquireHeld(t, n, other, longTTL)
		require.ErrorIs(t, b.store.Release(t.Context(), store.ReleaseParams{Name: n, Holder: other, Token: g.Token}), store.ErrNotHeld)
		require.False(t, b.renewOne(t, store.RenewParams{Name: n, Holder: g.Holder, Token: g.Token, Seq: g.Seq + 1, TTL: longTTL}).Renewed)
		requireEvents(t, []store.HistoryEvent{{Name: n, Kind: store.EventGranted, Holder: g.Holder, Token: g.Token}},
			history(t, hs, store.HistoryParams{Name: n}), "only the grant is recorded")
		require.Empty(t, history(t, hs, store.HistoryParams{Name: n + "_never"}), "a name never acquired has no history")
	})

	t.Run("SinceLimitAndNames", func(t *testing.T) {
		t.Parallel()
		b, hs := setupHistory(t, h)
		prefix, holder := name(t), testutil.Holder(t, "holder")
		names := []string{prefix + "_a", prefix + "_b"}
		for range 3 {
			for _, n := range names {
				b.release(t, b.acquire(t, n, holder, longTTL))
			}
		}
		all := history(t, hs, store.HistoryParams{})
		require.Len(t, all, 12, "every lease's events when no name is given")
		for i := 1; i < len(all); i++ {
			require.False(t, all[i].At.Before(all[i-1].At), "events come oldest first: %+v then %+v", all[i-1], all[i])
		}
		a := history(t, hs, store.HistoryParams{Name: names[0]})
		require.Len(t, a, 6)
		for i, ev := range a {
			require.Equal(t, names[0], ev.Name)
			require.Equal(t, []store.EventKind{store.EventGranted, store.EventReleased}[i%2], ev.Kind, "event %d", i)
		}

		last := history(t, hs, store.HistoryParams{Name: names[0], Limit: 2})
		requireEvents(t, a[4:], last, "a limit keeps the most recent events, oldest first")

		since := history(t, hs, store.HistoryParams{Name: names[0], Since: a[3].At})
		require.NotEmpty(t, since)
		require.LessOrEqual(t, len(since), 3, "events before since are left out")
		require.Equal(t, a[len(a)-1], since[len(since)-1])
		for _, ev := range since {
			require.False(t, ev.At.Before(a[3].At), "event %+v is before since %s", ev, a[3].At)
		}
		require.Empty(t, history(t, hs, store.HistoryParams{Since: all[len(all)-1].At.Add(time.Hour)}), "since after the last event")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		_, hs := setupHistory(t, h)
		for _, p := range []store.HistoryParams{
			{Limit: -1},
			{Limit: store.MaxHistoryLimit + 1},
			{Since: time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Since: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
			{Name: "bad\x00name"},
		} {
			_, err := hs.History(t.Context(), p)
			require.ErrorIs(t, err, store.ErrInvalid, "history %+v", p)
		}
	})
}

// setupHistory is setup for a store that implements [store.Historian]; it
// skips the test for one that does not.
func setupHistory(t *testing.T, h Harness) (*bundle, store.Historian) {
	t.Helper()
	b := setup(t, h)
	hs, ok := b.store.(store.Historian)
	if !ok {
		t.Skip("the store does not implement store.Historian: it keeps no history")
	}
	return b, hs
}

func history(t *testing.T, hs store.Historian, p store.HistoryParams) []store.HistoryEvent {
	t.Helper()
	events, err := hs.History(t.Context(), p)
	require.NoError(t, err, "history %+v", p)
	require.NotNil(t, events, "no events is an empty list")
	for _, ev := range events {
		require.False(t, ev.At.IsZero(), "event %+v has a time", ev)
		require.Equal(t, time.UTC, ev.At.Location(), "event %+v is in UTC", ev)
	}
	return events
}

// requireEvents compares events with want, ignoring the times.
func requireEvents(t *testing.T, want, events []store.HistoryEvent, msg string) {
	t.Helper()
	got := make([]store.HistoryEvent, len(events))
	for i, ev := range events {
		ev.At = time.Time{}
		got[i] = ev
	}
	stripped := make([]store.HistoryEvent, len(want))
	for i, ev := range want {
		ev.At = time.Time{}
		stripped[i] = ev
	}
	require.Equal(t, stripped, got, msg)
}
