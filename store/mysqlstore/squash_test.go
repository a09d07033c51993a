package mysqlstore_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/mysqlserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// legacySchema makes cfg's tables and procedures as a tenure before
// v0.1.0 left them: every migration of that numbering applied.
func legacySchema(tb testing.TB, owner *sql.DB, cfg mysqlstore.Config) {
	tb.Helper()
	tb.Cleanup(func() { mysqlserver.MySQLDrop(tb, owner, cfg) })
	s, err := mysqlstore.New(owner, cfg)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, s.Close()) }()
	require.NoError(tb, mysqlstore.LegacyMigrateTo(context.Background(), s, mysqlstore.LegacyVersions()))
}

// legacyHarness is the MySQL harness whose every store is on tables made
// before v0.1.0 and then migrated by this library, used by an account
// granted what it needs before the upgrade.
type legacyHarness struct{ mysqlserver.MySQLHarness }

func (h legacyHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	cfg := mysqlserver.MySQLConfig(tb)
	legacySchema(tb, h.Owner, cfg)
	mysqlserver.MySQLGrant(tb, h.Owner, cfg, h.Account)
	owner, err := mysqlstore.New(h.Owner, cfg)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, owner.Close()) }()
	require.NoError(tb, owner.Migrate(context.Background()))
	s, err := mysqlstore.New(h.DB, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	return s
}

// TestLegacySchemaConformance runs the conformance suite, as a run-time
// account granted before the upgrade, on databases migrated before v0.1.0
// and upgraded by Migrate: they behave as fresh ones, and the procedures
// created again keep their grants.
func TestLegacySchemaConformance(t *testing.T) {
	t.Parallel()
	owner := mysqlserver.MySQLDB(t, "")
	account := mysqlserver.MySQLAccount(t, owner)
	storetest.Run(t, legacyHarness{mysqlserver.MySQLHarness{Owner: owner, DB: mysqlserver.MySQLDB(t, account), Account: account}})
}

// objects describes the tables and procedures of cfg, named without the
// prefix: what a fresh database and an upgraded one must share.
func objects(t *testing.T, owner *sql.DB, cfg mysqlstore.Config) []string {
	t.Helper()
	obj, err := cfg.Objects()
	require.NoError(t, err)
	rows, err := owner.QueryContext(t.Context(), `
SELECT CONCAT('column ', c.table_name, '.', c.column_name, ' ', c.column_type, ' ', c.is_nullable, ' ', COALESCE(c.column_default, ''), ' ', c.extra, ' ', c.ordinal_position)
FROM information_schema.columns AS c
WHERE c.table_schema = DATABASE() AND c.table_name IN (?, ?, ?, ?, ?)
UNION ALL
SELECT CONCAT('index ', s.table_name, '.', s.index_name, ' ', s.seq_in_index, ' ', s.column_name, ' ', s.non_unique)
FROM information_schema.statistics AS s
WHERE s.table_schema = DATABASE() AND s.table_name IN (?, ?, ?, ?, ?)
UNION ALL
SELECT CONCAT('procedure ', r.routine_name, ' ', r.security_type, ' ', r.sql_data_access, ' ', r.routine_definition)
FROM information_schema.routines AS r
WHERE r.routine_schema = DATABASE() AND r.routine_name LIKE CONCAT(?, '%')
ORDER BY 1`,
		obj.Leases, obj.Fences, obj.Tokens, obj.Waiters, obj.Functions,
		obj.Leases, obj.Fences, obj.Tokens, obj.Waiters, obj.Functions, obj.TablePrefix)
	require.NoError(t, err)
	defer func() { require.NoError(t, rows.Close()) }()
	var out []string
	for rows.Next() {
		var o string
		require.NoError(t, rows.Scan(&o))
		out = append(out, strings.ReplaceAll(o, obj.TablePrefix, "PREFIX_"))
	}
	require.NoError(t, rows.Err())
	return out
}

func TestMigrateLegacySchema(t *testing.T) {
	t.Parallel()

	// Tables, indexes and procedures of an upgraded database are those of
	// a fresh one.
	t.Run("SameObjectsAsFresh", func(t *testing.T) {
		t.Parallel()
		owner := mysqlserver.MySQLDB(t, "")
		legacyCfg := mysqlserver.MySQLConfig(t)
		legacySchema(t, owner, legacyCfg)
		require.NoError(t, newStore(t, owner, legacyCfg).Migrate(t.Context()))
		fresh := setup(t, nil, true)
		want := objects(t, owner, fresh.cfg)
		require.NotEmpty(t, want)
		require.Equal(t, want, objects(t, owner, legacyCfg))
	})

	// The upgrade keeps leases and tokens, records this numbering, and
	// the store works on.
	t.Run("KeepsData", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		legacySchema(t, b.owner, b.cfg)
		ctx := t.Context()
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		before, err := b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.True(t, before.Behind())
		require.Equal(t, mysqlstore.LegacyVersions(), before.Squashed)

		require.NoError(t, b.store.Migrate(ctx))
		require.Equal(t, []int{1}, b.versions(t))
		after, err := b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.False(t, after.Behind(), after.String())
		require.Equal(t, 9, after.Current)
		r, err := b.store.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, g.Token, r.Token)
		next := b.acquire(t, "other", testutil.Holder(t, "b"), time.Minute)
		require.Greater(t, next.Token, g.Token)
	})

	t.Run("PartlyMigratedRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		require.NoError(t, mysqlstore.LegacyMigrateTo(t.Context(), b.store, 2))
		err := b.store.Migrate(t.Context())
		require.ErrorContains(t, err, "records migrations of the numbering tenure used before v0.1.0 (001_init to 003_line), but not exactly those")
		require.Equal(t, []int{1, 2}, b.versions(t))
	})

	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		legacySchema(t, b.owner, b.cfg)
		const callers = 4
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				s, err := mysqlstore.New(b.owner, b.cfg)
				if err == nil {
					err = errors.Join(s.Migrate(t.Context()), s.Close())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, []int{1}, b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})
}

