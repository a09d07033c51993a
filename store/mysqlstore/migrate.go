package mysqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"

	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	//go:embed migrations/*.up.sql
	migrationFS embed.FS
	//go:embed functions/*.sql
	functionFS embed.FS
)

// squashed names the migrations 001 to 003 of the numbering before
// v0.1.0, which migration 001_tables and the procedures of functions/
// replace (see Migrations in the package documentation).
var squashed = []string{"init", "payload", "line"}

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

func (o Objects) createFunctionsTable() string {
	return "CREATE TABLE IF NOT EXISTS " + o.Ident(o.Functions) + ` (
    name       VARCHAR(64)  NOT NULL PRIMARY KEY,
    revision   INT          NOT NULL,
    sha256     CHAR(64)     NOT NULL,
    applied_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
) ENGINE = InnoDB`
}

func (o Objects) recordFunction() string {
	return "INSERT INTO " + o.Ident(o.Functions) + ` (name, revision, sha256) VALUES (?, ?, ?)
ON DUPLICATE KEY UPDATE revision = VALUES(revision), sha256 = VALUES(sha256), applied_at = CURRENT_TIMESTAMP(6)`
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
// while it works, waiting up to a minute for another migration to end. It
// applies the migrations the prefix's migrations table does not record,
// then installs each procedure the prefix's functions table records
// missing, at a lower revision or with other text (see Migrations in the
// package documentation). MySQL commits every DDL statement by itself, so
// a migration interrupted half way is completed by the next Migrate: every
// statement of a migration can run again without harm. Migrations and
// procedures recorded by a newer library are left alone.
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
	fns, err := storekit.LoadFunctions("mysqlstore", functionFS, "functions")
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
	if err := s.applyMigrations(ctx, conn, ms); err != nil {
		return err
	}
	return s.applyFunctions(ctx, conn, fns)
}

// applied reads the recorded migrations, version → name; none when the
// table does not exist.
func (s *Store) applied(ctx context.Context, q querier) (map[int]string, error) {
	applied := map[int]string{}
	ok, err := s.tableExists(ctx, q, s.obj.Migrations)
	if err != nil || !ok {
		return applied, err
	}
	rows, err := q.QueryContext(ctx, "SELECT version, name FROM "+s.obj.Ident(s.obj.Migrations))
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // The rows' error is rows.Err's.
	for rows.Next() {
		var (
			v    int
			name string
		)
		if err := rows.Scan(&v, &name); err != nil {
			return nil, err
		}
		applied[v] = name
	}
	return applied, rows.Err()
}

// recordedFunctions reads the recorded procedures, name → revision and
// hash; none when the table does not exist.
func (s *Store) recordedFunctions(ctx context.Context, q querier) (map[string]storekit.Recorded, error) {
	recs := map[string]storekit.Recorded{}
	ok, err := s.tableExists(ctx, q, s.obj.Functions)
	if err != nil || !ok {
		return recs, err
	}
	rows, err := q.QueryContext(ctx, "SELECT name, revision, sha256 FROM "+s.obj.Ident(s.obj.Functions))
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // The rows' error is rows.Err's.
	for rows.Next() {
		var (
			name string
			rec  storekit.Recorded
		)
		if err := rows.Scan(&name, &rec.Revision, &rec.Hash); err != nil {
			return nil, err
		}
		recs[name] = rec
	}
	return recs, rows.Err()
}

// querier runs queries: a *sql.DB or a *sql.Conn.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func (s *Store) tableExists(ctx context.Context, q querier, table string) (bool, error) {
	var n int
	err := q.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = "+s.obj.databaseLiteral()+
		" AND table_name = ?", table).Scan(&n)
	return n > 0, err
}

// squashedVersion returns the highest version of the numbering before
// v0.1.0 that applied records, 0 when it records none of it.
func squashedVersion(applied map[int]string) int {
	if applied[1] != squashed[0] {
		return 0
	}
	n := 0
	for v := range applied {
		n = max(n, v)
	}
	return n
}

