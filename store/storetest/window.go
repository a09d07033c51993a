package storetest

import (
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
)

// testWindow checks [store.Windower] for stores that implement it.
func testWindow(t *testing.T, h Harness) {
	t.Run("OnceThenRefused", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "a"), longTTL)
		w := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: g.Holder, Token: g.Token, Key: "2026-12-04"})
		require.Equal(t, store.Window{Name: n, Key: "2026-12-04", State: store.WindowStarted, Holder: g.Holder, Token: g.Token,
			Attempts: 1, StartedAt: w.StartedAt}, w)
		require.False(t, w.StartedAt.IsZero())
		require.Equal(t, time.UTC, w.StartedAt.Location())
		again := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: g.Holder, Token: g.Token, Key: "2026-12-04"})
		require.Equal(t, w, again, "the same tenure starting again (a lost reply) changes nothing")

		done := finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: "2026-12-04", Holder: g.Holder, Token: g.Token, Outcome: store.WindowCompleted})
		require.Equal(t, store.WindowCompleted, done.State)
		require.False(t, done.FinishedAt.Before(done.StartedAt))
		require.Equal(t, done, finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: "2026-12-04", Holder: g.Holder, Token: g.Token, Outcome: store.WindowCompleted}),
			"finishing again with the same outcome changes nothing")
		require.Equal(t, done, getWindow(t, ws, n, "2026-12-04"))

		b.release(t, g)
		next := b.acquire(t, n, testutil.Holder(t, "b"), longTTL)
		for _, retry := range []bool{false, true} {
			refused := requireWindowDone(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: "2026-12-04", RetryFailed: retry})
			require.Equal(t, done, refused, "a completed window is refused, with or without retry, naming who ran it")
		}
		other := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: "2026-12-05"})
		require.Equal(t, int64(1), other.Attempts, "another window of the same name is its own")
		_, err := ws.GetWindow(t.Context(), n, "2026-12-06")
		require.ErrorIs(t, err, store.ErrNotFound)
		_, err = ws.GetWindow(t.Context(), n+"_other", "2026-12-04")
		require.ErrorIs(t, err, store.ErrNotFound, "windows belong to a lease name")
	})

	t.Run("OnlyTheHolder", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "a"), longTTL)
		key := "batch-17"
		for _, h := range otherHolders(t, store.Grant{Holder: g.Holder}) {
			_, err := ws.StartWindow(t.Context(), store.StartWindowParams{Name: n, Holder: h, Token: g.Token, Key: key})
			require.ErrorIs(t, err, store.ErrNotHeld, "a holder that does not hold the lease cannot start its window")
		}
		_, err := ws.StartWindow(t.Context(), store.StartWindowParams{Name: n, Holder: g.Holder, Token: g.Token + 1, Key: key})
		require.ErrorIs(t, err, store.ErrNotHeld, "another token cannot start the window")
		_, err = ws.StartWindow(t.Context(), store.StartWindowParams{Name: n + "_never", Holder: g.Holder, Token: g.Token, Key: key})
		require.ErrorIs(t, err, store.ErrNotHeld, "a lease never acquired")
		_, err = ws.GetWindow(t.Context(), n, key)
		require.ErrorIs(t, err, store.ErrNotFound, "refused starts record nothing")

		startWindow(t, ws, store.StartWindowParams{Name: n, Holder: g.Holder, Token: g.Token, Key: key})
		_, err = ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: key, Holder: g.Holder, Token: g.Token + 1, Outcome: store.WindowCompleted})
		require.ErrorIs(t, err, store.ErrNotHeld)
		_, err = ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: key + "x", Holder: g.Holder, Token: g.Token, Outcome: store.WindowCompleted})
		require.ErrorIs(t, err, store.ErrNotHeld, "a window never started cannot finish")
		b.release(t, g)
		_, err = ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: key, Holder: g.Holder, Token: g.Token, Outcome: store.WindowCompleted})
		require.ErrorIs(t, err, store.ErrNotHeld, "a released tenure cannot finish its window")
		require.Equal(t, store.WindowStarted, getWindow(t, ws, n, key).State, "refused finishes change nothing")
	})

	t.Run("FailedHalfway", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		n := name(t)
		key := "2026-12-04"
		old := b.acquire(t, n, testutil.Holder(t, "paused"), b.expiring())
		first := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: old.Holder, Token: old.Token, Key: key})
		b.waitExpiry(t, old.Remaining)
		_, err := ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: key, Holder: old.Holder, Token: old.Token, Outcome: store.WindowCompleted})
		require.ErrorIs(t, err, store.ErrNotHeld, "a tenure that expired (a paused worker) cannot complete its window")

		next := b.acquire(t, n, testutil.Holder(t, "next"), longTTL)
		refused := requireWindowDone(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key})
		require.Equal(t, first, refused, "without retry a window begun and not completed is refused, naming who began it")

		retried := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key, RetryFailed: true})
		require.Equal(t, store.WindowStarted, retried.State)
		require.Equal(t, next.Token, retried.Token, "the retry is recorded with the newer token")
		require.Equal(t, next.Holder, retried.Holder)
		require.Equal(t, int64(2), retried.Attempts)

		_, err = ws.StartWindow(t.Context(), store.StartWindowParams{Name: n, Holder: old.Holder, Token: old.Token, Key: key, RetryFailed: true})
		require.ErrorIs(t, err, store.ErrNotHeld, "the paused worker cannot take its window back")

		failed := finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: key, Holder: next.Holder, Token: next.Token, Outcome: store.WindowFailed})
		require.Equal(t, store.WindowFailed, failed.State)
		refused = requireWindowDone(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key})
		require.Equal(t, failed, refused, "a failed window is refused without retry")
		_, err = ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: key, Holder: next.Holder, Token: next.Token, Outcome: store.WindowCompleted})
		require.ErrorIs(t, err, store.ErrNotHeld, "a failed window is not completed without being begun again")

		third := startWindow(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key, RetryFailed: true})
		require.Equal(t, int64(3), third.Attempts, "a failed window is begun again with retry")
		done := finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: key, Holder: next.Holder, Token: next.Token, Outcome: store.WindowCompleted})
		require.Equal(t, store.WindowCompleted, done.State)
		require.Equal(t, int64(3), done.Attempts)
	})

	t.Run("Derived", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "a"), longTTL)
		p := store.StartWindowParams{Name: n, Holder: g.Holder, Token: g.Token, Period: 24 * time.Hour}
		w, err := ws.StartWindow(t.Context(), p)
		if b.caps.NoDerivedWindow {
			require.ErrorIs(t, err, store.ErrInvalid, "a store without a clock refuses a derived window")
			require.ErrorContains(t, err, "window key")
			return
		}
		require.NoError(t, err)
		start, period, ok := store.ParseDerivedWindowKey(w.Key)
		require.True(t, ok, "a derived key %q", w.Key)
		require.Equal(t, 24*time.Hour, period)
		require.Equal(t, start, start.Truncate(24*time.Hour), "a day's window starts at midnight UTC")
		require.False(t, w.StartedAt.Before(start), "the window contains the store's now")
		require.True(t, w.StartedAt.Before(start.Add(period)), "the window contains the store's now")
		done := finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: w.Key, Holder: g.Holder, Token: g.Token, Outcome: store.WindowCompleted})
		require.Equal(t, w.Key, done.Key)
		require.Equal(t, done, requireWindowDone(t, ws, p), "the derived window, asked again by period, is the same window")
	})

	t.Run("History", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		hs, ok := b.store.(store.Historian)
		if !ok {
			t.Skip("the store does not implement store.Historian: it records no window events")
		}
		n, key := name(t), "2026-12-04"
		first := b.acquire(t, n, testutil.Holder(t, "a"), longTTL)
		startWindow(t, ws, store.StartWindowParams{Name: n, Holder: first.Holder, Token: first.Token, Key: key})
		b.release(t, first)
		next := b.acquire(t, n, testutil.Holder(t, "b"), longTTL)
		startWindow(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key, RetryFailed: true})
		finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: key, Holder: next.Holder, Token: next.Token, Outcome: store.WindowFailed})
		startWindow(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key, RetryFailed: true})
		finishWindow(t, ws, store.FinishWindowParams{Name: n, Key: key, Holder: next.Holder, Token: next.Token, Outcome: store.WindowCompleted})
		requireWindowDone(t, ws, store.StartWindowParams{Name: n, Holder: next.Holder, Token: next.Token, Key: key})

		var windows []store.HistoryEvent
		for _, ev := range history(t, hs, store.HistoryParams{Name: n}) {
			if ev.Window != "" {
				windows = append(windows, ev)
			}
		}
		a, c := first.Holder, next.Holder
		requireEvents(t, []store.HistoryEvent{
			{Name: n, Kind: store.EventWindowStarted, Holder: a, Token: first.Token, Window: key},
			{Name: n, Kind: store.EventWindowStarted, Holder: c, Token: next.Token, PreviousHolder: a, PreviousToken: first.Token, Window: key},
			{Name: n, Kind: store.EventWindowFailed, Holder: c, Token: next.Token, Window: key},
			{Name: n, Kind: store.EventWindowStarted, Holder: c, Token: next.Token, Window: key},
			{Name: n, Kind: store.EventWindowCompleted, Holder: c, Token: next.Token, Window: key},
		}, windows, "every window begun and finished is recorded, with the tenure taken over from; a refusal records nothing")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		b, ws := setupWindow(t, h)
		n := name(t)
		g := b.acquire(t, n, testutil.Holder(t, "a"), longTTL)
		for _, p := range []store.StartWindowParams{
			{Name: n, Holder: g.Holder, Token: g.Token},
			{Name: n, Holder: g.Holder, Token: g.Token, Key: "@1+1"},
			{Name: n, Holder: g.Holder, Token: g.Token, Key: "a\nb"},
			{Name: n, Holder: g.Holder, Token: g.Token, Key: string(make([]byte, store.MaxWindowKeyLen+1))},
			{Name: n, Holder: g.Holder, Token: g.Token, Key: "k", Period: time.Hour},
			{Name: n, Holder: g.Holder, Token: g.Token, Period: time.Second + time.Microsecond},
			{Name: n, Holder: g.Holder, Token: g.Token, Period: time.Millisecond},
			{Name: n, Holder: g.Holder, Token: 0, Key: "k"},
		} {
			_, err := ws.StartWindow(t.Context(), p)
			require.ErrorIs(t, err, store.ErrInvalid, "%+v", p)
		}
		_, err := ws.FinishWindow(t.Context(), store.FinishWindowParams{Name: n, Key: "k", Holder: g.Holder, Token: g.Token, Outcome: store.WindowStarted})
		require.ErrorIs(t, err, store.ErrInvalid)
		_, err = ws.GetWindow(t.Context(), n, "")
		require.ErrorIs(t, err, store.ErrInvalid)
	})
}

