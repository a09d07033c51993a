package pgstore_test

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// trustBundle is a migrated schema, a role granted exactly what
// Config.GrantSQL prints (or ReadGrantSQL, for a reader), a store working
// as that role, and the owner's pool.
type trustBundle struct {
	owner *pgxpool.Pool
	pool  *pgxpool.Pool // the role's
	role  string
	cfg   pgstore.Config
	obj   pgstore.Objects
	store *pgstore.Store
}

func setupRole(t *testing.T, grant func(pgstore.Config, string) (string, error)) *trustBundle {
	t.Helper()
	b := &trustBundle{owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, ""), cfg: pgserver.PostgresWeirdConfig(t)}
	pgserver.PostgresSchema(t, b.owner, b.cfg)
	b.role = pgserver.PostgresRole(t, b.owner)
	grants, err := grant(b.cfg, b.role)
	require.NoError(t, err)
	_, err = b.owner.Exec(t.Context(), grants)
	require.NoError(t, err)
	b.pool = pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, b.role)
	b.obj, err = b.cfg.Objects()
	require.NoError(t, err)
	b.store = newStore(t, b.pool, b.cfg)
	return b
}

func (b *trustBundle) ident(name string) string { return pgx.Identifier{b.obj.Schema, name}.Sanitize() }

// denied runs sql as the role and requires PostgreSQL to refuse it for want
// of a privilege (SQLSTATE 42501).
func (b *trustBundle) denied(t *testing.T, why, sql string, args ...any) {
	t.Helper()
	_, err := b.pool.Exec(t.Context(), sql, args...)
	require.Error(t, err, why)
	require.Equal(t, "42501", pgkit.Code(err), "%s: %v", why, err)
}

