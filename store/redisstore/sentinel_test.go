package redisstore_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
)

// retryInterval is how long the sentinel test waits before asking again a
// store that answered "unavailable" while the client finds the new
// primary.
const retryInterval = 50 * time.Millisecond

// TestSentinelFailover runs the store through Sentinel (a primary, a
// replica and three sentinels) across a SENTINEL FAILOVER onto a replica
// that missed the last writes: a release and the next tenure's grant. The
// new primary has forgotten both, as the package documentation says (the
// holder of the lost tenure learns it at its next renewal), and the next
// tenure, taken through a store that never saw the lost token, still gets
// a greater one: the token is floored by the server's clock, which has
// moved on since the lost grant.
func TestSentinelFailover(t *testing.T) {
	t.Parallel()
	rs := redisserver.OwnRedisSentinels(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	failoverClient := func(t *testing.T) *redis.Client {
		c := redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: redisserver.SentinelMaster, SentinelAddrs: rs.SentinelAddrs, ContextTimeoutEnabled: true,
		})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	prefix := "tenure_test:" + testutil.UniqueName(t) + ":"
	s := newStore(t, failoverClient(t), prefix)
	a, b, c := testutil.Holder(t, "a"), testutil.Holder(t, "b"), testutil.Holder(t, "c")

	primary, err := rs.Primary(ctx)
	require.NoError(t, err)
	replica := rs.Servers[0]
	if replica == primary {
		replica = rs.Servers[1]
	}

	// A's tenure reaches both servers.
	first := acquire(t, s, "job", a, 5*time.Second)
	acked, err := primary.Client(t).Do(ctx, "WAIT", 1, 5000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, acked, "the replica has A's tenure")

	// A's release and B's tenure reach the primary only.
	require.NoError(t, rs.CutReplication(ctx, primary))
	release(t, s, first)
	lost := acquire(t, s, "job", b, time.Minute)
	require.Greater(t, lost.Token, first.Token)
	counter, err := replica.Client(t).Get(ctx, s.Keys().Counter).Result()
	require.NoError(t, err)
	onReplica, err := strconv.ParseInt(counter, 10, 64)
	require.NoError(t, err)
	require.Less(t, onReplica, int64(lost.Token), "the replica missed B's grant")

	promoted, err := rs.Failover(ctx)
	require.NoError(t, err)
	require.Same(t, replica, promoted)

	// B's next renewal, through the same client, reaches the new primary,
	// which never saw B's tenure.
	var renewed []store.RenewResult
	for {
		renewed, err = s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: b, Token: lost.Token, Seq: lost.Seq, TTL: time.Minute}})
		if !errors.Is(err, store.ErrUnavailable) {
			break
		}
		wait(t, ctx, retryInterval)
	}
	require.NoError(t, err)
	require.False(t, renewed[0].Renewed, "B's tenure was lost with the writes the replica missed")
	require.Equal(t, first.Token, renewed[0].Grant.Token, "the new primary knows A's tenure, not B's")

	// A store that never saw B's token takes the lease once A's tenure,
	// whose release was lost too, has expired by the new primary's clock.
	newcomer := newStore(t, failoverClient(t), prefix)
	var next store.Grant
	for {
		next, err = newcomer.Acquire(ctx, store.AcquireParams{Name: "job", Holder: c, TTL: time.Minute})
		if heldErr, ok := errors.AsType[*store.HeldError](err); ok {
			wait(t, ctx, heldErr.Remaining)
			continue
		}
		if errors.Is(err, store.ErrUnavailable) {
			wait(t, ctx, retryInterval)
			continue
		}
		break
	}
	require.NoError(t, err)
	require.Greater(t, next.Token, lost.Token, "the clock floors the token: the lost one is not handed out again")
}

// wait waits for d, or fails t when ctx ends first.
func wait(t *testing.T, ctx context.Context, d time.Duration) {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		t.Fatalf("gave up waiting: %v", ctx.Err())
	case <-timer.C:
	}
}
