package registry_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/internal/testserver/pgserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/registry"
)

// asRole returns a registry on b's schema that works as a new role granted
// what grant prints, and that role's pool.
func (b *bundle) asRole(t *testing.T, grant func(registry.Config, string) (string, error)) (*registry.Registry, *pgxpool.Pool) {
	t.Helper()
	role := pgserver.PostgresRole(t, b.pool)
	grants, err := grant(b.cfg, role)
	require.NoError(t, err)
	_, err = b.pool.Exec(context.Background(), grants)
	require.NoError(t, err)
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
	reg, err := registry.New(pool, b.cfg)
	require.NoError(t, err)
	return reg, pool
}

func requireDenied(t *testing.T, pool *pgxpool.Pool, why, sql string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), sql)
	require.Equal(t, "42501", pgkit.Code(err), "%s: %v", why, err)
}

// TestRunTimeRole: the role of GrantSQL runs the whole registry through its
// functions and cannot write the tables.
func TestRunTimeRole(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	reg, pool := b.asRole(t, registry.Config.GrantSQL)
	ctx := ctxT(t)

	a, err := reg.Register(ctx, registry.RegisterParams{ID: "a", Address: "a:1"})
	require.NoError(t, err)
	_, err = reg.Register(ctx, registry.RegisterParams{ID: "b", Address: "b:1"})
	require.NoError(t, err)
	beat, err := reg.Heartbeat(ctx, a)
	require.NoError(t, err)
	a = beat.Registration
	o, err := reg.Place(ctx, "r", registry.PlaceParams{})
	require.NoError(t, err)
	to := "a"
	if o.Agent.ID == "a" {
		to = "b"
	}
	_, err = reg.Reassign(ctx, registry.ReassignParams{Resource: "r", From: o.Agent.ID, To: to, Reason: "test"})
	require.NoError(t, err)
	history, err := reg.Reassignments(ctx, "r")
	require.NoError(t, err)
	require.Len(t, history, 1)
	require.NoError(t, reg.Remove(ctx, registry.RemoveParams{Resource: "r", Agent: to, Reason: "test"}))
	agents, err := reg.Agents(ctx)
	require.NoError(t, err)
	require.Len(t, agents, 2)

	b.age(t, "b", stale)
	requireDenied(t, pool, "revive a stale agent", "UPDATE "+b.table("agents")+" SET heartbeat_at = now()")
	requireDenied(t, pool, "forge an agent", "INSERT INTO "+b.table("agents")+
		" (id, instance, seq, address, heartbeat_interval_us, stale_after_us, registered_at, heartbeat_at) VALUES ('x', 'x', 1, 'x', 1, 2, now(), now())")
	requireDenied(t, pool, "move an ownership silently", "UPDATE "+b.table("owners")+" SET agent_id = 'a'")
	requireDenied(t, pool, "delete ownerships", "DELETE FROM "+b.table("owners"))
	requireDenied(t, pool, "rewrite the history", "UPDATE "+b.table("reassignments")+" SET reason = 'nothing happened'")
	requireDenied(t, pool, "erase the history", "DELETE FROM "+b.table("reassignments"))
	requireDenied(t, pool, "read the tables", "SELECT * FROM "+b.table("agents"))
	require.NoError(t, reg.Deregister(ctx, a))

	got, err := b.reg.Agent(ctx, "b")
	require.NoError(t, err)
	require.False(t, got.Alive, "b stayed stale")
	require.Equal(t, 2, b.count(t, "reassignments"), "the reassignment and the removal, each with its history row")
}

// TestReadOnlyRole: the role of ReadGrantSQL reads agents, ownerships and
// the history, and cannot register or place.
func TestReadOnlyRole(t *testing.T) {
	t.Parallel()
	b := setup(t, registry.Config{})
	ctx := ctxT(t)
	b.register(t, "a")
	_, err := b.reg.Place(ctx, "r", registry.PlaceParams{})
	require.NoError(t, err)
	reg, _ := b.asRole(t, registry.Config.ReadGrantSQL)

	agents, err := reg.Agents(ctx)
	require.NoError(t, err)
	require.Len(t, agents, 1)
	o, err := reg.Owner(ctx, "r")
	require.NoError(t, err)
	require.Equal(t, "a", o.Agent.ID)
	_, err = reg.Reassignments(ctx, "r")
	require.NoError(t, err)

	_, err = reg.Register(ctx, registry.RegisterParams{ID: "x", Address: "x:1"})
	require.ErrorContains(t, err, "permission denied")
	_, err = reg.Place(ctx, "s", registry.PlaceParams{})
	require.ErrorContains(t, err, "permission denied")
}

// TestUpgradeRevokesDirectWrites: a registry migrated by an older library,
// whose run-time role had the table privileges of then, loses the write
// privileges in place when migration 002 runs, and keeps its agents.
func TestUpgradeRevokesDirectWrites(t *testing.T) {
	t.Parallel()
	pool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, "")
	cfg := registry.Config{Schema: testutil.UniqueName(t), TablePrefix: testPrefix}
	t.Cleanup(func() { pgserver.PostgresDropSchema(t, pool, cfg.Schema) })
	reg, err := registry.New(pool, cfg)
	require.NoError(t, err)
	ctx := ctxT(t)
	require.NoError(t, registry.MigrateTo(ctx, reg, 1))
	b := &bundle{pool: pool, cfg: cfg, reg: reg}
	_, err = pool.Exec(ctx, "INSERT INTO "+b.table("agents")+
		" (id, instance, seq, address, heartbeat_interval_us, stale_after_us, registered_at, heartbeat_at) VALUES ('a', 'i', 1, 'a:1', 1000000, 3000000, now(), now())")
	require.NoError(t, err, "an agent registered by the older library")

	role := pgserver.PostgresRole(t, pool)
	r := pgx.Identifier{role}.Sanitize()
	_, err = pool.Exec(ctx, "GRANT USAGE ON SCHEMA "+pgx.Identifier{cfg.Schema}.Sanitize()+" TO "+r+"; "+
		"GRANT SELECT, INSERT, UPDATE ON TABLE "+b.table("agents")+" TO "+r+"; "+
		"GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE "+b.table("owners")+" TO "+r+"; "+
		"GRANT SELECT, INSERT ON TABLE "+b.table("reassignments")+" TO "+r)
	require.NoError(t, err, "the grants of the older library")
	rolePool := pgserver.PostgresPool(t, pgx.QueryExecModeCacheStatement, role)
	_, err = rolePool.Exec(ctx, "UPDATE "+b.table("agents")+" SET address = 'x:1'")
	require.NoError(t, err, "before 002 the role could write the table itself")

	require.NoError(t, reg.Migrate(ctx))
	requireDenied(t, rolePool, "write after the upgrade", "UPDATE "+b.table("agents")+" SET address = 'y:1'")
	requireDenied(t, rolePool, "delete after the upgrade", "DELETE FROM "+b.table("owners"))
	a, err := reg.Agent(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "x:1", a.Address, "the agent made before the upgrade is kept")
}
