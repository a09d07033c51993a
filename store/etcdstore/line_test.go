package etcdstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/linetest"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/etcdstore"
)

// TestReleaseHandsOverToTheNextInLineAlone: each release is taken by the
// next in line with a single acquisition; the others hear of the new
// tenure and send nothing.
func TestReleaseHandsOverToTheNextInLineAlone(t *testing.T) {
	t.Parallel()
	linetest.ReleaseHandsOverToTheNextInLineAlone(t, etcdserver.EtcdStore(t, etcdserver.SharedEtcd(t).Client(t), etcdstore.Config{}))
}

// TestExpiryHandsOverAtOnce: the holder shortens its lease to etcd's
// minimum and stops renewing it (it crashed) after two followers were
// refused and told it had a minute left. When etcd expires the lease, the
// listeners hear of it and the followers try at once: one of them takes
// the lease long before the expiry it was told, and the takeover costs
// each follower one acquisition.
func TestExpiryHandsOverAtOnce(t *testing.T) {
	t.Parallel()
	const name, followers = "reconcile", 2
	st := etcdserver.EtcdStore(t, etcdserver.SharedEtcd(t).Client(t), etcdstore.Config{})
	counts := linetest.NewTally()

	crashed := testutil.Holder(t, "crashed")
	g, err := st.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: crashed, TTL: longTTL})
	require.NoError(t, err)
	fs := make([]*linetest.Follower, followers)
	won := make(chan *tenure.Lease, followers)
	var told time.Time
	for i := range fs {
		fs[i] = linetest.NewFollower(st, counts, name)
		c := linetest.RunClient(t, fs[i], fmt.Sprintf("follower-%d", i))
		testutil.Receive(t, fs[i].Subscribed, "the listener's subscription", eventTimeout)
		go func() {
			if l, err := c.Campaign(t.Context(), name); err == nil {
				won <- l
			}
		}()
		require.Equal(t, i+1, testutil.Receive(t, fs[i].Placed, "follower's place in line", eventTimeout))
		if at := testutil.Receive(t, fs[i].Told, "the expiry the follower was told", eventTimeout); told.IsZero() || at.Before(told) {
			told = at
		}
	}

	counts.Take()
	rs, err := st.Renew(t.Context(), []store.RenewParams{{Name: name, Holder: crashed, Token: g.Token, Seq: g.Seq, TTL: etcdstore.MinTTL}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed, "the holder's last renewal")

	next := testutil.Receive(t, won, "a follower's lease", eventTimeout)
	require.True(t, time.Now().Before(told),
		"the takeover came when etcd expired the lease, before the earliest expiry a follower was told (%s)", told.Format(time.StampMilli))
	require.Greater(t, next.Token(), g.Token)
	// An expiry is announced as a change: every follower may try, once;
	// one that hears of the new tenure before its try comes does not.
	attempts := counts.Take()
	require.Equal(t, 1, attempts[next.Holder().Label], "the new holder tried once: %v", attempts)
	for label, n := range attempts {
		require.LessOrEqual(t, n, 1, "%s tried at most once after the expiry: %v", label, attempts)
	}
}
