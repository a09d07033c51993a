package sqlitestore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// notices is what one Listen call reported, in order.
type notices chan store.Notice

// listenTo runs st.Listen until the test ends and returns what it reports,
// once it has reported its subscription.
func listenTo(t *testing.T, st *sqlitestore.Store) notices {
	t.Helper()
	ns := make(notices, 100)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- st.Listen(ctx, func(n store.Notice) { ns <- n }) }()
	t.Cleanup(func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	})
	require.Equal(t, store.Notice{}, ns.next(t), "Listen first announces its subscription")
	return ns
}

// next returns the next notice, failing the test after 10 s without one.
func (ns notices) next(t *testing.T) store.Notice {
	t.Helper()
	select {
	case n := <-ns:
		return n
	case <-time.After(10 * time.Second):
		t.Fatal("no notification within 10s")
		return store.Notice{}
	}
}

// none checks that nothing more was reported.
func (ns notices) none(t *testing.T) {
	t.Helper()
	select {
	case n := <-ns:
		t.Fatalf("unexpected notification %+v", n)
	default:
	}
}

// TestListenAcrossStores checks what one store's Listen reports of
// another store's (another process's) commits to the same file, which it
// finds by polling: releases, with the follower the lease is kept for, and
// new tenures, with their holder and TTL, in order; renewals not at all.
func TestListenAcrossStores(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	writer := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
	listener := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{PollInterval: time.Millisecond})
	ns := listenTo(t, listener)

	h, follower := testutil.Holder(t, "holder"), testutil.Holder(t, "follower")
	g, err := writer.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeAcquired, Holder: h, Remaining: time.Minute}, ns.next(t))
	rs, err := writer.Renew(t.Context(), []store.RenewParams{{Name: "a", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	_, err = writer.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: follower, TTL: time.Minute, Wait: true})
	require.ErrorIs(t, err, store.ErrHeld, "the follower is put in line")
	gb, err := writer.Acquire(t.Context(), store.AcquireParams{Name: "b", Holder: h, TTL: time.Second})
	require.NoError(t, err)
	require.NoError(t, writer.Release(t.Context(), store.ReleaseParams{Name: "b", Holder: h, Token: gb.Token}))
	require.NoError(t, writer.Release(t.Context(), store.ReleaseParams{Name: "a", Holder: h, Token: g.Token}))
	// Neither the renewal of a nor the follower's refusal announced
	// anything: after a's tenure come b's tenure and release (only the
	// release when no poll fell between them), then a's release, kept
	// for the follower.
	n := ns.next(t)
	if n.Kind == store.NoticeAcquired {
		require.Equal(t, store.Notice{Name: "b", Kind: store.NoticeAcquired, Holder: h, Remaining: time.Second}, n)
		n = ns.next(t)
	}
	require.Equal(t, store.Notice{Name: "b", Kind: store.NoticeReleased}, n, "nobody waits for b")
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeReleased, Next: follower}, ns.next(t))
	ns.none(t)
}

// TestListenOwnCommits checks that a Store's own commits reach its
// listeners without a poll: the listener polls once an hour, after its
// first poll, so every notice after its subscription came from a commit.
func TestListenOwnCommits(t *testing.T) {
	t.Parallel()
	st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{PollInterval: time.Hour})
	ns := listenTo(t, st)

	h, follower := testutil.Holder(t, "holder"), testutil.Holder(t, "follower")
	g, err := st.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeAcquired, Holder: h, Remaining: time.Minute}, ns.next(t))
	_, err = st.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: follower, TTL: time.Minute, Wait: true})
	require.ErrorIs(t, err, store.ErrHeld)
	require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: "a", Holder: h, Token: g.Token}))
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeReleased, Next: follower}, ns.next(t),
		"the refusal announced nothing; the release names the follower it keeps the lease for")

	g, err = st.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: follower, TTL: 2 * time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeAcquired, Holder: follower, Remaining: 2 * time.Minute}, ns.next(t))
	gb, err := st.Acquire(t.Context(), store.AcquireParams{Name: "b", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, "b", ns.next(t).Name)
	errs, err := st.ReleaseBatch(t.Context(), []store.ReleaseParams{
		{Name: "a", Holder: follower, Token: g.Token},
		{Name: "b", Holder: h, Token: gb.Token},
	})
	require.NoError(t, err)
	require.Equal(t, []error{nil, nil}, errs)
	require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeReleased}, ns.next(t))
	require.Equal(t, store.Notice{Name: "b", Kind: store.NoticeReleased}, ns.next(t))
	ns.none(t)
}

// TestListenAnnouncesOnce: a listener that both hears its own Store's
// commits and polls the file reports each change once. The change of
// another Store, which only a poll finds, comes after them and shows
// that the poll has read past them.
func TestListenAnnouncesOnce(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{PollInterval: time.Millisecond})
	other := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
	ns := listenTo(t, st)

	h := testutil.Holder(t, "holder")
	for range 20 {
		g, err := st.Acquire(t.Context(), store.AcquireParams{Name: "a", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, st.Release(t.Context(), store.ReleaseParams{Name: "a", Holder: h, Token: g.Token}))
	}
	_, err := other.Acquire(t.Context(), store.AcquireParams{Name: "b", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	for i := range 20 {
		require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeAcquired, Holder: h, Remaining: time.Minute}, ns.next(t), "tenure %d", i)
		require.Equal(t, store.Notice{Name: "a", Kind: store.NoticeReleased}, ns.next(t), "tenure %d", i)
	}
	require.Equal(t, store.Notice{Name: "b", Kind: store.NoticeAcquired, Holder: h, Remaining: time.Minute}, ns.next(t))
	ns.none(t)
}
