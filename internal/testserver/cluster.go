package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// WaitHealthy waits until the cluster can lose a member again.
func WaitHealthy(t testing.TB, check func(context.Context) error) {
	t.Helper()
	require.Eventually(t, func() bool { return check(context.Background()) == nil }, 60*time.Second, 100*time.Millisecond,
		"the cluster did not recover")
}

// WaitDegraded waits until the cluster says it cannot lose another member.
func WaitDegraded(t testing.TB, check func(context.Context) error) {
	t.Helper()
	require.Eventually(t, func() bool { return check(context.Background()) != nil }, 30*time.Second, 100*time.Millisecond,
		"the cluster still says it is healthy")
}

// WaitLeaderChange waits until the cluster agrees on a leader other than old.
func WaitLeaderChange(t testing.TB, leader func(context.Context) (int, error), old int) int {
	t.Helper()
	next := -1
	require.Eventually(t, func() bool {
		i, err := leader(context.Background())
		next = i
		return err == nil && i != old
	}, 30*time.Second, 50*time.Millisecond, "no new leader after member %d's fault", old)
	return next
}

// TestEtcdClusterSurvivesItsLeader pauses the leader of a three-member
// cluster, then kills and restarts the next one, and checks that writes go
// on through the other members and revisions (tenure's etcd tokens) only
