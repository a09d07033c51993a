package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// refusals is a real store that reports each acquisition it refused
// because the lease was held (the event that a campaign is waiting), and
// each time a listener of its subscriptions has subscribed.
type refusals struct {
	*mysqlstore.Store // Listen and the rest are the store's own
	held              chan struct{}
	subscribed        chan struct{}
}

func (r refusals) Subscribe() store.Subscription {
	return subscribed{Subscription: r.Store.Subscribe(), subscribed: r.subscribed}
}

type subscribed struct {
	store.Subscription
	subscribed chan struct{}
}

func (s subscribed) Listen(ctx context.Context, notify func(store.Notice)) error {
	return s.Subscription.Listen(ctx, func(n store.Notice) {
		if n.Name == "" {
			select {
			case s.subscribed <- struct{}{}:
			default:
			}
		}
		notify(n)
	})
}

func (r refusals) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	g, err := r.Store.Acquire(ctx, p)
	if errors.Is(err, store.ErrHeld) {
		select {
		case r.held <- struct{}{}:
		default:
		}
	}
	return g, err
}

// runClient runs a client on s with a TTL of one minute until the test
// ends.
func runClient(t testing.TB, s store.Store, label string) *tenure.Client {
	t.Helper()
	return runClientTTL(t, s, label, time.Minute)
}

// runClientTTL runs a client on s with TTL ttl until the test ends.
func runClientTTL(t testing.TB, s store.Store, label string, ttl time.Duration) *tenure.Client {
	t.Helper()
	c, err := tenure.New(s, tenure.Config{Label: label, TTL: ttl})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) }) // Run returns nil once ctx ends.
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return c
}

// handover has a follower in another "process" (its own connection pool
// and Store) campaign for a lease a leader holds with a TTL of one
// minute, then has the leader end its tenure with end, and returns the
// follower's lease, or nil when its campaign did not succeed within 10 s.
func handover(t *testing.T, end func(*tenure.Lease, *mysqlstore.Store, *sql.DB)) (first tenure.Token, next *tenure.Lease) {
	t.Helper()
	cfg := mysqlserver.MySQLConfig(t)
	owner := mysqlserver.MySQLDB(t, "")
	mysqlserver.MySQLSchema(t, owner, cfg)
	leaderDB := mysqlserver.MySQLDB(t, "")
	leaderStore := newStore(t, leaderDB, cfg)
	follower := refusals{Store: newStore(t, mysqlserver.MySQLDB(t, ""), cfg), held: make(chan struct{}, 1), subscribed: make(chan struct{}, 1)}

	leader := runClient(t, leaderStore, "leader")
	lease, err := leader.Acquire(t.Context(), "nightly")
	require.NoError(t, err)

	campaign := make(chan *tenure.Lease, 1)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	client := runClient(t, follower, "follower")
	// The campaign starts once the client listens, so that what wakes it
	// at the release can only be the lease's bell.
	select {
	case <-follower.subscribed:
	case <-ctx.Done():
		t.Fatal("the follower's client never subscribed")
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		l, err := client.Campaign(ctx, "nightly")
		if err != nil {
			t.Logf("campaign: %v", err)
		}
		campaign <- l
	})
	select {
	case <-follower.held: // the campaign was told the lease is held for a minute
	case <-ctx.Done():
		t.Fatal("the follower's campaign never asked for the lease")
	}
	end(lease, leaderStore, leaderDB)
	return lease.Token(), <-campaign
}

// TestHandoverAtRelease: the follower takes the lease over as soon as the
// leader releases it, woken by the lease's bell, rather than at the expiry
// a minute later it was told: its campaign must succeed within 10 s.
func TestHandoverAtRelease(t *testing.T) {
	t.Parallel()
	var released time.Time
	first, next := handover(t, func(l *tenure.Lease, _ *mysqlstore.Store, _ *sql.DB) {
		released = time.Now()
		require.NoError(t, l.Release(t.Context()))
	})
	require.NotNil(t, next, "the follower did not take over before its 10 s deadline; the TTL is 1 minute")
	t.Logf("taken over %s after the release began", time.Since(released))
	require.Greater(t, next.Token(), first)
}

// TestBellsLeaveNoSessionState: a holder's bell lives on a connection of
// its own that the store ends rather than return to the pool, so after
// Close no session holds it.
func TestBellsLeaveNoSessionState(t *testing.T) {
	t.Parallel()
	cfg := mysqlserver.MySQLConfig(t)
	owner := mysqlserver.MySQLDB(t, "")
	mysqlserver.MySQLSchema(t, owner, cfg)
	db := mysqlserver.MySQLDB(t, "")
	s, err := mysqlstore.New(db, cfg)
	require.NoError(t, err)
	h := store.Holder{Label: "a", Instance: "1"}
	_, err = s.Acquire(t.Context(), store.AcquireParams{Name: "x", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	bell := mysqlstore.BellName(s, "x")
	require.Eventually(t, func() bool {
		var user sql.NullInt64
		require.NoError(t, owner.QueryRowContext(t.Context(), "SELECT IS_USED_LOCK(?)", bell).Scan(&user))
		return user.Valid
	}, 10*time.Second, 5*time.Millisecond, "the holder's store never took the lease's bell")
	require.NoError(t, s.Close())
	// The server ends the session (and frees its locks) once it reads
	// the connection's end.
	require.Eventually(t, func() bool {
		var user sql.NullInt64
		require.NoError(t, owner.QueryRowContext(t.Context(), "SELECT IS_USED_LOCK(?)", bell).Scan(&user))
		return !user.Valid
	}, 10*time.Second, 5*time.Millisecond, "the bell is still held after Close")
}

// TestBellConnections: the bells take at most 17 connections of db (the
// holder's and 16 waiting), at most half of db's limit when it has one,
// and none when that leaves fewer than two.
func TestBellConnections(t *testing.T) {
	t.Parallel()
	cfg := mysqlserver.MySQLConfig(t)
	for _, tc := range []struct{ limit, want int }{{0, 17}, {100, 17}, {10, 5}, {4, 2}, {3, 0}, {1, 0}} {
		db := mysqlserver.MySQLDB(t, "")
		db.SetMaxOpenConns(tc.limit)
		s := newStore(t, db, cfg)
		require.Equal(t, tc.want, mysqlstore.BellConns(s), "db limited to %d connections", tc.limit)
	}
}
