package sqlitestore_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/sqliteserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// TestHistoryRetention: every recorded event deletes at most 16 events
// older than Config.HistoryRetention, oldest first, of any name, and keeps
// the younger ones.
func TestHistoryRetention(t *testing.T) {
	t.Parallel()
	st := sqliteserver.SQLiteStore(t, filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{HistoryRetention: 2 * time.Hour})
	ctx := t.Context()
	old := time.Now().Add(-3 * time.Hour).UnixNano()
	for i := range 20 {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO tenure_history (name, kind, holder_label, holder_instance, token, at)
VALUES ('quiet', 'granted', 'old', 'x', ?, ?)`, i+1, old+int64(i))
		require.NoError(t, err)
	}
	_, err := st.DB().ExecContext(ctx, `INSERT INTO tenure_history (name, kind, holder_label, holder_instance, token, at)
VALUES ('quiet', 'released', 'old', 'x', 20, ?)`, time.Now().Add(-time.Hour).UnixNano())
	require.NoError(t, err)
	count := func() int {
		var n int
		require.NoError(t, st.DB().QueryRowContext(ctx, "SELECT count(*) FROM tenure_history WHERE name = 'quiet'").Scan(&n))
		return n
	}

	h := testutil.Holder(t, "holder")
	g, err := st.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	require.Equal(t, 21-16, count(), "one event deletes the 16 oldest events beyond the retention")
	require.NoError(t, st.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}))
	require.Equal(t, 1, count(), "the next deletes the rest and keeps the younger one")
	events, err := st.History(ctx, store.HistoryParams{Name: "quiet"})
	require.NoError(t, err)
	require.Len(t, events, 1)
	require.Equal(t, store.EventReleased, events[0].Kind)
}

func TestHistoryRetentionConfig(t *testing.T) {
	t.Parallel()
	for _, r := range []time.Duration{time.Second, -time.Hour} {
		_, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "tenure.db"), sqlitestore.Config{HistoryRetention: r})
		require.ErrorIs(t, err, store.ErrInvalid, "retention %s", r)
		require.ErrorContains(t, err, "HistoryRetention")
	}
}
