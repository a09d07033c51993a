package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
)

// TestWindowsForOlderGrants: a role granted the functions of the lease
// protocol before the windows existed (release and get_lease, not the
// window functions) may begin, finish and read windows once Migrate has
// installed them, without a new GRANT; a role granted nothing gets
// nothing.
func TestWindowsForOlderGrants(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresWeirdConfig(t)
	pgserver.PostgresSchema(t, owner, cfg)
	obj, err := cfg.Objects()
	require.NoError(t, err)
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	ctx := t.Context()

	older, none := pgserver.PostgresRole(t, owner), pgserver.PostgresRole(t, owner)
	_, err = owner.Exec(ctx, "GRANT USAGE ON SCHEMA "+pgx.Identifier{obj.Schema}.Sanitize()+" TO "+pgx.Identifier{older}.Sanitize()+", "+pgx.Identifier{none}.Sanitize()+"; "+
		"GRANT EXECUTE ON FUNCTION "+ident(obj.AcquireFunc)+"(text, text, text, bigint, text, boolean), "+
		ident(obj.ReleaseFunc)+"(text, text, text, bigint), "+ident(obj.GetFunc)+"(text) TO "+pgx.Identifier{older}.Sanitize())
	require.NoError(t, err)
	// The window functions installed again, as by the first Migrate of a
	// library with windows over a schema without them.
	_, err = owner.Exec(ctx, "UPDATE "+ident(obj.Functions)+" SET sha256 = 'older' WHERE name LIKE 'window%'")
	require.NoError(t, err)
	require.NoError(t, newStore(t, owner, cfg).Migrate(ctx))

	s := newStore(t, pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, older), cfg)
	h := testutil.Holder(t, "worker")
	g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	w, err := s.StartWindow(ctx, store.StartWindowParams{Name: "job", Holder: h, Token: g.Token, Key: "2026-12-04"})
	require.NoError(t, err, "whoever may release may begin a window")
	_, err = s.FinishWindow(ctx, store.FinishWindowParams{Name: "job", Key: w.Key, Holder: h, Token: g.Token, Outcome: store.WindowCompleted})
	require.NoError(t, err, "and finish it")
	got, err := s.GetWindow(ctx, "job", w.Key)
	require.NoError(t, err, "whoever may get a lease may read its windows")
	require.Equal(t, store.WindowCompleted, got.State)

	n := newStore(t, pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, none), cfg)
	_, err = n.GetWindow(ctx, "job", w.Key)
	require.Error(t, err, "a role granted nothing reads no window")
	_, err = n.StartWindow(ctx, store.StartWindowParams{Name: "job", Holder: h, Token: g.Token, Key: "2026-12-05"})
	require.Error(t, err, "nor begins one")
	_, err = s.GetWindow(ctx, "job", "2026-12-05")
	require.ErrorIs(t, err, store.ErrNotFound)
}

// TestHistoryReadLeavesOutWindows: history_read, which libraries older
// than the windows call, returns no window event (they would not know its
// kind), while History (history_events) has them.
func TestHistoryReadLeavesOutWindows(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresWeirdConfig(t)
	pgserver.PostgresSchema(t, owner, cfg)
	obj, err := cfg.Objects()
	require.NoError(t, err)
	s := newStore(t, owner, cfg)
	ctx := t.Context()
	h := testutil.Holder(t, "worker")
	g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
	require.NoError(t, err)
	_, err = s.StartWindow(ctx, store.StartWindowParams{Name: "job", Holder: h, Token: g.Token, Key: "k"})
	require.NoError(t, err)

	events, err := s.History(ctx, store.HistoryParams{Name: "job"})
	require.NoError(t, err)
	require.Len(t, events, 2)
	require.Equal(t, store.EventWindowStarted, events[1].Kind)
	require.Equal(t, "k", events[1].Window)

	rows, err := owner.Query(ctx, "SELECT kind FROM "+pgx.Identifier{obj.Schema, obj.HistoryReadFunc}.Sanitize()+"('job', NULL, 100)")
	require.NoError(t, err)
	kinds, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"granted"}, kinds)
}
