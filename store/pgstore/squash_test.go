package pgstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// legacySchema makes cfg's schema as a tenure before v0.1.0 left it: every
// migration of that numbering applied, none of this one's.
func legacySchema(tb testing.TB, owner *pgxpool.Pool, cfg pgstore.Config) {
	tb.Helper()
	tb.Cleanup(func() { pgserver.PostgresDropSchema(tb, owner, cfg.Schema) })
	s, err := pgstore.New(owner, cfg)
	require.NoError(tb, err)
	defer func() { require.NoError(tb, s.Close()) }()
	require.NoError(tb, pgstore.LegacyMigrateTo(context.Background(), s, pgstore.LegacyVersions()))
}

// legacyHarness is the PostgreSQL harness whose every store is on a
// schema made before v0.1.0 and then migrated by this library.
type legacyHarness struct{ pgserver.PostgresHarness }

func (h legacyHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	cfg := pgserver.PostgresConfig(tb)
	legacySchema(tb, h.Owner, cfg)
	s, err := pgstore.New(h.Owner, cfg)
	require.NoError(tb, err)
	tb.Cleanup(func() { require.NoError(tb, s.Close()) })
	require.NoError(tb, s.Migrate(context.Background()))
	return s
}

// TestLegacySchemaConformance runs the conformance suite on schemas
// migrated before v0.1.0 and upgraded by Migrate: they behave as fresh
// ones.
func TestLegacySchemaConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, legacyHarness{pgserver.PostgresHarness{Owner: pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")}})
}

// catalog describes every object of a schema, with the schema's name
// replaced by SCHEMA: what a fresh schema and an upgraded one must share.
func catalog(t *testing.T, owner *pgxpool.Pool, schema string, skip ...string) []string {
	t.Helper()
	rows, err := owner.Query(t.Context(), `
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
FROM pg_class AS c
JOIN pg_attribute AS a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef AS d ON d.adrelid = c.oid AND d.adnum = a.attnum
WHERE c.relnamespace = $1::regnamespace AND c.relkind = 'r'
UNION ALL
SELECT 'relation ' || c.relname || ' ' || c.relkind::text || ' ' || coalesce(array_to_string(c.reloptions, ','), '')
       || ' acl ' || coalesce(c.relacl::text, '')
FROM pg_class AS c WHERE c.relnamespace = $1::regnamespace AND c.relkind IN ('r', 'S', 'i')
UNION ALL
SELECT 'constraint ' || r.relname || ' ' || pg_get_constraintdef(k.oid)
FROM pg_constraint AS k JOIN pg_class AS r ON r.oid = k.conrelid
WHERE k.connamespace = $1::regnamespace
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index AS i JOIN pg_class AS r ON r.oid = i.indrelid
WHERE r.relnamespace = $1::regnamespace
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(g.oid)
FROM pg_trigger AS g JOIN pg_class AS r ON r.oid = g.tgrelid
WHERE r.relnamespace = $1::regnamespace AND NOT g.tgisinternal
UNION ALL
SELECT 'sequence ' || s.seqrelid::regclass::text || ' ' || s.seqtypid::regtype || ' ' || s.seqmin::text || ' ' || s.seqcache::text || ' ' || s.seqcycle::text
FROM pg_sequence AS s JOIN pg_class AS r ON r.oid = s.seqrelid
WHERE r.relnamespace = $1::regnamespace AND r.relname NOT LIKE '%_id_seq' AND r.relname NOT LIKE '%_ticket_seq'
UNION ALL
SELECT 'function ' || pg_get_functiondef(p.oid) || ' acl ' || coalesce(p.proacl::text, '')
FROM pg_proc AS p WHERE p.pronamespace = $1::regnamespace
ORDER BY 1`, pgx.Identifier{schema}.Sanitize())
	require.NoError(t, err)
	objects, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	out := objects[:0]
	for _, o := range objects {
		o = strings.ReplaceAll(o, pgx.Identifier{schema}.Sanitize(), "SCHEMA")
		o = strings.ReplaceAll(o, schema, "SCHEMA")
		if !containsAny(o, skip) {
			out = append(out, o)
		}
	}
	return out
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestMigrateLegacySchema(t *testing.T) {
	t.Parallel()

	// A schema made before v0.1.0 and upgraded has exactly the objects of
	// a fresh one: columns, defaults, constraints, indexes, triggers, the
	// sequence, and every function's definition, settings and grants.
	t.Run("SameObjectsAsFresh", func(t *testing.T) {
		t.Parallel()
		owner := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
		legacyCfg, freshCfg := pgserver.PostgresConfig(t), pgserver.PostgresConfig(t)
		freshCfg.Schema += "_fresh"
		legacySchema(t, owner, legacyCfg)
		require.NoError(t, newStore(t, owner, legacyCfg).Migrate(t.Context()))
		pgserver.PostgresSchema(t, owner, freshCfg)
		// The migrations table records another numbering; its contents
		// are compared below.
		skip := []string{"t_migrations"}
		fresh := catalog(t, owner, freshCfg.Schema, skip...)
		require.NotEmpty(t, fresh)
		require.Equal(t, fresh, catalog(t, owner, legacyCfg.Schema, skip...))
	})

	// The upgrade keeps leases, tokens and fences, records this
	// numbering, and the store works on: tokens go on up.
	t.Run("KeepsData", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		legacySchema(t, b.owner, b.cfg)
		ctx := t.Context()
		g := b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
		before, err := b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.True(t, before.Behind())
		require.Equal(t, pgstore.LegacyVersions(), before.Squashed)
		require.Contains(t, before.String(), "schema version 010 of the numbering before v0.1.0")

		require.NoError(t, b.store.Migrate(ctx))
		require.Equal(t, pgstore.Versions(), b.versions(t), "the older numbering is forgotten")
		after, err := b.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.False(t, after.Behind(), after.String())
		require.Empty(t, after.Stale)
		require.Equal(t, 19, after.Current)
		r, err := b.store.Get(ctx, "job")
		require.NoError(t, err)
		require.Equal(t, g.Token, r.Token)
		require.Equal(t, store.StateHeld, r.State)
		g2 := b.acquire(t, "other", testutil.Holder(t, "b"), time.Minute)
		require.Greater(t, g2.Token, g.Token, "the token sequence goes on")
	})

	// A schema migrated only part of the way before v0.1.0 is refused,
	// with what to do, and left as it was.
	t.Run("PartlyMigratedRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		ctx := t.Context()
		require.NoError(t, pgstore.LegacyMigrateTo(ctx, b.store, 5))
		err := b.store.Migrate(ctx)
		require.ErrorContains(t, err, "records migrations of the numbering tenure used before v0.1.0 (001_init to 010_history_prune_sampled), but not exactly those")
		require.ErrorContains(t, err, "migrate it to 010_history_prune_sampled first with a tenure built before the migrations were squashed")
		require.Equal(t, []int{1, 2, 3, 4, 5}, b.versions(t))

		script, err := b.cfg.MigrationSQL()
		require.NoError(t, err)
		_, err = b.owner.Exec(ctx, script)
		require.ErrorContains(t, err, "but not exactly those", "the printed script refuses it too")
		require.Equal(t, []int{1, 2, 3, 4, 5}, b.versions(t))
	})

	// Many Migrate calls at once on a schema made before v0.1.0: all
	// succeed, one upgrades it.
	t.Run("Concurrent", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, false)
		legacySchema(t, b.owner, b.cfg)
		const callers = 6
		errs := make(chan error, callers)
		var wg sync.WaitGroup
		for range callers {
			wg.Go(func() {
				s, err := pgstore.New(b.owner, b.cfg)
				if err == nil {
					err = s.Migrate(t.Context())
					err = errors.Join(err, s.Close())
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, pgstore.Versions(), b.versions(t))
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})

	// The printed script upgrades such a schema as Migrate does.
	t.Run("PrintedScript", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgserver.PostgresWeirdConfig, false)
		legacySchema(t, b.owner, b.cfg)
		script, err := b.cfg.MigrationSQL()
		require.NoError(t, err)
		_, err = b.owner.Exec(t.Context(), script)
		require.NoError(t, err)
		require.Equal(t, pgstore.Versions(), b.versions(t))
		st, err := b.store.SchemaStatus(t.Context())
		require.NoError(t, err)
		require.False(t, st.Behind(), st.String())
		b.acquire(t, "job", testutil.Holder(t, "a"), time.Minute)
	})
}
