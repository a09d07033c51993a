package pgstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// TestRenewalsUpdateInPlace renews a few hundred leases once and requires
// PostgreSQL to have made nearly every renewal a heap-only (HOT) update: a
// page filled to half has room for a new version of each of its rows
// (migration 004), where at the default fillfactor almost none is. Later
// rounds are HOT as far as pruning keeps up, which other open transactions
// in the database can hold back: not something this test can pin.
func TestRenewalsUpdateInPlace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()

	// One connection: its backend does every update, and asking it to
	// flush its statistics makes them readable at once.
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL())
	require.NoError(t, err)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	s := newStore(t, pool, b.cfg)

	const leases = 300
	h := store.Holder{Label: "hot", Instance: "i1"}
	batch := make([]store.RenewParams, leases)
	for i := range batch {
		name := fmt.Sprintf("lease-%03d", i)
		g, err := s.Acquire(ctx, store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		batch[i] = store.RenewParams{Name: name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}
	}
	res, err := s.Renew(ctx, batch)
	require.NoError(t, err)
	for i, r := range res {
		require.True(t, r.Renewed, batch[i].Name)
	}

	_, err = pool.Exec(ctx, "SELECT pg_stat_force_next_flush()")
	require.NoError(t, err)
	obj := s.Objects()
	var updates, hot int64
	require.NoError(t, pool.QueryRow(ctx,
		"SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relid = $1::regclass",
		pgx.Identifier{obj.Schema, obj.Leases}.Sanitize()).Scan(&updates, &hot))
	require.GreaterOrEqual(t, updates, int64(leases), "every renewal is an update")
	require.Greater(t, float64(hot), 0.95*float64(updates), "%d of %d updates were HOT", hot, updates)
}