// applyMigrations runs the missing migrations on conn, which holds the
// migration lock, and records them. A database migrated with all of the
// numbering before v0.1.0 forgets it first; one migrated with only some
// of it is refused.
func (s *Store) applyMigrations(ctx context.Context, conn *sql.Conn, ms []migration) error {
	if _, err := conn.ExecContext(ctx, s.obj.createMigrationsTable()); err != nil {
		return interpretError("migrate: create the migrations table", err)
	}
	applied, err := s.applied(ctx, conn)
	if err != nil {
		return interpretError("migrate", err)
	}
	if n := squashedVersion(applied); n > 0 {
		complete := n == len(squashed)
		for i, name := range squashed {
			complete = complete && applied[i+1] == name
		}
		if !complete {
			return fmt.Errorf("mysqlstore: migrate: table prefix %s records migrations of the numbering tenure used before v0.1.0 (001_%s to %03d_%s), but not exactly those: this library upgrades only a database migrated to the last of them; migrate it to %03d_%s first with a tenure built before the migrations were squashed, then with this one, or use a fresh table prefix",
				quoteIdent(s.obj.TablePrefix), squashed[0], len(squashed), squashed[len(squashed)-1], len(squashed), squashed[len(squashed)-1])
		}
		if _, err := conn.ExecContext(ctx, "DELETE FROM "+s.obj.Ident(s.obj.Migrations)+" WHERE version <= ?", n); err != nil {
			return interpretError("migrate: forget the migrations of the numbering before v0.1.0", err)
		}
		applied = map[int]string{}
	}
	for _, m := range ms {
		if _, ok := applied[m.version]; ok {
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

// applyFunctions installs and records, on conn (which holds the migration
// lock), the procedures that are missing, older or changed. A procedure
// that exists is dropped and created again: the accounts granted EXECUTE
// on it are read first and granted it again after.
func (s *Store) applyFunctions(ctx context.Context, conn *sql.Conn, fns []storekit.Function) error {
	if _, err := conn.ExecContext(ctx, s.obj.createFunctionsTable()); err != nil {
		return interpretError("migrate: create the functions table", err)
	}
	recs, err := s.recordedFunctions(ctx, conn)
	if err != nil {
		return interpretError("migrate", err)
	}
	for _, f := range fns {
		if why := storekit.FunctionState(f, recs[f.Name], hasKey(recs, f.Name)); why == "" || why == "newer" {
			continue
		}
		op := fmt.Sprintf("migrate: install procedure %s (revision %d)", f.Name, f.Revision)
		proc := s.obj.TablePrefix + f.Name
		grantees, err := s.executeGrantees(ctx, conn, proc)
		if err != nil {
			return fmt.Errorf("mysqlstore: %s: %w", op, err)
		}
		for _, stmt := range statements(s.obj.render(f.SQL)) {
			if _, err := conn.ExecContext(ctx, stmt); err != nil {
				return interpretError(op, err)
			}
		}
		for _, who := range grantees {
			if _, err := conn.ExecContext(ctx, "GRANT EXECUTE ON PROCEDURE "+s.obj.Ident(proc)+" TO "+who); err != nil {
				return fmt.Errorf("mysqlstore: %s: %s lost EXECUTE on the procedure when it was created again, and granting it back failed; run the statements of `tenure migrate --print --grant ACCOUNT` (Config.GrantSQL) as an account allowed to grant: %w",
					op, who, err)
			}
		}
		if _, err := conn.ExecContext(ctx, s.obj.recordFunction(), f.Name, f.Revision, f.Hash); err != nil {
			return interpretError(op, err)
		}
	}
	return nil
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// executeGrantees returns the accounts granted EXECUTE on procedure proc,
// quoted for GRANT ('user'@'host', or a role), when it exists; none when it
// does not. DROP PROCEDURE takes their grants away, so they are read
// from mysql.procs_priv first; an account that may not read it cannot
// replace a procedure without losing them, and is refused before anything
// is dropped.
func (s *Store) executeGrantees(ctx context.Context, conn *sql.Conn, proc string) ([]string, error) {
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = "+s.obj.databaseLiteral()+
		" AND routine_name = ? AND routine_type = 'PROCEDURE'", proc).Scan(&n); err != nil {
		return nil, interpretError("read the procedure", err)
	}
	if n == 0 {
		return nil, nil
	}
	// The account that creates a procedure gets EXECUTE on it by itself
	// (automatic_sp_privileges), and may hold no GRANT OPTION to give it
	// to itself.
	rows, err := conn.QueryContext(ctx, "SELECT User, Host FROM mysql.procs_priv WHERE Db = "+s.obj.databaseLiteral()+
		" AND Routine_name = ? AND Routine_type = 'PROCEDURE' AND FIND_IN_SET('Execute', Proc_priv) > 0"+
		" AND CONCAT(User, '@', Host) <> CURRENT_USER()", proc)
	if err != nil {
		return nil, fmt.Errorf("procedure %s exists and must be dropped and created again, which takes away its grants, but the grants cannot be read to give them back (grant the migrating account SELECT on mysql.procs_priv, or migrate, then run the statements of `tenure migrate --print --grant ACCOUNT` again): %w", proc, err)
	}
	defer func() { _ = rows.Close() }() // The rows' error is rows.Err's.
	var out []string
	for rows.Next() {
		var user, host string
		if err := rows.Scan(&user, &host); err != nil {
			return nil, err
		}
		who := quoteIdent(user) // a role when host is empty
		if host != "" {
			who += "@" + quoteIdent(host)
		}
		out = append(out, who)
	}
	return out, rows.Err()
}

// SchemaStatus reports what the database records next to what
// [Store.Migrate] would apply, and changes nothing:
// [store.SchemaStatus.Behind] says whether Migrate has work to do (tenure
// migrate --check), its String is the version line of tenure migrate. It
// takes no lock.
func (s *Store) SchemaStatus(ctx context.Context) (store.SchemaStatus, error) {
	if err := s.begin(ctx, "migration status"); err != nil {
		return store.SchemaStatus{}, err
	}
	ms, err := loadMigrations()
	if err != nil {
		return store.SchemaStatus{}, err
	}
	fns, err := storekit.LoadFunctions("mysqlstore", functionFS, "functions")
	if err != nil {
		return store.SchemaStatus{}, err
	}
	applied, err := s.applied(ctx, s.db)
	if err != nil {
		return store.SchemaStatus{}, interpretError("migration status", err)
	}
	recs, err := s.recordedFunctions(ctx, s.db)
	if err != nil {
		return store.SchemaStatus{}, interpretError("migration status", err)
	}
	st := store.SchemaStatus{Latest: ms[len(ms)-1].version}
	if st.Squashed = squashedVersion(applied); st.Squashed > 0 {
		applied = map[int]string{}
	}
	for _, m := range ms {
		if _, ok := applied[m.version]; ok {
			st.Version = max(st.Version, m.version)
		} else {
			st.Missing = append(st.Missing, fmt.Sprintf("%03d_%s", m.version, m.name))
		}
	}
	for _, f := range fns {
		switch why := storekit.FunctionState(f, recs[f.Name], hasKey(recs, f.Name)); why {
		case "":
			st.Current++
		case "newer":
			st.Newer = append(st.Newer, f.Name)
		default:
			st.Stale = append(st.Stale, f.Name+" ("+why+")")
		}
	}
	return st, nil
}

// MigrationSQL returns the whole schema for c as one script for the mysql
// client (mysql --database=DB < script), for a DBA to review and run
// instead of [Store.Migrate]: it takes the same named lock, creates what is
// missing, records every version and can be run again without harm. Unlike
// Migrate it installs every procedure whatever is recorded, and dropping a
// procedure takes away its grants: apply [Config.GrantSQL]'s statements
// after it.
func (c Config) MigrationSQL() (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	ms, err := loadMigrations()
	if err != nil {
		return "", err
	}
	fns, err := storekit.LoadFunctions("mysqlstore", functionFS, "functions")
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
	pairs := make([]string, len(squashed))
	for i, name := range squashed {
		pairs[i] = fmt.Sprintf("(%d, '%s')", i+1, name)
	}
	fmt.Fprintf(&b, `
-- Forget the migrations of the numbering used before v0.1.0 when all of
-- them are recorded: such a database has the tables of this numbering.
SET @tenure_squashed = (SELECT COUNT(*) FROM %[1]s WHERE (version, name) IN (%[2]s));
SET @tenure_recorded = (SELECT COUNT(*) FROM %[1]s);
DELETE FROM %[1]s WHERE @tenure_squashed = %[3]d AND @tenure_recorded = %[3]d;
`, obj.Ident(obj.Migrations), strings.Join(pairs, ", "), len(squashed))
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- mysqlstore migration %03d_%s\n", m.version, m.name)
		b.WriteString(strings.TrimRight(obj.render(m.text), "\n") + "\n")
		fmt.Fprintf(&b, "INSERT IGNORE INTO %s (version, name) VALUES (%d, '%s');\n", obj.Ident(obj.Migrations), m.version, m.name)
	}
	b.WriteString("\n" + obj.createFunctionsTable() + ";\n")
	for _, f := range fns {
		fmt.Fprintf(&b, "\n-- mysqlstore procedure %s, revision %d (dropping it takes its grants: apply GrantSQL's statements after)\n", f.Name, f.Revision)
		b.WriteString(strings.TrimRight(obj.render(f.SQL), "\n") + "\n")
		fmt.Fprintf(&b, "INSERT INTO %s (name, revision, sha256) VALUES ('%s', %d, '%s')\nON DUPLICATE KEY UPDATE revision = VALUES(revision), sha256 = VALUES(sha256), applied_at = CURRENT_TIMESTAMP(6);\n",
			obj.Ident(obj.Functions), f.Name, f.Revision, f.Hash)
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