// TestRunTimeRoleCannotDefeatFencing connects as the role `tenure migrate
// --print --grant ROLE` sets up and tries each attack of issue 14: every
// direct write to the fences, the leases or the sequence is refused, while
// the protocol works through the functions.
func TestRunTimeRoleCannotDefeatFencing(t *testing.T) {
	t.Parallel()
	b := setupRole(t, pgstore.Config.GrantSQL)
	ctx := t.Context()
	fences, leases, seq := b.ident(b.obj.Fences), b.ident(b.obj.Leases), b.ident(b.obj.TokenSeq)

	// The protocol, as the role.
	h := testutil.Holder(t, "worker")
	g := b.acquire(t, "job", h)
	rs, err := b.store.Renew(ctx, []store.RenewParams{{Name: g.Name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.NoError(t, err)
	require.True(t, rs[0].Renewed)
	_, err = b.pool.Exec(ctx, "SELECT "+b.ident(b.obj.FenceFunc)+"($1, $2)", "p1", int64(g.Token))
	require.NoError(t, err, "fence")
	_, err = b.pool.Exec(ctx, "SELECT "+b.ident(b.obj.CheckLeaseFunc)+"($1, $2)", "job", int64(g.Token))
	require.NoError(t, err, "check")
	var next int64
	require.NoError(t, b.pool.QueryRow(ctx, "SELECT "+b.ident(b.obj.CheckLeaseStrictFunc)+"($1, $2, $3, $4, $5)",
		"job", int64(g.Token), h.Label, h.Instance, rs[0].Grant.Seq).Scan(&next), "strict check")
	require.Equal(t, rs[0].Grant.Seq+1, next)
	r, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, store.StateHeld, r.State)
	require.Equal(t, "10.0.0.7:8443", r.Payload)
	all, err := b.store.List(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.NoError(t, b.store.Release(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}))
	g = b.acquire(t, "job", h)
	require.NoError(t, b.store.ForceRelease(ctx, store.ReleaseParams{Name: "job", Holder: h, Token: g.Token}), "force release")
	events, err := b.store.History(ctx, store.HistoryParams{Name: "job"})
	require.NoError(t, err, "history")
	require.Len(t, events, 4)
	require.Equal(t, store.EventForceReleased, events[3].Kind)

	// The attacks.
	g = b.acquire(t, "job", h)
	b.denied(t, "rewind a fence", "UPDATE "+fences+" SET token = 1")
	b.denied(t, "brick a fence by UPDATE", "UPDATE "+fences+" SET token = $1", int64(math.MaxInt64))
	b.denied(t, "brick a fence by INSERT", "INSERT INTO "+fences+" (resource, token, updated_at) VALUES ('p2', $1, now())", int64(math.MaxInt64))
	b.denied(t, "delete a fence", "DELETE FROM "+fences)
	b.denied(t, "forge a lease with a lower token",
		"UPDATE "+leases+" SET token = 1, holder_label = 'forger', holder_instance = 'x' WHERE name = 'job'")
	b.denied(t, "lock a name for ten years",
		"INSERT INTO "+leases+" (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at) "+
			"VALUES ('locked', 'forger', 'x', 1, 1, now(), now(), now() + interval '10 years')")
	b.denied(t, "extend a lease by ten years", "UPDATE "+leases+" SET expires_at = now() + interval '10 years'")
	b.denied(t, "delete the leases", "DELETE FROM "+leases)
	b.denied(t, "truncate the leases", "TRUNCATE "+leases)
	b.denied(t, "rewind the sequence", "SELECT setval($1::regclass, 1)", seq)
	b.denied(t, "draw from the sequence", "SELECT nextval($1::regclass)", seq)
	b.denied(t, "read the leases table", "SELECT * FROM "+leases)
	b.denied(t, "fence with a foreign token", "SELECT "+b.ident(b.obj.FenceForeignFunc)+"('p2', $1)", int64(math.MaxInt64))
	b.denied(t, "reset a fence", "SELECT "+b.ident(b.obj.FenceResetFunc)+"('p1', 0, 'me')")
	b.denied(t, "create a table", "CREATE TABLE "+b.ident("evil")+" (x int)")
	history := b.ident(b.obj.History)
	b.denied(t, "rewrite the history", "UPDATE "+history+" SET holder_label = 'someone else'")
	b.denied(t, "erase the history", "DELETE FROM "+history)
	b.denied(t, "forge an event", "INSERT INTO "+history+" (name, kind, holder_label, holder_instance, token, at) VALUES ('job', 'released', 'a', 'b', 1, now())")
	b.denied(t, "shorten the retention", "UPDATE "+b.ident(b.obj.Settings)+" SET history_retention = interval '1 minute'")
	b.denied(t, "call the trigger function", "SELECT "+b.ident(b.obj.RecordHistoryFunc)+"()")
	_, err = b.pool.Exec(ctx, "SELECT * FROM "+b.ident(b.obj.AcquireFunc)+"('big', 'forger', 'x', 60000000, $1, false)", strings.Repeat("p", store.MaxPayloadLen+1))
	require.Equal(t, "22023", pgkit.Code(err), "the acquire function itself bounds the payload: %v", err)

	// A token nobody was issued is refused by the fence itself.
	_, err = b.pool.Exec(ctx, "SELECT "+b.ident(b.obj.FenceFunc)+"('p2', $1)", int64(math.MaxInt64))
	require.Equal(t, "TF004", pgkit.Code(err), "a token above the sequence is refused: %v", err)
	_, err = b.pool.Exec(ctx, "SELECT "+b.ident(b.obj.FenceFunc)+"('p2', $1)", int64(g.Token)+1)
	require.Equal(t, "TF004", pgkit.Code(err), "the next token is not issued yet: %v", err)

	// Nothing changed.
	var fence int64
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT token FROM "+fences+" WHERE resource = 'p1'").Scan(&fence))
	require.Less(t, fence, int64(g.Token))
	var n int
	require.NoError(t, b.owner.QueryRow(ctx, "SELECT count(*) FROM "+fences+" WHERE resource = 'p2'").Scan(&n))
	require.Zero(t, n)
	r, err = b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, h, r.Holder)
	require.Equal(t, g.Token, r.Token)
	_, err = b.store.Get(ctx, "locked")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func (b *trustBundle) acquire(t *testing.T, name string, h store.Holder) store.Grant {
	t.Helper()
	g, err := b.store.Acquire(t.Context(), store.AcquireParams{Name: name, Holder: h, TTL: time.Minute, Payload: "10.0.0.7:8443"})
	require.NoError(t, err)
	return g
}

// TestReadOnlyRole: the role of ReadGrantSQL lists and gets leases, reads
// their history and can change nothing, not even through the functions.
func TestReadOnlyRole(t *testing.T) {
	t.Parallel()
	b := setupRole(t, pgstore.Config.ReadGrantSQL)
	ctx := t.Context()
	owned := newStore(t, b.owner, b.cfg)
	h := testutil.Holder(t, "worker")
	g, err := owned.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
	require.NoError(t, err)

	r, err := b.store.Get(ctx, "job")
	require.NoError(t, err)
	require.Equal(t, g.Token, r.Token)
	all, err := b.store.List(ctx)
	require.NoError(t, err)
	require.Len(t, all, 1)
	events, err := b.store.History(ctx, store.HistoryParams{Name: "job"})
	require.NoError(t, err, "the reader reads the history")
	require.Len(t, events, 1)
	require.Equal(t, store.HistoryEvent{Name: "job", Kind: store.EventGranted, Holder: h, Token: g.Token, At: events[0].At}, events[0])

	_, err = b.store.Acquire(ctx, store.AcquireParams{Name: "other", Holder: h, TTL: time.Minute})
	require.Equal(t, "42501", pgkit.Code(err), "acquire: %v", err)
	require.ErrorContains(t, err, "permission denied")
	_, err = b.store.Renew(ctx, []store.RenewParams{{Name: g.Name, Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
	require.Equal(t, "42501", pgkit.Code(err), "renew: %v", err)
	err = b.store.Release(ctx, store.ReleaseParams{Name: g.Name, Holder: h, Token: g.Token})
	require.Equal(t, "42501", pgkit.Code(err), "release: %v", err)
	err = b.store.ForceRelease(ctx, store.ReleaseParams{Name: g.Name, Holder: h, Token: g.Token})
	require.Equal(t, "42501", pgkit.Code(err), "force release: %v", err)
	b.denied(t, "read the history table", "SELECT * FROM "+b.ident(b.obj.History))
	b.denied(t, "fence", "SELECT "+b.ident(b.obj.FenceFunc)+"('p1', $1)", int64(g.Token))
	b.denied(t, "update the leases", "UPDATE "+b.ident(b.obj.Leases)+" SET token = 1")
}

// TestUpgradeRevokesDirectWrites: a schema migrated by an older library,
// whose run-time role was granted the table and sequence privileges of
// then, loses those privileges in place when migration 003 of the
// numbering before v0.1.0 runs; after the upgrade to this numbering its
// leases and tokens are kept, and the role works through the functions
// once granted what GrantSQL prints now.
func TestUpgradeRevokesDirectWrites(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresWeirdConfig(t)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, cfg.Schema) })
	obj, err := cfg.Objects()
	require.NoError(t, err)
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	ownerStore := newStore(t, owner, cfg)
	ctx := t.Context()
	require.NoError(t, pgstore.LegacyMigrateTo(ctx, ownerStore, 2))

	role := pgserver.PostgresRole(t, owner)
	r := pgx.Identifier{role}.Sanitize()
	_, err = owner.Exec(ctx, "GRANT USAGE ON SCHEMA "+pgx.Identifier{obj.Schema}.Sanitize()+" TO "+r+"; "+
		"GRANT SELECT, INSERT, UPDATE ON TABLE "+ident(obj.Leases)+", "+ident(obj.Fences)+" TO "+r+"; "+
		"GRANT USAGE ON SEQUENCE "+ident(obj.TokenSeq)+" TO "+r)
	require.NoError(t, err, "the grants of the older library")
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
	var before int64
	require.NoError(t, pool.QueryRow(ctx, "SELECT nextval($1::regclass)", ident(obj.TokenSeq)).Scan(&before))
	_, err = pool.Exec(ctx, "INSERT INTO "+ident(obj.Leases)+
		" (name, holder_label, holder_instance, token, seq, acquired_at, renewed_at, expires_at) "+
		"VALUES ('old', 'a', 'b', $1, 1, now(), now(), now() + interval '1 minute')", before)
	require.NoError(t, err, "before 003 the role could write the table itself")

	require.NoError(t, pgstore.LegacyMigrateTo(ctx, ownerStore, pgstore.LegacyVersions()))
	require.NoError(t, ownerStore.Migrate(ctx))
	_, err = pool.Exec(ctx, "UPDATE "+ident(obj.Leases)+" SET token = 1")
	require.Equal(t, "42501", pgkit.Code(err), "003 took the write privilege: %v", err)
	_, err = pool.Exec(ctx, "SELECT nextval($1::regclass)", ident(obj.TokenSeq))
	require.Equal(t, "42501", pgkit.Code(err), "003 took the sequence: %v", err)
	var n int
	require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+ident(obj.Leases)).Scan(&n), "read privileges stay")
	require.Equal(t, 1, n)

	grants, err := cfg.GrantSQL(role)
	require.NoError(t, err)
	_, err = owner.Exec(ctx, grants)
	require.NoError(t, err)
	s := newStore(t, pool, cfg)
	old, err := s.Get(ctx, "old")
	require.NoError(t, err, "the lease made before the upgrade is kept")
	require.Equal(t, store.Token(before), old.Token)
	g, err := s.Acquire(ctx, store.AcquireParams{Name: "new", Holder: testutil.Holder(t, "a"), TTL: time.Minute})
	require.NoError(t, err)
	require.Greater(t, g.Token, store.Token(before), "the sequence continues")
}

