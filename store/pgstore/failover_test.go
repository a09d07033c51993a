package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// lostBumps is how many tokens the primary hands out that its standby
// never receives: more than the 32 values by which PostgreSQL logs a
// sequence ahead of what it handed out (a promoted standby resumes from
// the logged value), so that some of them are reissued.
const lostBumps = 40

// TestPromotedStandbyReusesTokensUntilTheFloorIsRaised shows what an
// asynchronous failover does to tokens, with a real primary and standby:
// the tokens the primary handed out after the standby's last replayed WAL
// are handed out again by the promoted standby, and RaiseTokenFloor, run
// on the new primary before any worker acquires there, puts the next
// token above all of them.
func TestPromotedStandbyReusesTokensUntilTheFloorIsRaised(t *testing.T) {
	t.Parallel()
	pair := pgserver.OwnPostgresPair(t)
	ctx := t.Context()
	open := func(url string) *pgstore.Store {
		pool, err := pgxpool.New(ctx, url)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		s, err := pgstore.New(pool, pgstore.Config{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	h := testutil.Holder(t, "worker")
	cycle := func(s *pgstore.Store, name string) store.Token {
		g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, s.Release(ctx, store.ReleaseParams{Name: name, Holder: h, Token: g.Token}))
		return g.Token
	}

	old := open(pair.Primary.URL)
	require.NoError(t, old.Migrate(ctx))
	replayed := cycle(old, "nightly-billing")
	require.NoError(t, pair.WaitReplayed(ctx))

	// The standby falls behind (here: it is down), and the primary goes
	// on handing out tokens, then crashes.
	pair.Standby.Kill()
	var lost store.Token
	for i := range lostBumps {
		lost = cycle(old, fmt.Sprintf("job-%d", i))
	}
	require.Greater(t, lost, replayed)
	require.NoError(t, pair.Failover(ctx))

	promoted := open(pair.Primary.URL)
	again := cycle(promoted, "nightly-billing")
	require.LessOrEqual(t, again, lost, "the promoted standby hands out a token the old primary handed out already")

	floor, err := promoted.RaiseTokenFloor(ctx)
	require.NoError(t, err)
	require.Greater(t, floor, lost)
	after := cycle(promoted, "nightly-billing")
	require.Greater(t, after, lost, "after the floor, every token is above every token handed out before the failover")
	require.Greater(t, after, floor, "tokens go on from the floor")
}

// TestRaiseTokenFloorNeedsTheOwner checks that the run-time role cannot
// move the sequence, and the owner can, to the server's clock at least.
func TestRaiseTokenFloorNeedsTheOwner(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, modes["CacheStatement"], "")
	role := pgserver.PostgresRole(t, owner)
	cfg := pgserver.PostgresConfig(t)
	h := pgserver.PostgresHarness{Owner: owner, Pool: pgserver.PostgresPool(t, modes["CacheStatement"], role), Role: role,
		Config: func(testing.TB) pgstore.Config { return cfg }}
	worker := h.NewStore(t).(*pgstore.Store)
	_, err := worker.RaiseTokenFloor(t.Context())
	require.ErrorContains(t, err, "permission denied", "the run-time role has no privilege on the sequence")
	require.ErrorContains(t, err, "as the schema's owner")

	s, err := pgstore.New(owner, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	before := time.Now()
	floor, err := s.RaiseTokenFloor(t.Context())
	require.NoError(t, err)
	require.GreaterOrEqual(t, int64(floor), before.Add(-time.Minute).UnixMicro(), "the floor is the server's clock in microseconds")
	g, err := worker.Acquire(t.Context(), store.AcquireParams{Name: "job", Holder: testutil.Holder(t, "w"), TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, floor+1, g.Token)
}
