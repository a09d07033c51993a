package pgstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// functionVersions returns, for every function of the schema, the
// transaction that last wrote its definition: it changes when CREATE OR
// REPLACE runs, even with the same text.
func (b *testBundle) functionVersions(t *testing.T) map[string]string {
	t.Helper()
	rows, err := b.owner.Query(t.Context(), "SELECT proname::text, xmin::text FROM pg_catalog.pg_proc WHERE pronamespace = $1::regnamespace",
		pgx.Identifier{b.cfg.Schema}.Sanitize())
	require.NoError(t, err)
	out := map[string]string{}
	var name, xmin string
	_, err = pgx.ForEachRow(rows, []any{&name, &xmin}, func() error {
		out[name] = xmin
		return nil
	})
	require.NoError(t, err)
	return out
}

func (b *testBundle) recordFunction(t *testing.T, name string, revision int, hash string) {
	t.Helper()
	obj := b.store.Objects()
	_, err := b.owner.Exec(t.Context(), "UPDATE "+pgx.Identifier{obj.Schema, obj.Functions}.Sanitize()+
		" SET revision = $2, sha256 = $3 WHERE name = $1", name, revision, hash)
	require.NoError(t, err)
}

func TestFunctions(t *testing.T) {
	t.Parallel()

	// Migrating again rewrites no function.
	t.Run("UnchangedNotRewritten", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		before := b.functionVersions(t)
		require.Len(t, before, 19)
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, before, b.functionVersions(t))
	})

	// A function whose recorded text differs (an older build of the same
	// revision, or a lower revision) is installed again, alone; its
	// grants stay, so the run-time role keeps working.
	t.Run("ChangedRewritten", func(t *testing.T) {
		t.Parallel()
		b := setupRole(t, pgstore.Config.GrantSQL)
		ctx := t.Context()
		obj := b.obj
		bundle := &testBundle{owner: b.owner, cfg: b.cfg, store: newStore(t, b.owner, b.cfg)}
		bundle.recordFunction(t, "renew", 1, "an older text")
		bundle.recordFunction(t, "release", 0, "a lower revision")
		st, err := bundle.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.True(t, st.Behind())
		require.Equal(t, []string{"release (older)", "renew (changed)"}, st.Stale)
		before := bundle.functionVersions(t)

		require.NoError(t, bundle.store.Migrate(ctx))
		after := bundle.functionVersions(t)
		for name, xmin := range before {
			if name == obj.RenewFunc || name == obj.ReleaseFunc {
				require.NotEqual(t, xmin, after[name], "%s is installed again", name)
			} else {
				require.Equal(t, xmin, after[name], "%s is left alone", name)
			}
		}
		st, err = bundle.store.SchemaStatus(ctx)
		require.NoError(t, err)
		require.False(t, st.Behind(), st.String())
		h := testutil.Holder(t, "a")
		g, err := b.store.Acquire(ctx, store.AcquireParams{Name: "job", Holder: h, TTL: time.Minute})
		require.NoError(t, err)
		res, err := b.store.Renew(ctx, []store.RenewParams{{Name: "job", Holder: h, Token: g.Token, Seq: g.Seq, TTL: time.Minute}})
		require.NoError(t, err, "the run-time role keeps EXECUTE on the renew installed again")
		require.True(t, res[0].Renewed)
	})

	// A function a newer library installed (a higher revision) is left
	// alone, and does not count as behind.
	t.Run("NewerLeftAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, true)
		b.recordFunction(t, "renew", 99, "a newer text")
		before := b.functionVersions(t)
		st, err := b.store.SchemaStatus(t.Context())
		require.NoError(t, err)
		require.False(t, st.Behind(), st.String())
		require.Equal(t, []string{"renew"}, st.Newer)
		require.Contains(t, st.String(), "installed by a newer library (left alone): renew")
		require.NoError(t, b.store.Migrate(t.Context()))
		require.Equal(t, before, b.functionVersions(t))
	})

	// A schema nobody migrated reports every migration and function to
	// apply, and reading that creates nothing.
	t.Run("StatusOfNothing", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgserver.PostgresWeirdConfig, false)
		st, err := b.store.SchemaStatus(t.Context())
		require.NoError(t, err)
		require.True(t, st.Behind())
		require.Zero(t, st.Version)
		require.Equal(t, []string{"001_tables", "002_windows"}, st.Missing)
		require.Len(t, st.Stale, 19)
		require.Contains(t, st.String(), "schema not migrated (this library's version is 002)")
		var n int
		require.NoError(t, b.owner.QueryRow(t.Context(), "SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = $1", b.cfg.Schema).Scan(&n))
		require.Zero(t, n, "the status created nothing")
	})
}