// TestFunctionsAreFenced checks every function of a migrated schema: it runs
// as its owner with search_path pg_catalog, pg_temp (fence_reset alone runs
// as its caller), and PUBLIC may not execute it.
func TestFunctionsAreFenced(t *testing.T) {
	t.Parallel()
	b := setupRole(t, pgstore.Config.GrantSQL)
	rows, err := b.owner.Query(t.Context(), `
SELECT p.proname, p.prosecdef, coalesce(array_to_string(p.proconfig, ';'), ''),
       EXISTS (SELECT 1 FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a WHERE a.grantee = 0)
FROM pg_catalog.pg_proc AS p
WHERE p.pronamespace = $1::regnamespace
ORDER BY p.proname`, pgx.Identifier{b.obj.Schema}.Sanitize())
	require.NoError(t, err)
	type fn struct {
		name        string
		definer     bool
		config      string
		publicCalls bool
	}
	fns, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (fn, error) {
		var f fn
		err := row.Scan(&f.name, &f.definer, &f.config, &f.publicCalls)
		return f, err
	})
	require.NoError(t, err)
	var names []string
	for _, f := range fns {
		names = append(names, f.name)
		require.Equal(t, f.name != b.obj.FenceResetFunc, f.definer, "%s: SECURITY DEFINER", f.name)
		require.True(t, strings.HasPrefix(f.config, "search_path=pg_catalog, pg_temp"), "%s: %s", f.name, f.config)
		require.False(t, f.publicCalls, "%s: PUBLIC may execute it", f.name)
	}
	require.ElementsMatch(t, []string{
		b.obj.AcquireFunc, b.obj.AcquireBatchFunc, b.obj.AcquireSlotFunc, b.obj.RenewFunc, b.obj.ReleaseFunc, b.obj.GetFunc, b.obj.ListFunc,
		b.obj.FenceFunc, b.obj.FenceForeignFunc, b.obj.FenceResetFunc, b.obj.CheckLeaseFunc, b.obj.CheckLeaseStrictFunc,
		b.obj.HistoryReadFunc, b.obj.ForceReleaseFunc, b.obj.RecordHistoryFunc,
		b.obj.WindowStartFunc, b.obj.WindowFinishFunc, b.obj.WindowGetFunc, b.obj.HistoryEventsFunc,
	}, names)
}

