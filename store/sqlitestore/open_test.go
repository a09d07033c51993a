package sqlitestore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

func TestOpen(t *testing.T) {
	t.Parallel()

	t.Run("CreatesPrivateDirectoryAndFile", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "a", "b")
		path := filepath.Join(dir, "tenure.db")
		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		require.Equal(t, path, st.Path())

		info, err := os.Stat(dir)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), info.Mode().Perm())
		info, err = os.Stat(path)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm())

		var mode string
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "PRAGMA journal_mode").Scan(&mode))
		require.Equal(t, "wal", mode)
		var version int
		require.NoError(t, st.DB().QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version))
		require.Equal(t, sqlitestore.SchemaVersion, version)
	})

	t.Run("RelativePathIsMadeAbsolute", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		rel, err := filepath.Rel(mustGetwd(t), filepath.Join(dir, "rel.db"))
		require.NoError(t, err)
		st := sqliteserver.SQLiteStore(t, rel, sqlitestore.Config{})
		require.Equal(t, filepath.Join(dir, "rel.db"), st.Path())
	})

	t.Run("PathWithURICharacters", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "a b?c#d%20e&f", "x?y.db")
		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		require.Equal(t, path, st.Path())
		_, err := st.Acquire(t.Context(), store.AcquireParams{Name: "x", Holder: testutil.Holder(t, "h"), TTL: time.Minute})
		require.NoError(t, err)
		info, err := os.Stat(path)
		require.NoError(t, err)
		require.Positive(t, info.Size(), "the database lives at the path given, not at a decoded or truncated one")
		_, err = os.Stat(path + "-wal")
		require.NoError(t, err)
	})

	t.Run("ReopenKeepsTokensGoingUp", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := filepath.Join(t.TempDir(), "tenure.db")
		name := testutil.UniqueName(t)
		h := testutil.Holder(t, "first")

		st, err := sqlitestore.Open(ctx, path, sqlitestore.Config{})
		require.NoError(t, err)
		g, err := st.Acquire(ctx, store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.NoError(t, st.Release(ctx, store.ReleaseParams{Name: name, Holder: h, Token: g.Token}))
		require.NoError(t, st.Close())

		st = sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		rec, err := st.Get(ctx, name)
		require.NoError(t, err)
		require.Equal(t, store.StateReleased, rec.State)
		require.Equal(t, g.Token, rec.Token)
		g2, err := st.Acquire(ctx, store.AcquireParams{Name: name, Holder: testutil.Holder(t, "second"), TTL: time.Minute})
		require.NoError(t, err)
		require.Greater(t, g2.Token, g.Token)
	})

	t.Run("CounterRowCannotBeDeletedOrLowered", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
		_, err := st.Acquire(ctx, store.AcquireParams{Name: "x", Holder: testutil.Holder(t, "h"), TTL: time.Minute})
		require.NoError(t, err)

		_, err = st.DB().ExecContext(ctx, "DELETE FROM tenure_counter")
		require.ErrorContains(t, err, "never be deleted")
		_, err = st.DB().ExecContext(ctx, "UPDATE tenure_counter SET last_token = 0")
		require.ErrorContains(t, err, "never go down")
		var last int64
		require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT last_token FROM tenure_counter").Scan(&last))
		require.Equal(t, int64(1), last)
	})

	t.Run("TokenStaysAboveALaggingCounter", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
		h := testutil.Holder(t, "h")
		// A lease row carrying a token the counter has not reached, as
		// after restoring the counter from an older copy of the file.
		_, err := st.DB().ExecContext(ctx, `INSERT INTO tenure_leases
    (name, holder_label, holder_instance, token, seq, acquired_at, expires_at, released)
VALUES ('x', 'old', 'old', 41, 3, 0, 0, 1)`)
		require.NoError(t, err)
		g, err := st.Acquire(ctx, store.AcquireParams{Name: "x", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.Equal(t, store.Token(42), g.Token)
	})

	t.Run("NewerSchemaIsRefused", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "tenure.db")
		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		_, err := st.DB().ExecContext(t.Context(), "PRAGMA user_version = 99")
		require.NoError(t, err)

		_, err = sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
		require.ErrorContains(t, err, "schema version 99")
		require.ErrorContains(t, err, path)
	})

	t.Run("BadPaths", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		garbage := filepath.Join(dir, "garbage.db")
		require.NoError(t, os.WriteFile(garbage, []byte("this is not a database, it is a shopping list: eggs, milk, bread, and more"), 0o600))
		plain := filepath.Join(dir, "plain")
		require.NoError(t, os.WriteFile(plain, nil, 0o600))

		for _, tc := range []struct {
			name, path string
			want       []string
		}{
			{"Empty", "", []string{"path is empty"}},
			{"Directory", dir, []string{dir, "is a directory"}},
			{"NotADatabase", garbage, []string{garbage, "not a SQLite database"}},
			{"ParentIsAFile", filepath.Join(plain, "tenure.db"), []string{plain, "cannot create directory"}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				st, err := sqlitestore.Open(t.Context(), tc.path, sqlitestore.Config{})
				require.Error(t, err)
				require.Nil(t, st)
				for _, w := range tc.want {
					require.ErrorContains(t, err, w)
				}
				require.ErrorContains(t, err, "sqlitestore: ")
			})
		}
	})

	t.Run("UnwritableDirectory", func(t *testing.T) {
		t.Parallel()
		// /proc/self is a directory in which nobody may create a file,
		// root included; a read-only directory refuses everyone but root.
		dirs := []string{"/proc/self"}
		if os.Geteuid() != 0 {
			ro := filepath.Join(t.TempDir(), "ro")
			require.NoError(t, os.Mkdir(ro, 0o500))
			dirs = append(dirs, ro)
		}
		for _, dir := range dirs {
			path := filepath.Join(dir, "tenure.db")
			_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{})
			require.ErrorContains(t, err, path)
			require.ErrorContains(t, err, "writable")
		}
	})

	t.Run("InvalidConfig", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "tenure.db")
		for _, d := range []time.Duration{-time.Second, time.Microsecond} {
			_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{BusyTimeout: d})
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, "BusyTimeout")
			_, err = sqlitestore.Open(t.Context(), path, sqlitestore.Config{PollInterval: d})
			require.ErrorIs(t, err, store.ErrInvalid)
			require.ErrorContains(t, err, "PollInterval")
		}
		_, err := os.Stat(path)
		require.ErrorIs(t, err, os.ErrNotExist, "an invalid config must create nothing")
	})
}

