package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

func TestFence(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		st       *sqlitestore.Store
		resource string
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		return &testBundle{
			st:       sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{}),
			resource: testutil.UniqueName(t),
		}
	}
	// fence runs Fence for tok in a transaction of its own and commits it
	// when Fence passed.
	fence := func(t *testing.T, b *testBundle, tok store.Token) error {
		t.Helper()
		return inTx(t.Context(), b.st.DB(), func(tx *sql.Tx) error {
			return sqlitestore.Fence(t.Context(), tx, b.resource, tok)
		})
	}
	recorded := func(t *testing.T, b *testBundle) store.Token {
		t.Helper()
		var tok store.Token
		require.NoError(t, b.st.DB().QueryRowContext(t.Context(),
			"SELECT token FROM tenure_fence WHERE resource = ?", b.resource).Scan(&tok))
		return tok
	}

	t.Run("StaleTokenIsFencedWithFields", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, fence(t, b, 5))

		err := fence(t, b, 4)
		require.ErrorIs(t, err, store.ErrFenced)
		var fe *store.FencedError
		require.ErrorAs(t, err, &fe)
		require.Equal(t, store.FencedError{Resource: b.resource, Offered: 4, Recorded: 5}, *fe)
		require.Equal(t, store.Token(5), recorded(t, b))
	})

	t.Run("EqualAndGreaterPass", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, fence(t, b, 5))
		require.NoError(t, fence(t, b, 5))
		require.Equal(t, store.Token(5), recorded(t, b))
		require.NoError(t, fence(t, b, 7))
		require.Equal(t, store.Token(7), recorded(t, b))
	})

	t.Run("RollbackLeavesFenceUnchanged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.NoError(t, fence(t, b, 3))

		tx, err := b.st.DB().BeginTx(t.Context(), nil)
		require.NoError(t, err)
		require.NoError(t, sqlitestore.Fence(t.Context(), tx, b.resource, 9))
		require.NoError(t, tx.Rollback())

		require.Equal(t, store.Token(3), recorded(t, b))
		require.NoError(t, fence(t, b, 4), "a token below the rolled-back one still passes")
	})

	t.Run("FencedWriteCommitsWithTheFence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		_, err := b.st.DB().ExecContext(ctx, "CREATE TABLE ledger (token INTEGER NOT NULL, amount INTEGER NOT NULL)")
		require.NoError(t, err)
		charge := func(tok store.Token, amount int) error {
			return inTx(ctx, b.st.DB(), func(tx *sql.Tx) error {
				if err := sqlitestore.Fence(ctx, tx, b.resource, tok); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, "INSERT INTO ledger (token, amount) VALUES (?, ?)", tok, amount)
				return err
			})
		}
		require.NoError(t, charge(2, 10))
		require.NoError(t, charge(3, 20))
		require.ErrorIs(t, charge(2, 99), store.ErrFenced)

		var n, sum int
		require.NoError(t, b.st.DB().QueryRowContext(ctx, "SELECT count(*), sum(amount) FROM ledger").Scan(&n, &sum))
		require.Equal(t, 2, n)
		require.Equal(t, 30, sum)
	})

	t.Run("SupersededHolderIsFenced", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ctx := t.Context()
		name := testutil.UniqueName(t)
		first := testutil.Holder(t, "first")
		g1, err := b.st.Acquire(ctx, store.AcquireParams{Name: name, Holder: first, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, b.st.Release(ctx, store.ReleaseParams{Name: name, Holder: first, Token: g1.Token}))
		g2, err := b.st.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "second"), TTL: time.Minute})
		require.NoError(t, err)

		require.NoError(t, fence(t, b, g2.Token))
		err = fence(t, b, g1.Token)
		require.ErrorIs(t, err, store.ErrFenced)
		require.ErrorContains(t, err, "stale")
	})

	t.Run("InvalidInput", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.ErrorIs(t, sqlitestore.Fence(t.Context(), nil, "r", 1), store.ErrInvalid)
		for _, tc := range []struct {
			name     string
			resource string
			tok      store.Token
		}{
			{"EmptyResource", "", 1},
			{"LongResource", strings.Repeat("r", store.MaxNameLen+1), 1},
			{"InvalidUTF8", "\xff", 1},
			{"ZeroToken", "r", 0},
			{"NegativeToken", "r", -1},
		} {
			err := inTx(t.Context(), b.st.DB(), func(tx *sql.Tx) error {
				return sqlitestore.Fence(t.Context(), tx, tc.resource, tc.tok)
			})
			require.ErrorIs(t, err, store.ErrInvalid, tc.name)
		}
		var n int
		require.NoError(t, b.st.DB().QueryRowContext(t.Context(), "SELECT count(*) FROM tenure_fence").Scan(&n))
		require.Zero(t, n, "refused input changes nothing")
	})

	t.Run("UnmigratedDatabase", func(t *testing.T) {
		t.Parallel()
		connector, err := sqlite.NewConnector(filepath.Join(t.TempDir(), "other.db"))
		require.NoError(t, err)
		db := sql.OpenDB(connector)
		t.Cleanup(func() { require.NoError(t, db.Close()) })

		err = inTx(t.Context(), db, func(tx *sql.Tx) error {
			return sqlitestore.Fence(t.Context(), tx, "r", 1)
		})
		require.ErrorIs(t, err, store.ErrNotMigrated)
		require.False(t, errors.Is(err, store.ErrFenced))
	})

	t.Run("CanceledContext", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		tx, err := b.st.DB().BeginTx(t.Context(), nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }() // The canceled statement may already have ended the transaction.
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		require.ErrorIs(t, sqlitestore.Fence(ctx, tx, b.resource, 1), store.ErrUnavailable)
	})
}
