package registry_test

import (
	"context"
	"sync"
	"testing"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// TestMigrateWithPgstore applies the registry's and pgstore's migrations to
// one schema and prefix, in both orders and all at once, repeatedly: one
// `tenure migrate` can run both.
func TestMigrateWithPgstore(t *testing.T) {
	t.Parallel()
	for _, order := range []string{"RegistryFirst", "PgstoreFirst", "Concurrently"} {
		t.Run(order, func(t *testing.T) {
			t.Parallel()
			pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
			schema := testutil.UniqueName(t)
			t.Cleanup(func() { pgserver.PostgresDropSchema(t, pool, schema) })
			reg, err := registry.New(pool, registry.Config{Schema: schema})
			require.NoError(t, err)
			st, err := pgstore.New(pool, pgstore.Config{Schema: schema})
			require.NoError(t, err)
			t.Cleanup(func() { require.NoError(t, st.Close()) })
			ctx := ctxT(t)

			switch order {
			case "RegistryFirst":
				require.NoError(t, reg.Migrate(ctx))
				require.NoError(t, st.Migrate(ctx))
			case "PgstoreFirst":
				require.NoError(t, st.Migrate(ctx))
				require.NoError(t, reg.Migrate(ctx))
			default:
				var wg sync.WaitGroup
				errs := make(chan error, 8)
				for range 4 {
					wg.Go(func() { errs <- reg.Migrate(ctx) })
					wg.Go(func() { errs <- st.Migrate(ctx) })
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
			}
			require.NoError(t, reg.Migrate(ctx), "idempotent")

			var versions int
			require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{schema, "tenure_registry_migrations"}.Sanitize()).Scan(&versions))
			require.Equal(t, 2, versions)
			_, err = reg.Register(ctx, registry.RegisterParams{ID: "a", Address: "a:1"})
			require.NoError(t, err)
			_, err = st.Acquire(ctx, store.AcquireParams{Name: "l", Holder: testutil.Holder(t, "h"), TTL: store.MinTTL})
			require.NoError(t, err)
		})
	}
}

func TestMigrationSQLScript(t *testing.T) {
	t.Parallel()
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := registry.Config{Schema: testutil.UniqueName(t), TablePrefix: `odd "p" `}
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, pool, cfg.Schema) })
	script, err := cfg.MigrationSQL()
	require.NoError(t, err)
	ctx := ctxT(t)
	for range 2 {
		_, err = pool.Exec(ctx, script)
		require.NoError(t, err)
	}
	reg, err := registry.New(pool, cfg)
	require.NoError(t, err)
	require.NoError(t, reg.Migrate(ctx), "Migrate after the script finds everything applied")
	_, err = reg.Register(ctx, registry.RegisterParams{ID: "a", Address: "a:1"})
	require.NoError(t, err)
	_, err = reg.Place(ctx, "r", registry.PlaceParams{})
	require.NoError(t, err)
}

// TestLeastPrivilege runs every call as a role holding only what GrantSQL
// grants.
func TestLeastPrivilege(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	role := pgserver.PostgresRole(t, b.pool)
	grants, err := b.cfg.GrantSQL(role)
	require.NoError(t, err)
	ctx := ctxT(t)
	_, err = b.pool.Exec(ctx, grants)
	require.NoError(t, err)
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
	reg, err := registry.New(pool, b.cfg)
	require.NoError(t, err)

	ga, err := reg.Register(ctx, registry.RegisterParams{ID: "a", Address: "a:1", Labels: map[string]string{"k": "v"}})
	require.NoError(t, err)
	_, err = reg.Register(ctx, registry.RegisterParams{ID: "a", Address: "a:1"})
	require.ErrorIs(t, err, registry.ErrIdentityInUse)
	gb, err := reg.Register(ctx, registry.RegisterParams{ID: "b", Address: "b:1"})
	require.NoError(t, err)
	beat, err := reg.Heartbeat(ctx, ga)
	require.NoError(t, err)
	_, err = reg.Heartbeat(ctx, ga)
	require.ErrorIs(t, err, registry.ErrIdentityConflict)
	own, err := reg.Place(ctx, "r", registry.PlaceParams{Policy: func(string, []registry.Agent) (string, error) { return "a", nil }})
	require.NoError(t, err)
	require.Equal(t, "a", own.Agent.ID)
	_, err = reg.Owner(ctx, "r")
	require.NoError(t, err)
	_, err = reg.Agents(ctx)
	require.NoError(t, err)
	_, err = reg.Reassign(ctx, registry.ReassignParams{Resource: "r", From: "a", To: "b", Reason: "drain a"})
	require.NoError(t, err)
	require.NoError(t, reg.Remove(ctx, registry.RemoveParams{Resource: "r", Agent: "b", Reason: "deleted"}))
	history, err := reg.Reassignments(ctx, "r")
	require.NoError(t, err)
	require.Len(t, history, 2)
	require.NoError(t, reg.Deregister(ctx, beat.Registration))
	require.NoError(t, reg.Deregister(ctx, gb))

	// And no DDL.
	err = reg.Migrate(context.WithoutCancel(ctx))
	require.Error(t, err)
}
