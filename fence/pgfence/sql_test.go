package pgfence_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// sqlDB opens a database/sql handle, through pgx's stdlib driver, on the
// role's pool of b.
func (b *testBundle) sqlDB(t *testing.T) *sql.DB {
	t.Helper()
	db := stdlib.OpenDBFromPool(b.pool)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return db
}

// sqlBegin starts a database/sql transaction, rolled back at the end of the
// test unless committed. It is not bound to t.Context(), which ends before
// the cleanup runs.
func sqlBegin(t *testing.T, db *sql.DB) *sql.Tx {
	t.Helper()
	tx, err := db.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Errorf("rollback: %v", err)
		}
	})
	return tx
}

func (b *testBundle) sqlWrite(t *testing.T, tx *sql.Tx, tok store.Token) {
	t.Helper()
	_, err := tx.ExecContext(t.Context(), "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(tok))
	require.NoError(t, err)
}

// TestSQL runs the fence helpers inside database/sql transactions (pgx's
// stdlib driver): the same SQL, the same errors as through pgx.
func TestSQL(t *testing.T) {
	t.Parallel()

	t.Run("HighestTokenWins", func(t *testing.T) {
		t.Parallel()
		testHighestTokenWins(t, func(t *testing.T, b *testBundle) pgfence.Querier { return pgfence.SQL(b.sqlDB(t)) })
	})

	t.Run("StaleTokenRefusedInItsTransaction", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		db := b.sqlDB(t)
		ctx := t.Context()

		tx := sqlBegin(t, db)
		require.NoError(t, b.fencer.Fence(ctx, pgfence.SQL(tx), "r", 8))
		b.sqlWrite(t, tx, 8)
		require.NoError(t, tx.Commit())

		tx = sqlBegin(t, db)
		err := b.fencer.Fence(ctx, pgfence.SQL(tx), "r", 2)
		requireFenced(t, err, "r", 2, 8)
		_, err = tx.ExecContext(ctx, "INSERT INTO "+b.writes+" (token) VALUES (2)")
		require.Error(t, err, "the transaction is aborted after a refusal")
		require.Error(t, tx.Commit())
		require.Equal(t, []int64{8}, b.writtenTokens(t), "only the current token's write is in")
	})

	t.Run("OnAConnection", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		conn, err := b.sqlDB(t).Conn(t.Context())
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, conn.Close()) })
		require.NoError(t, b.fencer.Fence(t.Context(), pgfence.SQL(conn), "r", 3))
		requireFenced(t, b.fencer.Fence(t.Context(), pgfence.SQL(conn), "r", 1), "r", 1, 3)
	})

	t.Run("CheckLease", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		db := b.sqlDB(t)
		ctx := t.Context()
		g := b.acquire(t, "job", "a", time.Minute)

		tx := sqlBegin(t, db)
		require.NoError(t, b.fencer.CheckLease(ctx, pgfence.SQL(tx), "job", g.Token))
		b.sqlWrite(t, tx, g.Token)
		require.NoError(t, tx.Commit())

		require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
		next := b.acquire(t, "job", "b", time.Minute)
		tx = sqlBegin(t, db)
		err := b.fencer.CheckLease(ctx, pgfence.SQL(tx), "job", g.Token)
		requireFenced(t, err, "lease:job", g.Token, next.Token)
		require.ErrorContains(t, err, "superseded")

		requireFenced(t, b.fencer.CheckLease(ctx, pgfence.SQL(db), "absent", 1), "lease:absent", 1, 0)
		require.Equal(t, []int64{int64(g.Token)}, b.writtenTokens(t))
	})

	t.Run("StrictOneOfTwoClones", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		db := b.sqlDB(t)
		b.requireOneOfTwoClones(t, strictTxs{
			begin: func(t *testing.T) (pgfence.Querier, func() error) {
				tx := sqlBegin(t, db)
				return pgfence.SQL(tx), tx.Commit
			},
			checkAlone: func(ctx context.Context, c store.ChainWrite) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback() }() // The check is expected to fail; the rollback only ends the transaction.
				return strictErr(b.fencer.CheckLeaseStrict(ctx, pgfence.SQL(tx), c))
			},
		})
	})

	t.Run("NotMigrated", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgx.QueryExecModeCacheStatement)
		f, err := pgfence.New(pgstore.Config{Schema: b.cfg.Schema, TablePrefix: "never_migrated_"})
		require.NoError(t, err)
		err = f.Fence(t.Context(), pgfence.SQL(b.sqlDB(t)), "r", 1)
		require.ErrorIs(t, err, store.ErrNotMigrated)
		require.ErrorContains(t, err, "tenure migrate")
	})

	t.Run("Invalid", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		require.ErrorIs(t, pgfence.Fence(ctx, pgfence.SQL(nil), "r", 1), store.ErrInvalid)
		require.ErrorIs(t, pgfence.StrictSQLTx(ctx, nil, nil, nil), store.ErrInvalid)
	})
}

// TestStrictSQLTx runs strict writes through a real client in database/sql
// transactions: they interleave with its renewals without being taken for a
// clone's, a rolled-back write costs nothing, and no write passes after the
// tenure ended.
func TestStrictSQLTx(t *testing.T) {
	t.Parallel()
	b := setup(t, pgx.QueryExecModeCacheStatement)
	db := b.sqlDB(t)
	ctx := t.Context()
	const ttl = 2 * time.Second
	l := b.runClient(t, "strict-sql", ttl)

	write := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO "+b.writes+" (token) VALUES ($1)", int64(l.Token()))
		return err
	}
	// Write back to back for a TTL: renewals meet the writes' row locks and
	// find the chain moved on by the holder's own commits.
	n := 0
	for start := time.Now(); time.Since(start) < ttl; n++ {
		require.NoError(t, b.fencer.StrictSQLTx(ctx, db, l, write), "write %d", n)
	}
	require.NoError(t, l.Err(), "the holder's own writes were taken for a clone's")
	require.Len(t, b.writtenTokens(t), n)

	errAbandoned := errors.New("abandoned")
	err := b.fencer.StrictSQLTx(ctx, db, l, func(context.Context, *sql.Tx) error { return errAbandoned })
	require.ErrorIs(t, err, errAbandoned)
	require.NoError(t, b.fencer.StrictSQLTx(ctx, db, l, write), "a rolled-back write costs nothing")
	rec, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, rec.Seq, l.Seq(), "the client is in step with the chain")

	require.NoError(t, l.Release(ctx))
	require.ErrorIs(t, b.fencer.StrictSQLTx(ctx, db, l, write), tenure.ErrLost, "no write after the tenure ended")
	require.Len(t, b.writtenTokens(t), n+1)
}
