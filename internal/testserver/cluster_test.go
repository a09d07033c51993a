package testserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testserver"
)

// healthy waits until the cluster can lose a member again.
func healthy(t *testing.T, check func(context.Context) error) {
	t.Helper()
	require.Eventually(t, func() bool { return check(t.Context()) == nil }, 60*time.Second, 100*time.Millisecond,
		"the cluster did not recover")
}

// degraded waits until the cluster says it cannot lose another member.
func degraded(t *testing.T, check func(context.Context) error) {
	t.Helper()
	require.Eventually(t, func() bool { return check(t.Context()) != nil }, 30*time.Second, 100*time.Millisecond,
		"the cluster still says it is healthy")
}

// leaderChange waits until the cluster agrees on a leader other than old.
func leaderChange(t *testing.T, leader func(context.Context) (int, error), old int) int {
	t.Helper()
	next := -1
	require.Eventually(t, func() bool {
		i, err := leader(t.Context())
		next = i
		return err == nil && i != old
	}, 30*time.Second, 50*time.Millisecond, "no new leader after member %d's fault", old)
	return next
}

// TestEtcdClusterSurvivesItsLeader pauses the leader of a three-member
// cluster, then kills and restarts the next one, and checks that writes go
// on through the other members and revisions (tenure's etcd tokens) only
// grow.
func TestEtcdClusterSurvivesItsLeader(t *testing.T) {
	t.Parallel()
	c := testserver.OwnEtcdCluster(t)
	require.Len(t, c.Members, testserver.ClusterSize)
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer func() { _ = cli.Close() }()
	var rev int64
	put := func() {
		t.Helper()
		// A call sent to the paused member fails at its deadline; the
		// client sends the next to another.
		var got int64
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			resp, err := cli.Put(ctx, "k", "v")
			if err != nil {
				return false
			}
			got = resp.Header.Revision
			return true
		}, 30*time.Second, 10*time.Millisecond)
		require.Greater(t, got, rev, "the revision went back")
		rev = got
	}
	put()
	healthy(t, c.Healthy)
	first, err := c.Leader(t.Context())
	require.NoError(t, err)

	c.Members[first].Pause()
	degraded(t, c.Healthy)
	second := leaderChange(t, c.Leader, first)
	put()
	c.Members[first].Resume()
	healthy(t, c.Healthy)

	c.Members[second].Kill()
	degraded(t, c.Healthy)
	leaderChange(t, c.Leader, second)
	put()
	require.NoError(t, c.Members[second].Restart(t.Context()))
	put()
	healthy(t, c.Healthy)
}

// TestConsulClusterSurvivesItsLeader pauses the leader of three server
// agents, then kills and restarts the next one, and checks that writes go
// on through a member that runs and that modify indexes (tenure's Consul
// tokens) only grow.
func TestConsulClusterSurvivesItsLeader(t *testing.T) {
	t.Parallel()
	c := testserver.OwnConsulCluster(t)
	require.Len(t, c.Members, testserver.ClusterSize)
	var index uint64
	// put writes through member i, which must run.
	put := func(i int) {
		t.Helper()
		kv := testserver.ConsulClient(t, c.Members[i].HTTPAddr).KV()
		// Until a new leader is elected the write fails ("No cluster
		// leader") or waits.
		var got uint64
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
			defer cancel()
			// Consul keeps the index of a key set to the value it has.
			value := []byte(strconv.FormatUint(index, 10))
			if _, err := kv.Put(&api.KVPair{Key: "k", Value: value}, (&api.WriteOptions{}).WithContext(ctx)); err != nil {
				return false
			}
			p, _, err := kv.Get("k", (&api.QueryOptions{RequireConsistent: true}).WithContext(ctx))
			if err != nil || p == nil {
				return false
			}
			got = p.ModifyIndex
			return true
		}, 30*time.Second, 10*time.Millisecond)
		require.Greater(t, got, index, "the modify index went back")
		index = got
	}
	healthy(t, c.Healthy)
	first, err := c.Leader(t.Context())
	require.NoError(t, err)
	put(first)

	c.Members[first].Pause()
	degraded(t, c.Healthy)
	second := leaderChange(t, c.Leader, first)
	put(second)
	c.Members[first].Resume()
	// Autopilot took the paused server out of the Raft configuration, and
	// takes it back as a voter only after it has been healthy for a while.
	healthy(t, c.Healthy)

	c.Members[second].Kill()
	degraded(t, c.Healthy)
	third := leaderChange(t, c.Leader, second)
	put(third)
	require.NoError(t, c.Members[second].Restart(t.Context()))
	put(second)
	healthy(t, c.Healthy)
}
