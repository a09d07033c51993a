package registry

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
		return nil, fmt.Errorf("registry: embedded migrations are missing: %w", err)
	}
	ms := make([]migration, 0, len(entries))
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("registry: embedded migration %q is not named NNN_name.up.sql", e.Name())
		}
		version, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("registry: embedded migration %q: %w", e.Name(), err)
		}
		if version != len(ms)+1 {
			return nil, fmt.Errorf("registry: embedded migration %q: expected version %03d", e.Name(), len(ms)+1)
		}
		text, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("registry: embedded migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: version, name: m[2], sql: string(text)})
	}
	return ms, nil
}

// migrationLockKey names the advisory lock that serialises migrations of one
// schema; hashtextextended turns it into the lock's key. It is pgstore's
// key, so the two packages' migrations of one schema never run at once and
// `tenure migrate` may apply them in either order.
func migrationLockKey(schema string) string { return "tenure migrate " + schema }

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS {{migrations}} (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`

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
	const op = "migrate"
	if err := ctx.Err(); err != nil {
		return notAttempted(op, err)
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return interpretError(op, err)
	}
	defer func() {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // After Commit this is a no-op; after a failure the failure is the error to report.
	}()
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", migrationLockKey(r.obj.Schema)); err != nil {
		return interpretError(op, err)
	}
	var schemaExists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = $1)",
		r.obj.Schema).Scan(&schemaExists); err != nil {
		return interpretError(op, err)
	}
	if !schemaExists {
		// Only when missing: CREATE SCHEMA IF NOT EXISTS would demand the
		// database's CREATE privilege even when the schema exists.
		if _, err := tx.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{r.obj.Schema}.Sanitize()); err != nil {
			return interpretError(fmt.Sprintf("migrate: create schema %q", r.obj.Schema), err)
		}
	}
	if _, err := tx.Exec(ctx, r.names.render(createMigrationsTable)); err != nil {
		return interpretError(op, err)
	}
	applied := make(map[int]bool)
	rows, err := tx.Query(ctx, r.names.render("SELECT version FROM {{migrations}}"))
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
		mop := fmt.Sprintf("migrate: apply registry %03d_%s", m.version, m.name)
		if _, err := tx.Exec(ctx, r.names.render(m.sql)); err != nil {
			return interpretError(mop, err)
		}
		if _, err := tx.Exec(ctx, r.names.render("INSERT INTO {{migrations}} (version, name) VALUES ($1, $2)"),
			m.version, m.name); err != nil {
			return interpretError(mop, err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return interpretError(op, err)
	}
	return nil
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
	ms, err := loadMigrations()
	if err != nil {
		return "", err
	}
	names := newSQLNames(obj)
	var b strings.Builder
	fmt.Fprintf(&b, "-- tenure registry schema: schema %s, table prefix %s.\n", quoteLiteral(obj.Schema), quoteLiteral(obj.TablePrefix))
	b.WriteString("-- Run as the schema's owner; the run-time role needs only the grants registry.Config.GrantSQL lists.\n")
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0));\n", quoteLiteral(migrationLockKey(obj.Schema)))
	fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", pgx.Identifier{obj.Schema}.Sanitize())
	b.WriteString(names.render(createMigrationsTable))
	b.WriteString(";\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- Registry migration %03d_%s\n", m.version, m.name)
		b.WriteString(strings.TrimRight(names.render(m.sql), "\n"))
		b.WriteString("\n")
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, %s) ON CONFLICT (version) DO NOTHING;\n",
			ident(obj.Schema, obj.Migrations), m.version, quoteLiteral(m.name))
	}
	b.WriteString("\nCOMMIT;\n")
	return b.String(), nil
}

// GrantSQL returns the GRANT statements that let role use a registry
// configured by c at run time, and nothing more: USAGE on the schema;
// SELECT, INSERT and UPDATE on the agents table; SELECT, INSERT, UPDATE and
// DELETE on the owners table ([Registry.Remove] deletes); SELECT and INSERT
// on the reassignments table. No DDL, and no DELETE on agents: agent rows
// are never deleted. Run it after the migration, as the schema's owner.
func (c Config) GrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	if role == "" {
		return "", fmt.Errorf("registry: grant: %w: role is empty", tenure.ErrInvalid)
	}
	r := pgx.Identifier{role}.Sanitize()
	var b strings.Builder
	fmt.Fprintf(&b, "GRANT USAGE ON SCHEMA %s TO %s;\n", pgx.Identifier{obj.Schema}.Sanitize(), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE ON TABLE %s TO %s;\n", ident(obj.Schema, obj.Agents), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT, UPDATE, DELETE ON TABLE %s TO %s;\n", ident(obj.Schema, obj.Owners), r)
	fmt.Fprintf(&b, "GRANT SELECT, INSERT ON TABLE %s TO %s;\n", ident(obj.Schema, obj.Reassignments), r)
	return b.String(), nil
}
