package pgstore

import (
	"context"
	"embed"
	"fmt"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// migrations returns the store's migrations for obj.
func migrations(obj Objects) (pgkit.Set, error) {
	ms, err := pgkit.Load("pgstore", migrationFS, "migrations")
	return pgkit.Set{
		Errors:     errs,
		Namespace:  obj.namespace(),
		Title:      "tenure schema",
		Table:      obj.namespace().Ident(obj.Migrations),
		Render:     obj.renderer(),
		Migrations: ms,
	}, err
}

// Migrate creates or upgrades the store's schema, tables, sequence and
// fence functions to this version of the library. It needs DDL rights (run
// it as the schema's owner; the run-time role needs only what
// [Config.GrantSQL] grants). It is idempotent and safe to call from many
// processes at once, and alongside the fleet registry's Migrate on the same
// schema: migrations run in one transaction under a transaction-scoped
// advisory lock per schema, and each applied version is recorded in the
// prefix's migrations table. Migrations recorded there that this library
// does not know (a newer library ran) are left alone.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.begin(ctx, "migrate"); err != nil {
		return err
	}
	set, err := migrations(s.obj)
	if err != nil {
		return err
	}
	return set.Run(ctx, s.pool)
}

// MigrationSQL returns the whole schema for c as one SQL script, for a DBA
// to review and run (psql -v ON_ERROR_STOP=1 -f) instead of [Store.Migrate]:
// it takes the same advisory lock, creates what is missing, records every
// version and can be run again without harm.
func (c Config) MigrationSQL() (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	set, err := migrations(obj)
	if err != nil {
		return "", err
	}
	return set.Script(), nil
}

// GrantSQL returns the GRANT statements that let role use a store
// configured by c at run time, and nothing more: USAGE on the schema;
// SELECT, INSERT and UPDATE on the leases and fences tables; USAGE on the
// token sequence (enough for nextval); EXECUTE on the fence functions. The
// role needs no DDL, no DELETE and no TRUNCATE. Run it after the
// migration, as the schema's owner.
func (c Config) GrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	ns := obj.namespace()
	return ns.GrantSQL("pgstore", role,
		fmt.Sprintf("SELECT, INSERT, UPDATE ON TABLE %s, %s", ns.Ident(obj.Leases), ns.Ident(obj.Fences)),
		"USAGE ON SEQUENCE "+ns.Ident(obj.TokenSeq),
		fmt.Sprintf("EXECUTE ON FUNCTION %s(text, bigint), %s(text, bigint), %s(text, bigint, text, text, bigint)",
			ns.Ident(obj.FenceFunc), ns.Ident(obj.CheckLeaseFunc), ns.Ident(obj.CheckLeaseStrictFunc)),
	)
}
