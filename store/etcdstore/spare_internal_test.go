package etcdstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A spare's age is the longer of the two clocks' measures: a suspension
// that stopped the monotonic clock shows on the wall clock, and a wall
// clock set back does not make a spare younger.
func TestSpareAgeTakesTheLongerClock(t *testing.T) {
	t.Parallel()
	now := time.Now()
	suspended := spare{sent: now, wall: now.Round(0).Add(-time.Hour)}
	require.GreaterOrEqual(t, suspended.age(), time.Hour, "the wall clock saw an hour pass")
	setBack := spare{sent: now.Add(-time.Minute), wall: now.Round(0).Add(time.Hour)}
	require.GreaterOrEqual(t, setBack.age(), time.Minute, "the monotonic clock saw a minute pass")
}

// A spare older than a quarter of its TTL is not taken, and is forgotten:
// the acquisition grants an etcd lease of its own, and the old spare is
// left to expire.
func TestOldSpareIsNotTaken(t *testing.T) {
	t.Parallel()
	lease := &clientv3.LeaseGrantResponse{ID: 1, TTL: 2}
	sent := time.Now().Add(-time.Second) // a quarter of 2 s ago, and more
	sps := newSpares()
	sps.by[2] = spare{lease: lease, sent: sent, wall: sent.Round(0)}
	_, ok := sps.take(2)
	require.False(t, ok, "a spare of 2 s, 1 s old")
	require.Empty(t, sps.by, "the old spare is forgotten")

	sent = time.Now()
	sps.by[2] = spare{lease: lease, sent: sent, wall: sent.Round(0)}
	sp, ok := sps.take(2)
	require.True(t, ok, "a spare just granted")
	require.Equal(t, lease, sp.lease)
	require.Empty(t, sps.by, "a spare is taken once")
}

// A lease an acquisition granted and did not use becomes the spare with
// the time its grant was sent, so its age counts from then.
func TestGivenBackLeaseKeepsItsGrantTime(t *testing.T) {
	t.Parallel()
	sent := time.Now().Add(-time.Second)
	sps := newSpares()
	require.True(t, sps.giveBack(2, spare{lease: &clientv3.LeaseGrantResponse{ID: 1, TTL: 2}, sent: sent, wall: sent.Round(0)}))
	_, ok := sps.take(2)
	require.False(t, ok, "granted 1 s ago, a quarter of 2 s has passed")
	sp := granting()
	require.Less(t, sp.age(), time.Second, "a grant stamped now")
}
