package consulserver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testserver/consulserver"
)

// TestConsulClusterSurvivesItsLeader pauses the leader of three server
// agents, then kills and restarts the next one, and checks that writes go
// on through a member that runs and that modify indexes (tenure's Consul
// tokens) only grow.
func TestConsulClusterSurvivesItsLeader(t *testing.T) {
	t.Parallel()
	c := consulserver.OwnConsulCluster(t)
	require.Len(t, c.Members, testserver.ClusterSize)
	var index uint64
	// put writes through member i, which must run.
	put := func(i int) {
		t.Helper()
		kv := consulserver.ConsulClient(t, c.Members[i].HTTPAddr).KV()
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
	testserver.WaitHealthy(t, c.Healthy)
	first, err := c.Leader(t.Context())
	require.NoError(t, err)
	put(first)

	c.Members[first].Pause()
	testserver.WaitDegraded(t, c.Healthy)
	second := testserver.WaitLeaderChange(t, c.Leader, first)
	put(second)
	c.Members[first].Resume()
	// Autopilot took the paused server out of the Raft configuration, and
	// takes it back as a voter only after it has been healthy for a while.
	testserver.WaitHealthy(t, c.Healthy)

	c.Members[second].Kill()
	testserver.WaitDegraded(t, c.Healthy)
	third := testserver.WaitLeaderChange(t, c.Leader, second)
	put(third)
	require.NoError(t, c.Members[second].Restart(t.Context()))
	put(second)
	testserver.WaitHealthy(t, c.Healthy)
}
