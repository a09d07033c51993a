package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/sqlitestore"

	_ "modernc.org/sqlite" // the driver that writes the schema 4 file
)

// waitFor is an acquisition of name by h, asking to wait, that must be
// refused; it returns the refusal.
func waitFor(t *testing.T, st store.Store, name string, h store.Holder) *store.HeldError {
	t.Helper()
	_, err := st.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute, Wait: true})
	var held *store.HeldError
	require.ErrorAs(t, err, &held)
	return held
}

// TestLineAcrossStores: the line lives in the file, so followers of
// several Stores (processes) share it, and a release through one keeps
// the lease for the head of the line whichever Store it came through.
func TestLineAcrossStores(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	a, b, c := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{}), sqliteserver.SQLiteStore(t, path, sqlitestore.Config{}), sqliteserver.SQLiteStore(t, path, sqlitestore.Config{})
	h, first, second := testutil.Holder(t, "holder"), testutil.Holder(t, "first"), testutil.Holder(t, "second")
	g, err := a.Acquire(t.Context(), store.AcquireParams{Name: "l", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 1, waitFor(t, b, "l", first).Position)
	require.Equal(t, 2, waitFor(t, c, "l", second).Position)

	require.NoError(t, a.Release(t.Context(), store.ReleaseParams{Name: "l", Holder: h, Token: g.Token}))
	kept := waitFor(t, c, "l", second)
	require.Equal(t, first, kept.Next)
	require.Equal(t, 2, kept.Position)
	next, err := b.Acquire(t.Context(), store.AcquireParams{Name: "l", Holder: first, TTL: time.Minute, Wait: true})
	require.NoError(t, err)
	require.Greater(t, next.Token, g.Token)
	require.Equal(t, 1, waitFor(t, a, "l", second).Position, "the new holder left the line")
}

// TestLineForgottenFollowersArePruned: a follower forgotten from the line
// of a lease nobody asks for again is deleted when another follower gets
// in line, on any lease.
func TestLineForgottenFollowersArePruned(t *testing.T) {
	t.Parallel()
	st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
	h := testutil.Holder(t, "holder")
	for _, name := range []string{"abandoned", "busy"} {
		_, err := st.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
	}
	waitFor(t, st, "abandoned", testutil.Holder(t, "gone"))
	// The follower stops asking; rather than wait two TTLs for the line to
	// forget it, move the time it is forgotten at into the past.
	_, err := st.DB().ExecContext(t.Context(), `UPDATE tenure_waiters SET until = 1 WHERE name = 'abandoned'`)
	require.NoError(t, err)

	waitFor(t, st, "busy", testutil.Holder(t, "follower"))
	var left int
	require.NoError(t, st.DB().QueryRowContext(t.Context(), `SELECT count(*) FROM tenure_waiters WHERE name = 'abandoned'`).Scan(&left))
	require.Zero(t, left)
}

// TestLineForgottenFollowerAsksAgain: a follower the line forgot that
// asks again goes to the end of the line, behind those who kept asking,
// even while more followers forgotten longer ago wait to be pruned than
// one call prunes.
func TestLineForgottenFollowerAsksAgain(t *testing.T) {
	t.Parallel()
	st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{})
	h := testutil.Holder(t, "holder")
	for _, name := range []string{"l", "abandoned"} {
		_, err := st.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute})
		require.NoError(t, err)
	}
	for i := range 40 {
		waitFor(t, st, "abandoned", testutil.Holder(t, fmt.Sprintf("gone-%d", i)))
	}
	late, patient := testutil.Holder(t, "late"), testutil.Holder(t, "patient")
	require.Equal(t, 1, waitFor(t, st, "l", late).Position)
	require.Equal(t, 2, waitFor(t, st, "l", patient).Position)
	// Rather than wait two TTLs for the line to forget the late follower
	// and those of the abandoned lease (before it), move the times they
	// are forgotten at into the past.
	_, err := st.DB().ExecContext(t.Context(), `UPDATE tenure_waiters SET until = 1 WHERE name = 'abandoned'`)
	require.NoError(t, err)
	_, err = st.DB().ExecContext(t.Context(), `UPDATE tenure_waiters SET until = 2 WHERE holder_label = ?`, late.Label)
	require.NoError(t, err)
	require.Equal(t, 2, waitFor(t, st, "l", late).Position)
	require.Equal(t, 1, waitFor(t, st, "l", patient).Position)
}

// TestUpgradeFromSchema4 opens a file that a tenure before the line
// wrote (schema 4): Open migrates it and its lease keeps working. A
// change made the way that older tenure makes it (still running, sharing
// the file) records no line: it is announced as NoticeChanged and keeps
// the lease for nobody.
func TestUpgradeFromSchema4(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tenure.db")
	old, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	for _, m := range []string{"001_init.sql", "002_changes.sql", "003_history.sql", "004_payload.sql"} {
		text, err := os.ReadFile(filepath.Join("migrations", m))
		require.NoError(t, err)
		_, err = old.ExecContext(t.Context(), string(text))
		require.NoError(t, err, "migration %s", m)
	}
	now := time.Now().UnixNano()
	_, err = old.ExecContext(t.Context(), `PRAGMA user_version = 4;
UPDATE tenure_counter SET last_token = 7, last_change = 3;
INSERT INTO tenure_leases (name, holder_label, holder_instance, token, seq, acquired_at, expires_at, released, changed, payload)
VALUES ('l', 'old', 'x', 7, 1, ?, ?, 0, 3, '')`, now, now+int64(time.Hour))
	require.NoError(t, err)
	require.NoError(t, old.Close())

	st := sqliteserver.SQLiteStore(t, path, sqlitestore.Config{PollInterval: time.Millisecond})
	var version int
	require.NoError(t, st.DB().QueryRowContext(t.Context(), "PRAGMA user_version").Scan(&version))
	require.Equal(t, sqlitestore.SchemaVersion, version)
	held := waitFor(t, st, "l", testutil.Holder(t, "follower"))
	require.Equal(t, store.Holder{Label: "old", Instance: "x"}, held.Holder)
	require.Equal(t, store.Token(7), held.Token)
	require.Equal(t, 1, held.Position)

	ns := listenTo(t, st)
	// What a release by this tenure left on the lease before the older
	// tenure took it (a follower kept for, until well after now), then
	// the release statements of the older tenure, which leave it there.
	_, err = st.DB().ExecContext(t.Context(), `UPDATE tenure_leases SET kept_label = 'follower', kept_instance = 'y', kept_until = ?
WHERE name = 'l'`, time.Now().Add(time.Hour).UnixNano())
	require.NoError(t, err)
	_, err = st.DB().ExecContext(t.Context(), `UPDATE tenure_leases SET expires_at = ?, released = 1,
    changed = (SELECT last_change + 1 FROM tenure_counter WHERE id = 1)
WHERE name = 'l';
UPDATE tenure_counter SET last_change = last_change + 1 WHERE id = 1`, time.Now().UnixNano())
	require.NoError(t, err)
	require.Equal(t, store.Notice{Name: "l", Kind: store.NoticeChanged}, ns.next(t))
	g, err := st.Acquire(t.Context(), store.AcquireParams{Name: "l", Holder: testutil.Holder(t, "passer-by"), TTL: time.Minute})
	require.NoError(t, err, "a release that kept nothing leaves the lease free for anyone")
	require.Greater(t, g.Token, store.Token(7))
}
