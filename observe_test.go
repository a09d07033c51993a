package tenure_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testserver/redisserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/memstore"
)

// watch runs c.Observe(name) until the test ends and hands over each
// observation; fn may hold each call until the test lets it go.
func watch(t *testing.T, c *tenure.Client, name string) <-chan tenure.Observation {
	t.Helper()
	seen := make(chan tenure.Observation, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Observe(ctx, name, func(o tenure.Observation) { seen <- o }) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return seen
}

func TestObserveFollowsTheHolder(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		leader := setup(t, nil, tenure.Config{TTL: ttl, Label: "leader"})
		follower := setup(t, leader.store, tenure.Config{TTL: ttl, Label: "follower"})
		seen := watch(t, follower.client, "billing")

		require.Equal(t, tenure.Observation{Name: "billing"}, <-seen, "first, who holds it now: nobody")

		start := time.Now()
		l := leader.acquire(t, "billing")
		got := <-seen
		require.True(t, got.Held)
		require.Equal(t, l.Holder(), got.Holder)
		require.Equal(t, l.Token(), got.Token)
		require.LessOrEqual(t, time.Since(start), ttl/3, "a fresh acquisition is seen within a renew interval")

		elapse(2 * ttl)
		synctest.Wait()
		require.Empty(t, seen, "renewals are no change")

		start = time.Now()
		require.NoError(t, l.Release(t.Context()))
		require.Equal(t, tenure.Observation{Name: "billing"}, <-seen)
		require.Less(t, time.Since(start), time.Second, "the release notification is seen at once")

		// A holder that stops renewing (a crash) is seen gone at its
		// expiry by the store's clock.
		h := testutil.Holder(t, "crashed")
		acquired := time.Now()
		g, err := leader.store.Acquire(t.Context(), store.AcquireParams{Name: "billing", Holder: h, TTL: ttl})
		require.NoError(t, err)
		got = <-seen
		require.Equal(t, h, got.Holder)
		require.Equal(t, g.Token, got.Token)
		require.Equal(t, tenure.Observation{Name: "billing"}, <-seen)
		require.GreaterOrEqual(t, time.Since(acquired), ttl, "not before the expiry")
		require.Less(t, time.Since(acquired), ttl+time.Second, "at the expiry, not a poll later")
	})
}

// TestPayloadReachesFollowers: what the leader publishes (its address) is
// on its Lease, in a refused follower's HeldError and in every follower's
// Observation, and the next leader's replaces it.
func TestPayloadReachesFollowers(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		leader := setup(t, nil, tenure.Config{TTL: ttl, Label: "leader", Payload: "10.0.0.7:8443"})
		follower := setup(t, leader.store, tenure.Config{TTL: ttl, Label: "follower", Payload: "10.0.0.8:8443"})
		seen := watch(t, follower.client, "billing")
		require.Equal(t, tenure.Observation{Name: "billing"}, <-seen)

		l := leader.acquire(t, "billing")
		require.Equal(t, "10.0.0.7:8443", l.Payload())
		got := <-seen
		require.Equal(t, l.Token(), got.Token)
		require.Equal(t, "10.0.0.7:8443", got.Payload, "a follower observes the leader's address")

		_, err := follower.client.Acquire(t.Context(), "billing")
		var held *tenure.HeldError
		require.ErrorAs(t, err, &held)
		require.Equal(t, "10.0.0.7:8443", held.Payload, "a refused follower is told the leader's address")

		require.NoError(t, l.Release(t.Context()))
		require.Equal(t, tenure.Observation{Name: "billing"}, <-seen, "no payload once nobody holds it")
		next := follower.acquire(t, "billing")
		got = <-seen
		require.Equal(t, next.Token(), got.Token)
		require.Equal(t, "10.0.0.8:8443", got.Payload, "the next leader's address replaces it")
	})
}

func TestObserveCoalescesChangesWhileFnRuns(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		release := make(chan struct{})
		var seen []tenure.Observation
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- b.client.Observe(ctx, "billing", func(o tenure.Observation) {
				seen = append(seen, o)
				if len(seen) == 1 {
					<-release
				}
			})
		}()
		synctest.Wait()
		var last *tenure.Lease
		for range 3 {
			if last != nil {
				require.NoError(t, last.Release(t.Context()))
			}
			last = b.acquire(t, "billing")
		}
		close(release)
		elapse(ttl)
		synctest.Wait()
		cancel()
		require.NoError(t, <-done)
		require.Len(t, seen, 2, "the three tenures granted while fn ran are one change")
		require.False(t, seen[0].Held)
		require.Equal(t, last.Token(), seen[1].Token, "the latest is reported")
	})
}

