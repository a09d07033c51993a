package mysqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/store"
)

//go:embed migrations/*.up.sql
var migrationFS embed.FS

// migrateLockTimeout is how long Migrate waits, in seconds, for another
// migration of the same database and prefix to finish.
const migrateLockTimeout = 60

// migration is one file NNN_name.up.sql, written for the mysql client:
// statements end with the current delimiter, which DELIMITER lines change
// (so that procedure bodies may contain semicolons).
type migration struct {
	version int
	name    string
	text    string // with {{placeholders}}
}

var migrationFile = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.up\.sql$`)

// loadMigrations reads the embedded migrations, numbered 001, 002, …
// without gaps.
func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: embedded migrations are missing: %w", err)
	}
	ms := make([]migration, 0, len(entries))
	for _, e := range entries {
		m := migrationFile.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("mysqlstore: embedded migration %q is not named NNN_name.up.sql", e.Name())
		}
		version, _ := strconv.Atoi(m[1]) // Three digits, as the pattern says.
		if version != len(ms)+1 {
			return nil, fmt.Errorf("mysqlstore: embedded migration %q: expected version %03d", e.Name(), len(ms)+1)
		}
		text, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
		if err != nil {
			return nil, fmt.Errorf("mysqlstore: embedded migration %q: %w", e.Name(), err)
		}
		ms = append(ms, migration{version: version, name: m[2], text: string(text)})
	}
	return ms, nil
}

// statements splits a migration written for the mysql client into the
// statements to send one by one: a statement ends with a line whose end is
// the current delimiter (";" until a DELIMITER line changes it). Lines
// holding only a comment between statements are dropped.
func statements(text string) []string {
	var (
		out   []string
		cur   strings.Builder
		delim = ";"
	)
	for line := range strings.Lines(text) {
		trimmed := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(trimmed, "DELIMITER "); ok && cur.Len() == 0 {
			delim = strings.TrimSpace(rest)
			continue
		}
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "--")) {
			continue
		}
		if strings.HasSuffix(trimmed, delim) {
			cur.WriteString(strings.TrimSuffix(strings.TrimRight(line, "\r\n \t"), delim))
			out = append(out, strings.TrimSpace(cur.String()))
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	if s := strings.TrimSpace(cur.String()); s != "" {
		out = append(out, s)
	}
	return out
}

func (o Objects) createMigrationsTable() string {
	return "CREATE TABLE IF NOT EXISTS " + o.Ident(o.Migrations) + ` (
    version    INT          NOT NULL PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB`
}

// Migrate creates or upgrades the store's tables, token counter and
// procedures to this version of the library. It needs the rights to create
// and alter tables and procedures in the database (CREATE, ALTER, DROP,
// CREATE ROUTINE, ALTER ROUTINE; run it as the database's owner;
// the run-time account needs only what [Config.GrantSQL] grants). It does
// not create the database.
//
// It is idempotent and safe to call from many processes at once: it holds
// a named lock (GET_LOCK) for the database and prefix on one connection
// while it works, waiting up to a minute for another migration to end, and
// records each applied version in the prefix's migrations table. MySQL
// commits every DDL statement by itself, so a migration interrupted half
// way is completed by the next Migrate: every statement of a migration can
// run again without harm. Migrations recorded there that this library does
// not know (a newer library ran) are left alone.
//
// The procedures run with their definer's rights (SQL SECURITY DEFINER):
// the account that runs Migrate becomes their definer and must keep its
// rights on the tables; dropping it breaks every call.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.begin(ctx, "migrate"); err != nil {
		return err
	}
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return interpretError("migrate", err)
	}
	defer func() { _ = conn.Close() }() // Closing returns the connection to the pool; the lock is released below.
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", s.obj.lockName(), migrateLockTimeout).Scan(&got); err != nil {
		return interpretError("migrate: take the migration lock", err)
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("mysqlstore: migrate: another migration of this database and prefix held the lock %s for %ds; wait for it to finish and run Migrate again",
			s.obj.lockName(), migrateLockTimeout)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", s.obj.lockName()) // A lost connection releases it too.
	}()
	return s.applyMigrations(ctx, conn, ms)
}

// applyMigrations runs the missing migrations on conn, which holds the
// migration lock, and records them.
func (s *Store) applyMigrations(ctx context.Context, conn *sql.Conn, ms []migration) error {
	if _, err := conn.ExecContext(ctx, s.obj.createMigrationsTable()); err != nil {
		return interpretError("migrate: create the migrations table", err)
	}
	rows, err := conn.QueryContext(ctx, "SELECT version FROM "+s.obj.Ident(s.obj.Migrations))
	if err != nil {
		return interpretError("migrate", err)
	}
	var applied []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close()
			return interpretError("migrate", err)
		}
		applied = append(applied, v)
	}
	if err := rows.Err(); err != nil {
		return interpretError("migrate", err)
	}
	for _, m := range ms {
		if slices.Contains(applied, m.version) {
			continue
		}
		op := fmt.Sprintf("migrate: apply %03d_%s", m.version, m.name)
		for _, stmt := range statements(s.obj.render(m.text)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return interpretError(op, err)
			}
		}
		if _, err := conn.ExecContext(ctx, "INSERT IGNORE INTO "+s.obj.Ident(s.obj.Migrations)+" (version, name) VALUES (?, ?)",
			m.version, m.name); err != nil {
			return interpretError(op, err)
		}
	}
	return nil
}

// MigrationSQL returns the whole schema for c as one script for the mysql
// client (mysql --database=DB < script), for a DBA to review and run
// instead of [Store.Migrate]: it takes the same named lock, creates what is
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
	var b strings.Builder
	db := "the default database"
	if obj.Database != "" {
		db = "database " + quoteIdent(obj.Database)
	}
	fmt.Fprintf(&b, "-- tenure MySQL/MariaDB schema: %s, table prefix %s.\n", db, quoteIdent(obj.TablePrefix))
	b.WriteString("-- Run it with the mysql client as an account that may create tables and procedures there;\n")
	b.WriteString("-- it becomes the procedures' definer. The run-time account needs only the grants mysqlstore.Config.GrantSQL lists.\n")
	fmt.Fprintf(&b, "SELECT GET_LOCK('%s', %d);\n", obj.lockName(), migrateLockTimeout)
	b.WriteString(obj.createMigrationsTable() + ";\n")
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- mysqlstore migration %03d_%s\n", m.version, m.name)
		b.WriteString(strings.TrimRight(obj.render(m.text), "\n") + "\n")
		fmt.Fprintf(&b, "INSERT IGNORE INTO %s (version, name) VALUES (%d, '%s');\n", obj.Ident(obj.Migrations), m.version, m.name)
	}
	fmt.Fprintf(&b, "\nDO RELEASE_LOCK('%s');\n", obj.lockName())
	return b.String(), nil
}

// account matches the account names [Config.GrantSQL] takes: a user or
// role name, optionally @host.
var account = regexp.MustCompile(`^([A-Za-z0-9_.$-]{1,80})(?:@([A-Za-z0-9_.%:-]{1,255}))?$`)

// GrantSQL returns the GRANT statements that let account use a store
// configured by c at run time, and nothing more: EXECUTE on the store's
// and the fences' procedures. The procedures run with their definer's
// rights, so the account needs no privilege on any table: it can do what
// the lease protocol does and nothing else (it cannot rewrite a token, a
// lease or a fence). account is a user or role name, or user@host; a bare
// user name means user@'%'. Run the statements after the migration, as an
// account allowed to grant.
func (c Config) GrantSQL(acct string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	m := account.FindStringSubmatch(acct)
	if m == nil {
		return "", fmt.Errorf("mysqlstore: %w: account %q is not a user or role name (letters, digits, _ . $ -), optionally @host", store.ErrInvalid, acct)
	}
	who := "'" + m[1] + "'"
	if m[2] != "" {
		who += "@'" + m[2] + "'"
	}
	var b strings.Builder
	for _, p := range []string{
		obj.AcquireProc, obj.RenewProc, obj.ReleaseProc, obj.GetProc, obj.ListProc,
		obj.FenceProc, obj.CheckLeaseProc, obj.CheckLeaseStrictProc,
	} {
		fmt.Fprintf(&b, "GRANT EXECUTE ON PROCEDURE %s TO %s;\n", obj.Ident(p), who)
	}
	return b.String(), nil
}
