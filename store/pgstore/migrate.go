package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/pgmigrate"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// migrations returns the store's migrations for obj.
func migrations(obj Objects) (pgmigrate.Set, error) {
	ms, err := pgmigrate.Load("pgstore", migrationFS, "migrations")
	return pgmigrate.Set{
		Owner:      "pgstore",
		Schema:     obj.Schema,
		Table:      ident(obj.Schema, obj.Migrations),
		Render:     newSQLNames(obj).render,
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
	const op = "migrate"
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	set, err := migrations(s.obj)
	if err != nil {
		return err
	}
	if err := set.Run(ctx, s.pool); err != nil {
		var step *pgmigrate.Error
		if errors.As(err, &step) {
			return interpretError(step.Op, step.Err)
		}
		return interpretError(op, err)
	}
	return nil
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
	return set.Script(
		fmt.Sprintf("tenure schema: schema %s, table prefix %s.", pgmigrate.QuoteLiteral(obj.Schema), pgmigrate.QuoteLiteral(obj.TablePrefix)),
		"Run as the schema's owner; the run-time role needs only the grants pgstore.Config.GrantSQL lists.",
	), nil
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
	if role == "" {
		return "", fmt.Errorf("pgstore: grant: %w: role is empty", store.ErrInvalid)
	}
	r := pgx.Identifier{role}.Sanitize()
	var b strings.Builder
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", pgx.Identifier{obj.Schema}.Sanitize(), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE ON TABLE %s, %s TO %s;\n",
		ident(obj.Schema, obj.Leases), ident(obj.Schema, obj.Fences), r)
	fmt.Fprintf(&b, "GRANT USAGE ON SEQUENCE %s TO %s;\n", ident(obj.Schema, obj.TokenSeq), r)
	fmt.Fprintf(&b, "GRANT EXECUTE ON FUNCTION %s(text, bigint), %s(text, bigint), %s(text, bigint, text, text, bigint) TO %s;\n",
		ident(obj.Schema, obj.FenceFunc), ident(obj.Schema, obj.CheckLeaseFunc), ident(obj.Schema, obj.CheckLeaseStrictFunc), r)
	return b.String(), nil
}
