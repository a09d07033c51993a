package sqlitestore_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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

// Fresh files opened at once by the concurrent-open tests, and openers
// per file.
const (
	freshFiles   = 40
	freshOpeners = 4
)

// freshFile is the path of fresh file i under dir.
func freshFile(dir string, i int) string {
	return filepath.Join(dir, fmt.Sprintf("f%02d", i), "tenure.db")
}

// openMany opens every fresh file under dir at once, each with a handle of
// its own, and takes a lease in each. Its busy timeout is long: a hundred
// and sixty opens queue on two cores shared with the rest of the suite,
// and an open that waits its turn is what the test wants (one that fails
// with SQLITE_BUSY at once, without waiting, is what it catches).
func openMany(ctx context.Context, dir string, holder store.Holder) error {
	errs := make([]error, freshFiles)
	var wg sync.WaitGroup
	for i := range freshFiles {
		wg.Go(func() {
			started := time.Now()
			st, err := sqlitestore.Open(ctx, freshFile(dir, i), sqlitestore.Config{BusyTimeout: 30 * time.Second})
			if err != nil {
				errs[i] = fmt.Errorf("open file %d (failed after %s): %w", i, time.Since(started).Round(time.Millisecond), err)
				return
			}
			defer st.Close()
			if _, err := st.Acquire(ctx, store.AcquireParams{Name: holder.Label, Holder: holder, TTL: time.Minute}); err != nil {
				errs[i] = fmt.Errorf("acquire in file %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// TestConcurrentOpenOfFreshFiles opens many fresh files at once from
// several processes, released together, as the report had it (about 2 of
// 160 opens failed). Switching a fresh file to WAL takes locks for which
// SQLite may answer SQLITE_BUSY at once, without waiting for the busy
// timeout; Open must wait and retry within it instead of failing.
// [TestOpenWaitsForAWriterOnAFreshFile] shows the cause deterministically.
func TestConcurrentOpenOfFreshFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runChildren(t, "openmany", dir, freshOpeners)
	checkFreshFiles(t, dir)
}

// checkFreshFiles checks that every opener took its lease in every file.
func checkFreshFiles(t *testing.T, dir string) {
	t.Helper()
	for i := range freshFiles {
		st := sqliteserver.SQLiteStore(t, freshFile(dir, i), sqlitestore.Config{})
		recs, err := st.List(t.Context())
		require.NoError(t, err)
		require.Len(t, recs, freshOpeners, "file %d", i)
		for _, r := range recs {
			require.Equal(t, store.StateHeld, r.State)
		}
	}
}

// TestOpenWaitsForAWriterOnAFreshFile opens a fresh file, still in
// rollback-journal mode, while another connection holds its write lock.
// SQLite refuses the switch to WAL with SQLITE_BUSY at once then, without
// its busy handler; Open must wait for the lock within its busy timeout.
func TestOpenWaitsForAWriterOnAFreshFile(t *testing.T) {
	t.Parallel()

	// lock makes a fresh file at path and holds its write lock, as another
	// process creating it would, until the returned function is called.
	lock := func(t *testing.T, path string) func() {
		t.Helper()
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, db.Close()) })
		conn, err := db.Conn(t.Context())
		require.NoError(t, err)
		_, err = conn.ExecContext(t.Context(), "BEGIN IMMEDIATE")
		require.NoError(t, err)
		_, err = conn.ExecContext(t.Context(), "CREATE TABLE other_program (x)")
		require.NoError(t, err)
		return func() {
			_, err := conn.ExecContext(context.WithoutCancel(t.Context()), "COMMIT")
			require.NoError(t, err)
			require.NoError(t, conn.Close())
		}
	}
	type result struct {
		st      *sqlitestore.Store
		err     error
		elapsed time.Duration
	}
	open := func(path string, busy time.Duration) <-chan result {
		done := make(chan result, 1)
		go func() {
			started := time.Now()
			st, err := sqlitestore.Open(t.Context(), path, sqlitestore.Config{BusyTimeout: busy})
			done <- result{st, err, time.Since(started)}
		}()
		return done
	}

	t.Run("LockReleasedWithinTimeout", func(t *testing.T) {
		t.Parallel()
		const hold = 300 * time.Millisecond // how long the other writer keeps the lock
		path := filepath.Join(t.TempDir(), "tenure.db")
		unlock := lock(t, path)
		done := open(path, 10*time.Second)
		select {
		case r := <-done:
			unlock()
			t.Fatalf("Open returned after %s while the file was locked: %v", r.elapsed, r.err)
		case <-time.After(hold):
			unlock()
		}
		r := <-done
		require.NoError(t, r.err)
		t.Cleanup(func() { require.NoError(t, r.st.Close()) })
		require.GreaterOrEqual(t, r.elapsed, hold)
		_, err := r.st.Acquire(t.Context(), store.AcquireParams{Name: "x", Holder: testutil.Holder(t, "h"), TTL: time.Minute})
		require.NoError(t, err)
	})

	t.Run("LockHeldPastTimeout", func(t *testing.T) {
		t.Parallel()
		const busy = 200 * time.Millisecond
		path := filepath.Join(t.TempDir(), "tenure.db")
		unlock := lock(t, path)
		r := <-open(path, busy)
		unlock()
		require.ErrorIs(t, r.err, store.ErrUnavailable)
		require.ErrorContains(t, r.err, "busy timeout (200ms)")
		require.GreaterOrEqual(t, r.elapsed, busy, "Open gave up before its busy timeout")
	})
}

// TestSchemaSQL applies the printed schema to a new file with plain SQL and
// checks that Open takes the file as it is and that it matches the schema
// Open creates itself.
func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	script, err := sqlitestore.SchemaSQL()
	require.NoError(t, err)
	require.Contains(t, script, "PRAGMA journal_mode = WAL;")
	require.Contains(t, script, "CREATE TABLE IF NOT EXISTS tenure_leases")
	require.Contains(t, script, fmt.Sprintf("PRAGMA user_version = %d;", sqlitestore.SchemaVersion))

	dir := t.TempDir()
	byScript := filepath.Join(dir, "script.db")
	db, err := sql.Open("sqlite", byScript)
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, script)
	require.NoError(t, err)
	require.NoError(t, db.Close())

	schema := func(st *sqlitestore.Store) []string {
		rows, err := st.DB().QueryContext(ctx, "SELECT type || ' ' || name || ': ' || coalesce(sql, '') FROM sqlite_schema ORDER BY type, name")
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, rows.Err())
		return out
	}
	scripted := sqliteserver.SQLiteStore(t, byScript, sqlitestore.Config{})
	opened := sqliteserver.SQLiteStore(t, filepath.Join(dir, "open.db"), sqlitestore.Config{})
	require.Equal(t, schema(opened), schema(scripted))
	require.NotEmpty(t, schema(scripted))
	var mode string
	require.NoError(t, scripted.DB().QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
	g, err := scripted.Acquire(ctx, store.AcquireParams{Name: "x", Holder: testutil.Holder(t, "h"), TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, store.Token(1), g.Token)
}
