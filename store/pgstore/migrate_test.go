package pgstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/store/pgstore"
)

// seqCache returns the token sequence's CACHE setting.
func (b *testBundle) seqCache(t *testing.T) int64 {
	t.Helper()
	var cache int64
	require.NoError(t, b.owner.QueryRow(t.Context(),
		"SELECT seqcache FROM pg_catalog.pg_sequence WHERE seqrelid = $1::regclass", b.seq()).Scan(&cache))
	return cache
}

func (b *testBundle) seq() string {
	obj := b.store.Objects()
	return pgx.Identifier{obj.Schema, obj.TokenSeq}.Sanitize()
}

func TestTokenSequenceCache(t *testing.T) {
	t.Parallel()

	// Why it matters: a cached sequence hands out values out of order
	// across sessions.
	t.Run("CachedIsOutOfOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		ctx := t.Context()
		_, err := b.owner.Exec(ctx, "ALTER SEQUENCE "+b.seq()+" CACHE 20")
		require.NoError(t, err)
		c1, err := b.owner.Acquire(ctx)
		require.NoError(t, err)
		defer c1.Release()
		c2, err := b.owner.Acquire(ctx)
		require.NoError(t, err)
		defer c2.Release()
		var a1, b1, a2 int64
		require.NoError(t, c1.QueryRow(ctx, "SELECT nextval($1::regclass)", b.seq()).Scan(&a1))
		require.NoError(t, c2.QueryRow(ctx, "SELECT nextval($1::regclass)", b.seq()).Scan(&b1))
		require.NoError(t, c1.QueryRow(ctx, "SELECT nextval($1::regclass)", b.seq()).Scan(&a2))
		require.Greater(t, b1, a2, "the first session's next value is below the second's: tokens out of order")
	})

	// A sequence made with a cache before the first migration (by hand, or
	// an old tool) is set to CACHE 1 by migration 001.
	t.Run("FixedByMigration", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		ctx := t.Context()
		_, err := b.owner.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{b.cfg.Schema}.Sanitize())
		require.NoError(t, err)
		_, err = b.owner.Exec(ctx, "CREATE SEQUENCE "+b.seq()+" AS bigint MINVALUE 1 NO CYCLE CACHE 50")
		require.NoError(t, err)
		require.Equal(t, int64(50), b.seqCache(t))
		require.NoError(t, b.store.Migrate(ctx))
		require.Equal(t, int64(1), b.seqCache(t))
		require.Equal(t, pgstore.Versions(), b.versions(t))
	})

	// A sequence altered after migration 001 ran fails every Migrate with
	// an error that says what to run.
	t.Run("AlteredAfterMigration", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		ctx := t.Context()
		require.Equal(t, int64(1), b.seqCache(t))
		_, err := b.owner.Exec(ctx, "ALTER SEQUENCE "+b.seq()+" CACHE 20")
		require.NoError(t, err)
		err = b.store.Migrate(ctx)
		require.ErrorContains(t, err, "CACHE 20")
		require.ErrorContains(t, err, "ALTER SEQUENCE "+b.seq()+" CACHE 1")
		_, err = b.owner.Exec(ctx, "ALTER SEQUENCE "+b.seq()+" CACHE 1")
		require.NoError(t, err)
		require.NoError(t, b.store.Migrate(ctx))
	})
}
