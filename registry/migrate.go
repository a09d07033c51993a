package registry

import (
	"context"
	"embed"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/store"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// migrations returns the registry's migrations for obj. They share the
// schema's advisory lock with pgstore's, so `tenure migrate` may apply the
// two in either order, and keep their versions in a table of their own.
func migrations(obj Objects) (pgkit.Set, error) {
	return pgkit.LoadSet(pgkit.Set{
		Errors:    errs,
		Namespace: obj.namespace(),
		Title:     "tenure registry schema",
		Table:     obj.namespace().Ident(obj.Migrations),
		Render:    obj.renderer(),
	}, migrationFS, "migrations")
}

// Migrate creates or upgrades the registry's schema and tables to this
// version of the library. It needs DDL rights (run it as the schema's
// owner; the run-time role needs only what [Config.GrantSQL] grants). It is
// idempotent and safe to call from many processes at once, and alongside
// pgstore's Migrate on the same schema and prefix, in either order:
// migrations run in one transaction under a transaction-scoped advisory lock
// per schema (the same lock pgstore takes), and each applied version is
// recorded in the prefix's registry_migrations table, apart from pgstore's
// own. Versions recorded there that this library does not know (a newer
// library ran) are left alone.
func (r *Registry) Migrate(ctx context.Context) error {
	set, err := migrations(r.obj)
	if err != nil {
		return err
	}
	return set.Run(ctx, r.pool)
}

// SchemaStatus reports what the schema records of the registry's
// migrations next to what [Registry.Migrate] would apply, and changes
// nothing (`tenure migrate --check`). It takes no lock.
func (r *Registry) SchemaStatus(ctx context.Context) (store.SchemaStatus, error) {
	set, err := migrations(r.obj)
	if err != nil {
		return store.SchemaStatus{}, err
	}
	return set.Status(ctx, r.pool)
}

// MigrationSQL returns the registry's whole schema for c as one SQL script,
// for a DBA to review and run (psql -v ON_ERROR_STOP=1 -f) instead of
// [Registry.Migrate]: it takes the same advisory lock, creates what is
// missing, records every version and can be run again without harm.
func (c Config) MigrationSQL() (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	return pgkit.ScriptOf(migrations(obj))
}

// GrantSQL returns the GRANT statements that let role use a registry
// configured by c at run time, and nothing more: USAGE on the schema and
// EXECUTE on the registry's functions, which run as their owner. The role
// gets no privilege on the tables: it can register, heartbeat, deregister,
// place, reassign and remove only as those functions do (a reassignment or
// removal always leaves its history row), and cannot forge a heartbeat,
// revive a dead agent or rewrite the history. Run it after the migration,
// as the schema's owner.
func (c Config) GrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	return obj.namespace().GrantSQL("registry", role, obj.executeGrant(false))
}

// ReadGrantSQL returns the GRANT statements of a read-only role (`tenure
// agents`, `tenure owner`, dashboards): USAGE on the schema and EXECUTE on
// the functions that read agents, ownerships and the history. It can read
// the registry and change nothing.
func (c Config) ReadGrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	return obj.namespace().GrantSQL("registry", role, obj.executeGrant(true))
}