// setupWindow is setup for a store that implements [store.Windower]; it
// skips the test for one that does not.
func setupWindow(t *testing.T, h Harness) (*bundle, store.Windower) {
	t.Helper()
	b := setup(t, h)
	ws, ok := b.store.(store.Windower)
	if !ok {
		t.Skip("the store does not implement store.Windower: it runs nothing once per window")
	}
	return b, ws
}

func startWindow(t *testing.T, ws store.Windower, p store.StartWindowParams) store.Window {
	t.Helper()
	w, err := ws.StartWindow(t.Context(), p)
	require.NoError(t, err, "start window %+v", p)
	require.Equal(t, p.Name, w.Name)
	if p.Key != "" {
		require.Equal(t, p.Key, w.Key)
	}
	return w
}

func finishWindow(t *testing.T, ws store.Windower, p store.FinishWindowParams) store.Window {
	t.Helper()
	w, err := ws.FinishWindow(t.Context(), p)
	require.NoError(t, err, "finish window %+v", p)
	require.Equal(t, p.Outcome, w.State)
	require.Equal(t, time.UTC, w.FinishedAt.Location())
	return w
}

func getWindow(t *testing.T, ws store.Windower, name, key string) store.Window {
	t.Helper()
	w, err := ws.GetWindow(t.Context(), name, key)
	require.NoError(t, err, "get window %q of %q", key, name)
	return w
}

// requireWindowDone starts a window that must be refused and returns the
// window the refusal carries.
func requireWindowDone(t *testing.T, ws store.Windower, p store.StartWindowParams) store.Window {
	t.Helper()
	_, err := ws.StartWindow(t.Context(), p)
	require.ErrorIs(t, err, store.ErrWindowDone, "start window %+v", p)
	var done *store.WindowDoneError
	require.ErrorAs(t, err, &done)
	return done.Window
}