func TestProcedures(t *testing.T) {
	t.Parallel()

	// Migrating again drops and creates no procedure.
	t.Run("UnchangedNotRewritten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		created := func() string {
			var s string
			require.NoError(t, b.owner.QueryRowContext(t.Context(),
				"SELECT GROUP_CONCAT(CONCAT(routine_name, '@', created) ORDER BY routine_name) FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name LIKE CONCAT(?, '%')",
				b.cfg.TablePrefix).Scan(&s))
			return s
		}
		before := created()
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, before, created())
		applied := func() string {
			var s string
			require.NoError(t, b.owner.QueryRowContext(t.Context(), "SELECT GROUP_CONCAT(CONCAT(name, '@', applied_at) ORDER BY name) FROM "+b.table(b.store.Objects().Functions)).Scan(&s))
			return s
		}
		require.Contains(t, applied(), "renew@")
	})

	// A changed procedure is dropped and created again, alone, and the
	// accounts granted EXECUTE on it keep it.
	t.Run("ChangedRewrittenKeepsGrants", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		ctx := t.Context()
		account := mysqlserver.MySQLAccount(t, b.owner)
		mysqlserver.MySQLGrant(t, b.owner, b.cfg, account)
		_, err := b.owner.ExecContext(ctx, "UPDATE "+b.table(b.store.Objects().Functions)+" SET sha256 = 'an older text' WHERE name = 'renew'")
		require.NoError(t, err)
		st, err := b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.Equal(t, []string{"renew (changed)"}, st.Stale)
		require.NoError(t, b.store.Migrate(ctx))
		st, err = b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.False(t, st.Behind(), st.String())

		s := newStore(t, mysqlserver.MySQLDB(t, account), b.cfg)
		h := testutil.Holder(t, "a")
		g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		res, err := s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.NoError(t, err, "the account keeps EXECUTE on the renew created again")
		require.True(t, res[0].Renewed)
	})

	// An owner that is not root: without SELECT on mysql.procs_priv it is
	// refused before the procedure is dropped (the grants would be lost),
	// with what to do; with it, and the right to grant, the procedure is
	// replaced and the run-time account keeps EXECUTE.
	t.Run("OwnerAccount", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		ctx := t.Context()
		owner := mysqlserver.MySQLAccount(t, b.owner)
		_, err := b.owner.ExecContext(ctx, "GRANT CREATE, ALTER, DROP, CREATE ROUTINE, ALTER ROUTINE, SELECT, INSERT, UPDATE, DELETE ON "+
			mysqlstore.Quote("", b.cfg.Database)+".* TO '"+owner+"'@'%' WITH GRANT OPTION")
		require.NoError(t, err)
		ownerStore := newStore(t, mysqlserver.MySQLDB(t, owner), b.cfg)
		require.NoError(t, ownerStore.Migrate(ctx))
		worker := mysqlserver.MySQLAccount(t, b.owner)
		mysqlserver.MySQLGrant(t, b.owner, b.cfg, worker)
		_, err = b.owner.ExecContext(ctx, "UPDATE "+b.table(b.store.Objects().Functions)+" SET sha256 = 'an older text' WHERE name = 'renew'")
		require.NoError(t, err)

		err = ownerStore.Migrate(ctx)
		require.ErrorContains(t, err, "exists and must be dropped and created again, which takes away its grants, but the grants cannot be read")
		require.ErrorContains(t, err, "SELECT on mysql.procs_priv")
		var n int
		require.NoError(t, b.owner.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE() AND routine_name = ?",
			b.cfg.TablePrefix+"renew").Scan(&n))
		require.Equal(t, 1, n, "nothing was dropped")

		_, err = b.owner.ExecContext(ctx, "GRANT SELECT ON mysql.procs_priv TO '"+owner+"'@'%'")
		require.NoError(t, err)
		require.NoError(t, ownerStore.Migrate(ctx))
		s := newStore(t, mysqlserver.MySQLDB(t, worker), b.cfg)
		h := testutil.Holder(t, "a")
		g, err := s.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		res, err := s.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.NoError(t, err, "the worker keeps EXECUTE on the renew created again")
		require.True(t, res[0].Renewed)
	})

	t.Run("NewerLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		_, err := b.owner.ExecContext(t.Context(), "UPDATE "+b.table(b.store.Objects().Functions)+" SET revision = 99 WHERE name = 'renew'")
		require.NoError(t, err)
		st, err := b.store.SchemaStatus(t.Context())
		require.NoError(t, err)
		require.False(t, st.Behind())
		require.Equal(t, []string{"renew"}, st.Newer)
	})
}