// TestUpgradeKeepsPayloadGrants: migration 006 of the numbering before
// v0.1.0 replaced acquire, get and list; a role granted the functions of
// 004 may execute their successors after the upgrade to this numbering
// without a new GRANT, and a lease made before reads with an empty
// payload.
func TestUpgradeKeepsPayloadGrants(t *testing.T) {
	t.Parallel()
	owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := pgserver.PostgresWeirdConfig(t)
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, owner, cfg.Schema) })
	obj, err := cfg.Objects()
	require.NoError(t, err)
	ident := func(name string) string { return pgx.Identifier{obj.Schema, name}.Sanitize() }
	ownerStore := newStore(t, owner, cfg)
	ctx := t.Context()
	require.NoError(t, pgstore.LegacyMigrateTo(ctx, ownerStore, 4))
	_, err = owner.Exec(ctx, "SELECT * FROM "+ident(obj.AcquireFunc)+"('old', 'a', 'b', 60000000)")
	require.NoError(t, err, "a lease taken before the upgrade")

	getOld, listOld := obj.TablePrefix+"get", obj.TablePrefix+"list" // the names of 003
	writer, reader := pgserver.PostgresRole(t, owner), pgserver.PostgresRole(t, owner)
	w, r := pgx.Identifier{writer}.Sanitize(), pgx.Identifier{reader}.Sanitize()
	_, err = owner.Exec(ctx, "GRANT USAGE ON SCHEMA "+pgx.Identifier{obj.Schema}.Sanitize()+" TO "+w+", "+r+"; "+
		"GRANT EXECUTE ON FUNCTION "+ident(obj.AcquireFunc)+"(text, text, text, bigint), "+
		ident(obj.RenewFunc)+"(text[], text[], text[], bigint[], bigint[], bigint[]), "+
		ident(obj.ReleaseFunc)+"(text, text, text, bigint), "+ident(getOld)+"(text), "+ident(listOld)+"() TO "+w+"; "+
		"GRANT EXECUTE ON FUNCTION "+ident(getOld)+"(text), "+ident(listOld)+"() TO "+r)
	require.NoError(t, err, "the grants of 004")

	require.NoError(t, pgstore.LegacyMigrateTo(ctx, ownerStore, pgstore.LegacyVersions()))
	require.NoError(t, ownerStore.Migrate(ctx))
	ws := newStore(t, pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, writer), cfg)
	g, err := ws.Acquire(ctx, store.AcquireParams{Name: "new", Holder: testutil.Holder(t, "a"), TTL: time.Minute, Payload: "db-1:5432"})
	require.NoError(t, err, "the writer keeps acquire")
	require.Equal(t, "db-1:5432", g.Payload)
	batch := []store.AcquireParams{
		{Name: "batch-1", Holder: testutil.Holder(t, "a"), TTL: time.Minute},
		{Name: "batch-2", Holder: testutil.Holder(t, "a"), TTL: time.Minute},
	}
	got, err := ws.AcquireBatch(ctx, batch)
	require.NoError(t, err, "whoever may acquire may acquire in batches (migration 009)")
	for _, r := range got {
		require.NoError(t, r.Err)
	}
	old, err := ws.Get(ctx, "old")
	require.NoError(t, err, "the writer keeps get")
	require.Equal(t, store.StateHeld, old.State)
	require.Empty(t, old.Payload, "a lease from before the upgrade has no payload")

	rs := newStore(t, pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, reader), cfg)
	all, err := rs.List(ctx)
	require.NoError(t, err, "the reader keeps list")
	require.Len(t, all, 4)
	i := slices.IndexFunc(all, func(r store.Record) bool { return r.Name == "new" })
	require.NotEqual(t, -1, i)
	require.Equal(t, "db-1:5432", all[i].Payload)
	_, err = rs.Acquire(ctx, store.AcquireParams{Name: "other", Holder: testutil.Holder(t, "b"), TTL: time.Minute})
	require.Equal(t, "42501", pgkit.Code(err), "the reader gets no acquire from the upgrade: %v", err)
	_, err = rs.AcquireBatch(ctx, batch)
	require.Equal(t, "42501", pgkit.Code(err), "nor acquire_batch: %v", err)

	var n int
	require.NoError(t, owner.QueryRow(ctx, "SELECT count(*) FROM pg_catalog.pg_proc WHERE pronamespace = $1::regnamespace AND proname = ANY($2)",
		pgx.Identifier{obj.Schema}.Sanitize(), []string{getOld, listOld}).Scan(&n))
	require.Zero(t, n, "the replaced get and list are gone")
}
