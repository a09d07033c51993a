package consulstore_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/linetest"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/consulstore"
)

// TestReleaseHandsOverToTheNextInLineAlone: each release names the head of
// the line, which takes the lease with a single acquisition; the others
// hear of the new tenure and send nothing.
func TestReleaseHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	st, _ := consulserver.ConsulHarness{Agent: consulserver.SharedConsul(t)}.New(t)
	linetest.ReleaseHandsOverToTheNextInLineAlone(t, st)
}

// TestLineRoundTrips counts the requests of the line on the caller's path:
// an acquisition of a free lease costs what it did before the line (a
// read, a session, a transaction), a follower's first place a session and
// a transaction more than the refusal's read, keeping it a session
// renewal, and the release that names the head of the line a read and a
// transaction. The head's acquisition takes it out of the line, and the
// session that kept its place is destroyed.
func TestLineRoundTrips(t *testing.T) {
	t.Parallel()
	b := setup(t, consulstore.Config{})
	s, counted := countedStore(t, b.store.Config().KeyPrefix)
	holder, first, second := testutil.Holder(t, "holder"), testutil.Holder(t, "first"), testutil.Holder(t, "second")
	acquire := func(h store.Holder, wait bool) (store.Grant, error) {
		return s.Acquire(t.Context(), store.AcquireParams{Name: b.name, Holder: h, TTL: longTTL, Wait: wait})
	}
	waitFor := func(h store.Holder) int {
		t.Helper()
		_, err := acquire(h, true)
		var held *store.HeldError
		require.ErrorAs(t, err, &held)
		return held.Position
	}

	g, err := acquire(holder, false)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"an acquisition when nobody waits")

	require.Equal(t, 1, waitFor(first))
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"a refusal that takes a place in line")
	require.Equal(t, 2, waitFor(second))
	counted.take()
	require.Equal(t, 1, waitFor(first), "asking again keeps the place")
	require.Equal(t, map[string]int{"PUT /v1/txn": 1, "PUT /v1/session/renew": 1}, onCallersPath(counted.take()),
		"a refusal that keeps a place in line")
	_, err = acquire(testutil.Holder(t, "passer-by"), false)
	require.ErrorIs(t, err, store.ErrHeld)
	require.Equal(t, map[string]int{"PUT /v1/txn": 1}, onCallersPath(counted.take()), "a refusal without waiting")

	line := b.store.Config().KeyPrefix + b.name + "/wait/"
	pairs, _, err := b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Len(t, pairs, 2, "one key per follower")
	kept := map[string]bool{}
	for _, p := range pairs {
		require.NotEmpty(t, p.Session, "key %q is locked by the session that keeps the follower's place", p.Key)
		kept[p.Session] = true
	}
	require.Len(t, kept, 2, "each follower's place is kept by a session of its own")

	require.NoError(t, s.Release(t.Context(), store.ReleaseParams{Name: b.name, Holder: holder, Token: g.Token}))
	require.Equal(t, map[string]int{"PUT /v1/txn": 2}, onCallersPath(counted.take()), "a release naming the head of the line")
	_, err = acquire(first, true)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"PUT /v1/txn": 2, "PUT /v1/session/create": 1}, onCallersPath(counted.take()),
		"the head's acquisition")
	pairs, _, err = b.client.KV().List(line, nil)
	require.NoError(t, err)
	require.Len(t, pairs, 1, "the new holder left the line")
	for id := range kept {
		if id != pairs[0].Session {
			b.awaitSessionGone(t, id)
		}
	}
}