func TestObserveRefusesBadInput(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		called := false
		err := b.client.Observe(t.Context(), "", func(tenure.Observation) { called = true })
		require.ErrorIs(t, err, tenure.ErrInvalid)
		require.ErrorContains(t, b.client.Observe(t.Context(), "billing", nil), "fn is nil")
		require.False(t, called)
	})
}

func TestObserveEndsWhenTheStoreCloses(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		b := setup(t, nil, tenure.Config{TTL: ttl})
		done := make(chan error, 1)
		first := make(chan struct{}, 1)
		go func() {
			done <- b.client.Observe(t.Context(), "billing", func(tenure.Observation) { first <- struct{}{} })
		}()
		<-first
		require.NoError(t, b.store.(interface{ Close() error }).Close())
		elapse(ttl)
		require.ErrorIs(t, <-done, tenure.ErrClosed)
	})
}

func TestObserveOnRealStores(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		open func(t *testing.T) store.Store
	}{
		{"Postgres", func(t *testing.T) store.Store {
			return pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}.NewStore(t)
		}},
		{"Redis", func(t *testing.T) store.Store {
			return redisserver.RedisHarness{Client: redisserver.RedisClient(t)}.NewStore(t)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := tc.open(t)
			const short = 2 * time.Second
			leader := setup(t, st, tenure.Config{TTL: short, Label: "leader"})
			follower := setup(t, st, tenure.Config{TTL: short, Label: "follower"})
			seen := watch(t, follower.client, "billing")
			const wait = 10 * time.Second

			require.Equal(t, tenure.Observation{Name: "billing"}, testutil.Receive(t, seen, "the first observation", wait))
			l := leader.acquire(t, "billing")
			got := testutil.Receive(t, seen, "the acquisition", wait)
			require.True(t, got.Held)
			require.Equal(t, l.Holder(), got.Holder)
			require.Equal(t, l.Token(), got.Token)
			require.Positive(t, got.Remaining)
			require.LessOrEqual(t, got.Remaining, short)
			firstToken := got.Token

			require.NoError(t, l.Release(t.Context()))
			require.Equal(t, tenure.Observation{Name: "billing"}, testutil.Receive(t, seen, "the release", wait))

			next, err := follower.client.Campaign(t.Context(), "billing")
			require.NoError(t, err)
			got = testutil.Receive(t, seen, "the next tenure", wait)
			require.Equal(t, next.Token(), got.Token)
			require.Equal(t, follower.client.Holder(), got.Holder, "an observer sees its own client's tenure too")
			require.Greater(t, got.Token, firstToken)
		})
	}
}

// unreadableStore fails every Get while down is set.
type unreadableStore struct {
	store.Store
	down atomic.Bool
	gets atomic.Int64
}

func (s *unreadableStore) Get(ctx context.Context, name string) (store.Record, error) {
	if s.down.Load() {
		s.gets.Add(1)
		return store.Record{}, fmt.Errorf("%w: connection refused", tenure.ErrUnavailable)
	}
	return s.Store.Get(ctx, name)
}

func TestObserveRidesOutAnUnreadableStore(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		m := memstore.New(memstore.Config{})
		t.Cleanup(func() { _ = m.Close() })
		st := &unreadableStore{Store: m}
		logs := &logLines{}
		b := setup(t, st, tenure.Config{TTL: ttl, Logger: logs.logger()})
		seen := watch(t, b.client, "billing")
		require.False(t, (<-seen).Held)

		st.down.Store(true)
		l := b.acquire(t, "billing")
		elapse(2 * ttl)
		synctest.Wait()
		require.Greater(t, st.gets.Load(), int64(3), "the observer keeps trying")
		require.Empty(t, seen, "nothing is reported while the store cannot be read")
		failed := logs.lines(t, "cannot read the lease while observing")
		require.Len(t, failed, 1, "the first failure is logged, not every retry")
		require.Equal(t, "billing", failed[0]["lease"])
		require.Contains(t, failed[0]["err"], "connection refused")

		st.down.Store(false)
		got := <-seen
		require.Equal(t, l.Token(), got.Token)
		back := logs.lines(t, "store readable again")
		require.Len(t, back, 1)
		require.EqualValues(t, st.gets.Load(), back[0]["failures"])
	})
}
