package pgkit

import (
	"context"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/storekit"
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
	// Functions are installed after the migrations, each when the schema
	// records it missing, at a lower revision or with other text (see
	// [storekit.Function]), and recorded in FunctionsTable (quoted,
	// schema-qualified). None: the set keeps no such table.
	Functions      []storekit.Function
	FunctionsTable string
	// Squashed names, in order, the migrations 001, 002, … of an older
	// numbering that this set's migrations replace: their tables are what
	// this set's migrations make, so a schema that records all of them is
	// upgraded by forgetting them and applying this set (whose migrations
	// must therefore run over those tables without harm). A schema that
	// records only some of them is refused. Its first name must differ
	// from the first migration's.
	Squashed []string
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
	applied, err := s.applied(ctx, tx)
	if err != nil {
		return s.Errors.Error("migrate", err)
	}
	if n := s.squashed(applied); n > 0 {
		if err := s.checkSquashed(applied, n); err != nil {
			return err
		}
		if err := step("migrate: forget the migrations of the older numbering", "DELETE FROM "+s.Table+" WHERE version <= $1", n); err != nil {
			return err
		}
		applied = map[int]string{}
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
	return s.applyFunctions(ctx, tx, step)
}

// applyFunctions installs and records the functions that are missing,
// older or changed (see [storekit.Function]).
func (s Set) applyFunctions(ctx context.Context, tx pgx.Tx, step func(op, sql string, args ...any) error) error {
	if len(s.Functions) == 0 {
		return nil
	}
	if err := step("migrate", s.createFunctionsTable()); err != nil {
		return err
	}
	recs, err := s.recordedFunctions(ctx, tx)
	if err != nil {
		return s.Errors.Error("migrate", err)
	}
	for _, f := range s.Functions {
		rec, ok := recs[f.Name]
		if why := storekit.FunctionState(f, rec, ok); why == "" || why == "newer" {
			continue
		}
		op := fmt.Sprintf("migrate: install %s function %s (revision %d)", s.Errors.Owner, f.Name, f.Revision)
		if err := step(op, s.Render(f.SQL)); err != nil {
			return err
		}
		if err := step(op, s.recordFunction(), f.Name, f.Revision, f.Hash); err != nil {
			return err
		}
	}
	return nil
}

// queryer runs a query: a pgx.Tx, a connection or a pool.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// applied reads the recorded migrations: version → name.
func (s Set) applied(ctx context.Context, q queryer) (map[int]string, error) {
	rows, err := q.Query(ctx, "SELECT version, name FROM "+s.Table)
	if err != nil {
		return nil, err
	}
	applied := map[int]string{}
	var (
		version int
		name    string
	)
	_, err = pgx.ForEachRow(rows, []any{&version, &name}, func() error {
		applied[version] = name
		return nil
	})
	return applied, err
}

// recordedFunctions reads the recorded functions: name → revision and hash.
func (s Set) recordedFunctions(ctx context.Context, q queryer) (map[string]storekit.Recorded, error) {
	rows, err := q.Query(ctx, "SELECT name, revision, sha256 FROM "+s.FunctionsTable)
	if err != nil {
		return nil, err
	}
	recs := map[string]storekit.Recorded{}
	var (
		name string
		rec  storekit.Recorded
	)
	_, err = pgx.ForEachRow(rows, []any{&name, &rec.Revision, &rec.Hash}, func() error {
		recs[name] = rec
		return nil
	})
	return recs, err
}

// squashed returns the highest version of the older numbering (see
// [Set.Squashed]) that applied records, 0 when it records none of it.
func (s Set) squashed(applied map[int]string) int {
	if len(s.Squashed) == 0 || applied[1] != s.Squashed[0] {
		return 0
	}
	n := 0
	for v := range applied {
		n = max(n, v)
	}
	return n
}

// checkSquashed refuses a schema that records the older numbering up to
// version n but not exactly all of it.
func (s Set) checkSquashed(applied map[int]string, n int) error {
	last := len(s.Squashed)
	complete := n == last
	for i, name := range s.Squashed {
		complete = complete && applied[i+1] == name
	}
	if complete {
		return nil
	}
	return fmt.Errorf("%s: migrate: %s", s.Errors.Owner, s.squashedRefusal())
}

// squashedRefusal says why a schema that records some of the older
// numbering, but not exactly all of it, is refused, and what to do.
func (s Set) squashedRefusal() string {
	last := len(s.Squashed)
	return fmt.Sprintf("schema %s records migrations of the numbering tenure used before v0.1.0 (001_%s to %03d_%s), but not exactly those: this library upgrades only a schema migrated to the last of them; migrate it to %03d_%s first with a tenure built before the migrations were squashed, then with this one, or migrate a fresh schema (or prefix)",
		QuoteLiteral(s.Namespace.Schema), s.Squashed[0], last, s.Squashed[last-1], last, s.Squashed[last-1])
}

// squashedScript is the part of [Set.Script] that forgets the migrations
// of the older numbering when the schema records exactly them, and stops
// the script when it records only some of them, as [Set.Apply] does.
func (s Set) squashedScript(b *strings.Builder) {
	if len(s.Squashed) == 0 {
		return
	}
	pairs := make([]string, len(s.Squashed))
	for i, name := range s.Squashed {
		pairs[i] = fmt.Sprintf("(%d, %s)", i+1, QuoteLiteral(name))
	}
	n := len(s.Squashed)
	fmt.Fprintf(b, `
-- Forget the migrations of the numbering used before v0.1.0: a schema
-- migrated to its last has the tables of this numbering's migrations.
DO $squashed$
BEGIN
    IF EXISTS (SELECT 1 FROM %[1]s WHERE version = 1 AND name = %[2]s) THEN
        IF (SELECT count(*) FROM %[1]s) = %[3]d
           AND (SELECT count(*) FROM %[1]s WHERE (version, name) IN (VALUES %[4]s)) = %[3]d THEN
            DELETE FROM %[1]s WHERE version <= %[3]d;
        ELSE
            RAISE EXCEPTION '%%', %[5]s;
        END IF;
    END IF;
END
$squashed$;
`, s.Table, QuoteLiteral(s.Squashed[0]), n, strings.Join(pairs, ", "),
		QuoteLiteral(s.Errors.Owner+": migrate: "+s.squashedRefusal()))
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
	s.squashedScript(&b)
	for _, m := range s.Migrations {
		fmt.Fprintf(&b, "\n-- %s migration %03d_%s\n", s.Errors.Owner, m.Version, m.Name)
		b.WriteString(strings.TrimRight(s.Render(m.SQL), "\n") + "\n")
		fmt.Fprintf(&b, "INSERT INTO %s (version, name) VALUES (%d, %s) ON CONFLICT (version) DO NOTHING;\n",
			s.Table, m.Version, QuoteLiteral(m.Name))
	}
	s.functionsScript(&b)
	b.WriteString("\nCOMMIT;\n")
	return b.String()
}