func TestBusy(t *testing.T) {
	t.Parallel()

	t.Run("LockHeldPastTimeoutIsUnavailable", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		path := filepath.Join(t.TempDir(), "tenure.db")
		blocker := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{BusyTimeout: 50 * time.Millisecond})
		h := testutil.Holder(t, "h")

		tx, err := blocker.DB().BeginTx(ctx, nil) // IMMEDIATE: holds the write lock.
		require.NoError(t, err)
		_, err = st.Acquire(ctx, store.AcquireParams{Name: "x", Holder: h, TTL: time.Minute})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.ErrorContains(t, err, "busy timeout (50ms)")
		require.ErrorContains(t, err, path)
		require.NoError(t, tx.Rollback())

		g, err := st.Acquire(ctx, store.AcquireParams{Name: "x", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		require.Equal(t, int64(1), g.Seq)
	})

	t.Run("QueuedCallsGiveUpToo", func(t *testing.T) {
		t.Parallel()
		ctx := t.Context()
		st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{BusyTimeout: 50 * time.Millisecond})
		tx, err := st.DB().BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback()) }()

		errs := make([]error, 4)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Go(func() {
				_, errs[i] = st.Acquire(ctx, store.AcquireParams{Name: fmt.Sprint(i), Holder: testutil.Holder(t, "h"), TTL: time.Minute})
			})
		}
		wg.Wait()
		for i, err := range errs {
			require.ErrorIs(t, err, store.ErrUnavailable, "call %d", i)
			require.ErrorContains(t, err, "busy timeout (50ms)", "call %d", i)
		}
	})

	t.Run("ContextEndedIsUnavailable", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "tenure.db")
		blocker := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
		st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{BusyTimeout: time.Minute})

		tx, err := blocker.DB().BeginTx(t.Context(), nil)
		require.NoError(t, err)
		defer func() { require.NoError(t, tx.Rollback()) }()
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		_, err = st.Renew(ctx, []store.RenewParams{{Name: "x", Holder: testutil.Holder(t, "h"), Token: 1, Seq: 1, TTL: time.Minute}})
		require.ErrorIs(t, err, store.ErrUnavailable)
		require.True(t, errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled), "got %v", err)
	})
}

func TestClosed(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "a second Close does nothing")
	_, err = st.List(ctx)
	require.ErrorIs(t, err, store.ErrClosed)
	require.Error(t, st.DB().PingContext(ctx), "Close closes the database handle it opened")
}

// TestDefaultPath is not parallel: t.Setenv cannot be.
func TestDefaultPath(t *testing.T) {
	t.Run("XDGStateHome", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "/srv/state")
		p, err := sqlitestore.DefaultPath()
		require.NoError(t, err)
		require.Equal(t, "/srv/state/tenure/tenure.db", p)
	})
	t.Run("RelativeXDGStateHomeIsIgnored", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "state")
		t.Setenv("HOME", "/home/ada")
		p, err := sqlitestore.DefaultPath()
		require.NoError(t, err)
		require.Equal(t, "/home/ada/.local/state/tenure/tenure.db", p)
	})
	t.Run("NoHome", func(t *testing.T) {
		t.Setenv("XDG_STATE_HOME", "")
		t.Setenv("HOME", "")
		_, err := sqlitestore.DefaultPath()
		require.ErrorContains(t, err, "XDG_STATE_HOME")
	})
}

func mustGetwd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	require.NoError(t, err)
	return wd
}
