package pgkit

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Migration is one file NNN_name.up.sql.
type Migration struct {
	Version int
	Name    string
	SQL     string // with the owner's {{placeholders}}
}

// Set is the migrations of one package, ready to apply or print. Every
// set of migrations of a schema runs under the same transaction-scoped
// advisory lock, so sets never run at once and may be applied in either
// order; each set records its applied versions in a table of its own.
// Migrations are idempotent to apply: a version already recorded is
// skipped, and versions recorded by a newer library are left alone.
type Set struct {
	// Errors interprets the server's and the driver's errors for the
	// package; its Owner names the package in messages and scripts.
	Errors Interpreter
	// Namespace is where the migrations create objects.
	Namespace Namespace
	// Title starts the script's header ("tenure registry schema").
	Title string
	// Table is the quoted, schema-qualified table that records applied
	// versions.
	Table string
	// Render substitutes the owner's quoted names into SQL.
	Render     func(sql string) string
	Migrations []Migration
}

// LoadSet returns s with the migrations in dir of fsys, read by [Load] for
// s.Errors.Owner. When they cannot be read it returns s without migrations,
// and the error.
func LoadSet(s Set, fsys fs.FS, dir string) (Set, error) {
	ms, err := Load(s.Errors.Owner, fsys, dir)
	s.Migrations = ms
	return s, err
}

// ScriptOf returns the script of s, or err when LoadSet, whose results it
// takes, failed.
func ScriptOf(s Set, err error) (string, error) {
	if err != nil {
		return "", err
	}
	return s.Script(), nil
}

var fileName = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// Load reads the migrations in dir of fsys, which must be numbered 001,
// 002, … without gaps.
func Load(owner string, fsys fs.FS, dir string) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("%s: embedded migrations are missing: %w", owner, err)
	}
	ms := make([]Migration, 0, len(entries))
	for _, e := range entries {
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("%s: embedded migration %q is not named NNN_name.up.sql", owner, e.Name())
		}
		version, err := strconv.Atoi(m[1])
		if err != nil {
			return nil, fmt.Errorf("%s: embedded migration %q: %w", owner, e.Name(), err)
		}
		if version != len(ms)+1 {
			return nil, fmt.Errorf("%s: embedded migration %q: expected version %03d", owner, e.Name(), len(ms)+1)
		}
		text, err := fs.ReadFile(fsys, dir+"/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("%s: embedded migration %q: %w", owner, e.Name(), err)
		}
		ms = append(ms, Migration{Version: version, Name: m[2], SQL: string(text)})
	}
	return ms, nil
}

// lockKey names the advisory lock that serialises every migration of one
// schema; hashtextextended turns it into the lock's key.
func lockKey(schema string) string { return "tenure migrate " + schema }

// createSchema creates the schema when it is missing. Not CREATE SCHEMA IF
// NOT EXISTS: that demands the database's CREATE privilege even when the
// schema exists. The dollar quoting is safe because the owners refuse '$'
// in names.
func createSchema(schema string) string {
	return "DO $tenure$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace WHERE nspname = " +
		QuoteLiteral(schema) + ") THEN CREATE SCHEMA " + pgx.Identifier{schema}.Sanitize() + "; END IF; END $tenure$"
}

func (s Set) createTable() string {
	return "CREATE TABLE IF NOT EXISTS " + s.Table + ` (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)`
}

// Run applies the set in a transaction of its own begun on db (a pool or
// a connection). Its errors are [Set.Errors]'s: a ctx already done is
// refused before anything is sent.
func (s Set) Run(ctx context.Context, db interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}) error {
	if err := ctx.Err(); err != nil {
		return s.Errors.NotAttempted("migrate", err)
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return s.Errors.Error("migrate", err)
	}
	defer func() {
		_ = tx.Rollback(context.WithoutCancel(ctx)) // After Commit this is a no-op; after a failure the failure is the error to report.
	}()
	if err := s.Apply(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return s.Errors.Error("migrate", err)
	}
	return nil
}

// Apply runs the set's missing migrations in tx, under the schema's
// advisory lock, and records them. The caller begins and commits tx. Its
// errors are [Set.Errors]'s.
func (s Set) Apply(ctx context.Context, tx pgx.Tx) error {
	step := func(op, sql string, args ...any) error {
		if _, err := tx.Exec(ctx, sql, args...); err != nil {
			return s.Errors.Error(op, err)
		}
		return nil
	}
	if err := step("migrate", "SELECT pg_advisory_xact_lock(hashtextextended($1, 0))", lockKey(s.Namespace.Schema)); err != nil {
		return err
	}
	if err := step(fmt.Sprintf("migrate: create schema %q", s.Namespace.Schema), createSchema(s.Namespace.Schema)); err != nil {
		return err
	}
	if err := step("migrate", s.createTable()); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, "SELECT version, name FROM "+s.Table)
	if err != nil {
		return s.Errors.Error("migrate", err)
	}
	applied := map[int]string{}
	var (
		version int
		name    string
	)
	if _, err := pgx.ForEachRow(rows, []any{&version, &name}, func() error {
		applied[version] = name
		return nil
	}); err != nil {
		return s.Errors.Error("migrate", err)
	}
	for _, m := range s.Migrations {
		if recorded, ok := applied[m.Version]; ok {
			if recorded != m.Name {
				// Another build numbered its migrations otherwise:
				// skipping this one would leave the schema without it.
				return fmt.Errorf("%s: migrate: schema %q records migration %03d as %q, but this library's %03d is %q: it was migrated by another build of tenure; migrate a fresh schema (or prefix), or drop this one's objects and migrate again",
					s.Errors.Owner, s.Namespace.Schema, m.Version, recorded, m.Version, m.Name)
			}
			continue
		}
		op := fmt.Sprintf("migrate: apply %s %03d_%s", s.Errors.Owner, m.Version, m.Name)
		if err := step(op, s.Render(m.SQL)); err != nil {
			return err
		}
		if err := step(op, "INSERT INTO "+s.Table+" (version, name) VALUES ($1, $2)", m.Version, m.Name); err != nil {
			return err
		}
	}
	return nil
}

// Script returns the set as one SQL script for a DBA to review and run
// (psql -v ON_ERROR_STOP=1 -f): the same lock, the same objects, every
// version recorded, safe to run again. Its header names the set, the schema
// and the prefix, and the owner's GrantSQL for the run-time role.
func (s Set) Script() string {
	var b strings.Builder
	fmt.Fprintf(&b, "-- %s: schema %s, table prefix %s.\n", s.Title, QuoteLiteral(s.Namespace.Schema), QuoteLiteral(s.Namespace.Prefix))
	fmt.Fprintf(&b, "-- Run as the schema's owner; the run-time role needs only the grants %s.Config.GrantSQL lists.\n", s.Errors.Owner)
	b.WriteString("BEGIN;\n")
	fmt.Fprintf(&b, "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0));\n", QuoteLiteral(lockKey(s.Namespace.Schema)))
	b.WriteString(createSchema(s.Namespace.Schema) + ";\n")
	b.WriteString(s.createTable() + ";\n")
	for _, m := range s.Migrations {
		fmt.Fprintf(&b, "\n-- %s migration %03d_%s\n", s.Errors.Owner, m.Version, m.Name)
		b.WriteString(strings.TrimRight(s.Render(m.SQL), "\n") + "\n")
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, %s) ON CONFLICT (version) DO NOTHING;\n",
			s.Table, m.Version, QuoteLiteral(m.Name))
	}
	b.WriteString("\nCOMMIT;\n")
	return b.String()
}
