package pgstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// TestHistoryRenewalsStayHOT: a renewal fires no trigger and writes no
// index, so PostgreSQL updates the lease row in place (a heap-only tuple):
// the history costs renewals nothing.
func TestHistoryRenewalsStayHOT(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	h := testutil.Holder(t, "holder")
	g := b.acquire(t, "job", h, time.Minute)
	obj := b.store.Objects()
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }

	tx, err := b.owner.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // The test reads the transaction's own statistics; nothing is kept.
	const renewals = 5
	for seq := int64(1); seq <= renewals; seq++ {
		var renewed bool
		require.NoError(t, tx.QueryRow(ctx, "SELECT r.renewed FROM "+ident(obj.RenewFunc)+"($1, $2, $3, $4, $5, $6) AS r",
			[]string{"job"}, []string{h.Label}, []string{h.Instance}, []int64{int64(g.Token)}, []int64{seq}, []int64{time.Minute.Microseconds()},
		).Scan(&renewed))
		require.True(t, renewed, "renewal %d", seq)
	}
	var updated, hot, events int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_stat_get_xact_tuples_updated($1::regclass), pg_stat_get_xact_tuples_hot_updated($1::regclass)",
		ident(obj.Leases)).Scan(&updated, &hot))
	require.Equal(t, int64(renewals), updated)
	require.Equal(t, int64(renewals), hot, "every renewal is a HOT update")
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+ident(obj.History)).Scan(&events))
	require.Equal(t, int64(1), events, "only the grant is recorded")
}

// nextEventID makes id the id of the next event the history records, so
// that a test knows which event looks for events past the retention (one
// whose id is a multiple of 16, migration 010).
func (b *testBundle) nextEventID(t *testing.T, q interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}, id int64) {
	t.Helper()
	obj := b.store.Objects()
	_, err := q.Exec(t.Context(), fmt.Sprintf("ALTER TABLE %s ALTER COLUMN id RESTART WITH %d", pgx.Identifier{obj.Schema, obj.History}.Sanitize(), id))
	require.NoError(t, err)
}

// TestHistoryPruningReadsOnlyWhatItDeletes: an event that looks for events
// past the retention reads them through the index on at, bounded by the
// cutoff, so that an acquisition costs the same however long the history
// is (migration 008; before it the index was read whole).
func TestHistoryPruningReadsOnlyWhatItDeletes(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	obj := b.store.Objects()
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	const kept = 50_000
	_, err := b.owner.Exec(ctx, "INSERT INTO "+ident(obj.History)+" (name, kind, holder_label, holder_instance, token, at) "+
		"SELECT 'old-'||i, 'granted', 'w', 'i', i, now() - interval '1 minute' FROM generate_series(1, $1) AS i", kept)
	require.NoError(t, err)
	b.nextEventID(t, b.owner, 16*10_000)

	tx, err := b.owner.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // The test reads the transaction's own statistics; nothing is kept.
	h := testutil.Holder(t, "holder")
	_, err = tx.Exec(ctx, "SELECT * FROM "+ident(obj.AcquireFunc)+"('job', $1, $2, 60000000, '', false)", h.Label, h.Instance)
	require.NoError(t, err)
	var scans, read, events int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_stat_get_xact_numscans($1::regclass) + "+
		"coalesce((SELECT sum(pg_stat_get_xact_numscans(i.indexrelid)) FROM pg_index AS i WHERE i.indrelid = $1::regclass), 0)",
		ident(obj.History)).Scan(&scans))
	require.Positive(t, scans, "the grant, event 160,000, did not look for events past the retention")
	require.NoError(t, tx.QueryRow(ctx, "SELECT pg_stat_get_xact_tuples_returned($1::regclass) + pg_stat_get_xact_tuples_fetched($1::regclass) + "+
		"coalesce((SELECT sum(pg_stat_get_xact_tuples_returned(i.indexrelid)) FROM pg_index AS i WHERE i.indrelid = $1::regclass), 0)",
		ident(obj.History)).Scan(&read))
	require.Less(t, read, int64(100), "recording the grant read %d history rows or index entries of %d", read, kept)
	require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+ident(obj.History)).Scan(&events))
	require.Equal(t, int64(kept+1), events, "nothing within the retention is deleted")
}

