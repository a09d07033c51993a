package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// migration is one embedded migrations/NNN_name.up.sql file.
type migration struct {
	version int
	name    string
	sql     string // with placeholders
}

var migrationFile = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// loadMigrations reads the embedded migrations in version order.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("pgstore: embedded migrations are missing: %w", err)
	}
	ms := make([]migration, 0, len(entries))
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("pgstore: embedded migration %q is not named NNN_name.up.sql", e.Name())
		}
		version, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("pgstore: embedded migration %q: %w", e.Name(), err)
		}
		if version != len(ms)+1 {
			return nil, fmt.Errorf("pgstore: embedded migration %q: expected version %03d", e.Name(), len(ms)+1)
		}
		text, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("pgstore: embedded migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: version, name: m[2], sql: string(text)})
	}
	return ms, nil
}

// migrationLockKey names the advisory lock that serialises migrations of one
// schema; hashtextextended turns it into the lock's key.
func migrationLockKey(schema string) string { return "tenure migrate " + schema }

// createSchema returns a statement that creates schema when it is missing.
// Not CREATE SCHEMA IF NOT EXISTS: that demands the database's CREATE
// privilege even when the schema exists. Names cannot contain '$' (see
// Config), so the dollar quoting is safe.
func createSchema(schema string) string {
	return "DO $tenure$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = " +
		quoteLiteral(schema) + ") THEN CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize() + "; END IF; END $tenure$"
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS {{migrations}} (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`

// Migrate creates or upgrades the store's schema, tables, sequence and
// fence functions to this version of the library. It needs DDL rights (run
// it as the schema's owner; the run-time role needs only what
// [Config.GrantSQL] grants). It is idempotent and safe to call from many
// processes at once: migrations run in one transaction under a
// transaction-scoped advisory lock per schema, and each applied version is
// recorded in the prefix's migrations table. Migrations recorded there
// that this library does not know (a newer library ran) are left alone.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.begin(ctx, "migrate"); err != nil {
		return err
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	const op = "migrate"
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return interpretError(op, err)
	}
	defer func() {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // After Commit this is a no-op; after a failure the failure is the error to report.
	}()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", migrationLockKey(s.obj.Schema)); err != nil {
		return interpretError(op, err)
	}
	if _, err := tx.Exec(ctx, createSchema(s.obj.Schema)); err != nil {
		return interpretError(fmt.Sprintf("migrate: create schema %q", s.obj.Schema), err)
	}
	if _, err := tx.Exec(ctx, s.names.render(createMigrationsTable)); err != nil {
		return interpretError(op, err)
	}
	applied := make(map[int]bool)
	rows, err := tx.Query(ctx, s.names.render("SELECT version FROM {{migrations}}"))
	if err != nil {
		return interpretError(op, err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return interpretError(op, err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return interpretError(op, err)
	}
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		mop := fmt.Sprintf("migrate: apply %03d_%s", m.version, m.name)
		if _, err := tx.Exec(ctx, s.names.render(m.sql)); err != nil {
			return interpretError(mop, err)
		}
		if _, err := tx.Exec(ctx, s.names.render("INSERT INTO {{migrations}} (version, name) VALUES ($1, $2)"),
			m.version, m.name); err != nil {
			return interpretError(mop, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
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
	ms, err := loadMigrations()
	if err != nil {
		return "", err
	}
	names := newSQLNames(obj)
	var b strings.Builder
	fmt.Fprintf(&b, "-- tenure schema: schema %s, table prefix %s.\n", quoteLiteral(obj.Schema), quoteLiteral(obj.TablePrefix))
	b.WriteString("-- Run as the schema's owner; the run-time role needs only the grants pgstore.Config.GrantSQL lists.\n")
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0));\n", quoteLiteral(migrationLockKey(obj.Schema)))
	b.WriteString(createSchema(obj.Schema))
	b.WriteString(";\n")
	b.WriteString(names.render(createMigrationsTable))
	b.WriteString(";\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- Migration %03d_%s\n", m.version, m.name)
		b.WriteString(strings.TrimRight(names.render(m.sql), "\n"))
		b.WriteString("\n")
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, %s) ON CONFLICT (version) DO NOTHING;\n",
			ident(obj.Schema, obj.Migrations), m.version, quoteLiteral(m.name))
	}
	b.WriteString("\nCOMMIT;\n")
	return b.String(), nil
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
		return "", fmt.Errorf("pgstore: grant: %w: role is empty", tenure.ErrInvalid)
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
