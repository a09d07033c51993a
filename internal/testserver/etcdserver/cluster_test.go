package etcdserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/etcdserver"
)

// TestEtcdClusterSurvivesItsLeader pauses the leader of a three-member
// cluster, then kills and restarts the next one, and checks that writes go
// on through the other members and revisions (tenure's etcd tokens) only
// grow.
func TestEtcdClusterSurvivesItsLeader(t *testing.T) {
	t.Parallel()
	c := etcdserver.OwnEtcdCluster(t)
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
	testserver.WaitHealthy(t, c.Healthy)
	first, err := c.Leader(t.Context())
	require.NoError(t, err)

	c.Members[first].Pause()
	testserver.WaitDegraded(t, c.Healthy)
	second := testserver.WaitLeaderChange(t, c.Leader, first)
	put()
	c.Members[first].Resume()
	testserver.WaitHealthy(t, c.Healthy)

	c.Members[second].Kill()
	testserver.WaitDegraded(t, c.Healthy)
	testserver.WaitLeaderChange(t, c.Leader, second)
	put()
	require.NoError(t, c.Members[second].Restart(t.Context()))
	put()
	testserver.WaitHealthy(t, c.Healthy)
}