// TestHistoryRetention: Migrate writes Config.HistoryRetention into the
// schema; an event whose id is a multiple of 16 deletes at most 256 events
// older than the retention, oldest first, of any name, and keeps the
// younger ones; other events delete nothing.
func TestHistoryRetention(t *testing.T) {
	t.Parallel()
	cfg := pgserver.PostgresConfig(t)
	cfg.HistoryRetention = 2 * time.Hour
	b := setup(t, func(testing.TB) pgstore.Config { return cfg }, true)
	require.NoError(t, b.store.Migrate(t.Context()))
	ctx := t.Context()
	obj := b.store.Objects()
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }

	var retention time.Duration
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT history_retention FROM "+ident(obj.Settings)).Scan(&retention))
	require.Equal(t, 2*time.Hour, retention)
	script, err := cfg.MigrationSQL()
	require.NoError(t, err)
	require.Contains(t, script, "history_retention = 7200000000 * interval '1 microsecond'")

	// 300 events older than the retention (of a name that went quiet,
	// token i the i-th oldest) and one younger.
	_, err = b.owner.Exec(ctx, "INSERT INTO "+ident(obj.History)+" (name, kind, holder_label, holder_instance, token, at) "+
		"SELECT 'quiet', 'granted', 'old', 'x', i, clock_timestamp() - interval '3 hours' + i * interval '1 second' FROM generate_series(1, 300) AS i")
	require.NoError(t, err)
	_, err = b.owner.Exec(ctx, "INSERT INTO "+ident(obj.History)+" (name, kind, holder_label, holder_instance, token, at) "+
		"VALUES ('quiet', 'released', 'old', 'x', 301, clock_timestamp() - interval '1 hour')")
	require.NoError(t, err)
	quiet := func() (n, oldest int) {
		require.NoError(t, b.owner.QueryRow(ctx, "SELECT count(*), coalesce(min(token), 0) FROM "+ident(obj.History)+" WHERE name = 'quiet'").Scan(&n, &oldest))
		return n, oldest
	}

	b.nextEventID(t, b.owner, 16*100-1)
	g := b.acquire(t, "job", testutil.Holder(t, "holder"), time.Minute)
	n, _ := quiet()
	require.Equal(t, 301, n, "event 1,599 deletes nothing")
	require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: g.Holder, Token: g.Token}))
	n, oldest := quiet()
	require.Equal(t, 301-256, n, "event 1,600 deletes the 256 oldest events beyond the retention")
	require.Equal(t, 257, oldest, "the oldest go first")

	b.nextEventID(t, b.owner, 16*200)
	b.acquire(t, "job", testutil.Holder(t, "holder"), time.Minute)
	events, err := b.store.History(ctx, store.HistoryParams{Name: "quiet"})
	require.NoError(t, err)
	require.Len(t, events, 1, "event 3,200 deletes the rest and keeps the younger one")
	require.Equal(t, store.EventReleased, events[0].Kind)
}

// TestHistorySettingEndsWithForceRelease: the setting force_release uses to mark
// its release does not survive it, so a plain release after a forced one in
// the same transaction is recorded as a plain release.
func TestHistorySettingEndsWithForceRelease(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, true)
	ctx := t.Context()
	obj := b.store.Objects()
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	h := testutil.Holder(t, "holder")
	first := b.acquire(t, "a", h, time.Minute)
	second := b.acquire(t, "b", h, time.Minute)

	tx, err := b.owner.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }() // Committed below; after that a no-op.
	var n int64
	require.NoError(t, tx.QueryRow(ctx, "SELECT "+ident(obj.ForceReleaseFunc)+"($1, $2, $3, $4)", "a", h.Label, h.Instance, int64(first.Token)).Scan(&n))
	require.Equal(t, int64(1), n)
	require.NoError(t, tx.QueryRow(ctx, "SELECT "+ident(obj.ReleaseFunc)+"($1, $2, $3, $4)", "b", h.Label, h.Instance, int64(second.Token)).Scan(&n))
	require.Equal(t, int64(1), n)
	require.NoError(t, tx.Commit(ctx))

	events, err := b.store.History(ctx, store.HistoryParams{})
	require.NoError(t, err)
	var kinds []string
	for _, ev := range events {
		kinds = append(kinds, ev.Name+" "+ev.Kind.String())
	}
	require.Equal(t, "a granted|b granted|a force-released|b released", strings.Join(kinds, "|"))
}
