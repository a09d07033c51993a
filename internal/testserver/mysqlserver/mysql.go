package mysqlserver

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure/internal/testserver"
	"github.com/tenure-dev/tenure/internal/testutil"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/storetest"
)

// DefaultMySQLURL is the MySQL or MariaDB server tests use when
// TENURE_TEST_MYSQL_URL is unset.
const DefaultMySQLURL = "mysql://root@127.0.0.1:3306/test"

// MySQLURL returns TENURE_TEST_MYSQL_URL, or [DefaultMySQLURL] when it is
// unset: mysql://USER[:PASSWORD]@HOST:PORT/DATABASE. Tests never drop that
// database and never touch objects they did not create.
func MySQLURL() string {
	if u := os.Getenv("TENURE_TEST_MYSQL_URL"); u != "" {
		return u
	}
	return DefaultMySQLURL
}

// MySQLDriverConfig returns the driver configuration of [MySQLURL]. With
// user non-empty it connects as user, with no password and no default
// database (an account granted only EXECUTE on procedures may not select
// one): name the database in the store's [mysqlstore.Config], as
// [MySQLConfig] does.
func MySQLDriverConfig(tb testing.TB, user string) *mysql.Config {
	tb.Helper()
	cfg, err := ParseMySQLURL(MySQLURL())
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	if user != "" {
		cfg.User, cfg.Passwd, cfg.DBName = user, "", ""
	}
	return cfg
}

// ParseMySQLURL returns the driver configuration of a test server URL,
// mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE.
func ParseMySQLURL(raw string) (*mysql.Config, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return nil, fmt.Errorf("MySQL URL %q is not mysql://USER[:PASSWORD]@HOST:PORT/DATABASE (TENURE_TEST_MYSQL_URL)", raw)
	}
	cfg := mysql.NewConfig()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	cfg.Timeout = 5 * time.Second
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	return cfg, nil
}

// MySQLDB returns a database handle on the test server ([MySQLURL]),
// closed when tb ends, connected as user when that is non-empty (see
// [MySQLDriverConfig]). When the server is unreachable it stops tb through
// [testutil.NeedServer].
func MySQLDB(tb testing.TB, user string) *sql.DB {
	tb.Helper()
	return MySQLOpen(tb, MySQLDriverConfig(tb, user))
}

// MySQLOpen opens cfg, closed when tb ends, and checks that the server
// answers, stopping tb through [testutil.NeedServer] when it does not.
func MySQLOpen(tb testing.TB, cfg *mysql.Config) *sql.DB {
	tb.Helper()
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		tb.Fatalf("testserver: mysql connector: %v", err)
	}
	db := sql.OpenDB(conn)
	tb.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	testutil.NeedServer(tb, "MySQL/MariaDB at "+MySQLURL()+" (TENURE_TEST_MYSQL_URL)", db.PingContext(ctx))
	return db
}

// MySQLConfig returns a mysqlstore configuration with a table prefix unique
// to this call, derived from tb's name, in the URL's database, which it
// names.
func MySQLConfig(tb testing.TB) mysqlstore.Config {
	tb.Helper()
	return mysqlstore.Config{Database: MySQLDriverConfig(tb, "").DBName, TablePrefix: testutil.UniqueName(tb) + "_"}
}

// MySQLWeirdConfig is [MySQLConfig] with a prefix that works only when
// every name is quoted as an identifier: a backtick, quotes, a backslash,
// spaces, upper case, punctuation and comment markers.
func MySQLWeirdConfig(tb testing.TB) mysqlstore.Config {
	tb.Helper()
	return mysqlstore.Config{Database: MySQLDriverConfig(tb, "").DBName, TablePrefix: "W`'\\\" ;-- /*é" + uniqueTail(tb)}
}

// uniqueTail returns the random end of a [testutil.UniqueName]: an
// underscore and ten hex digits.
func uniqueTail(tb testing.TB) string {
	name := testutil.UniqueName(tb)
	return name[len(name)-11:]
}

// MySQLSchema migrates cfg's objects with owner (an account allowed to
// create tables and procedures) and drops them when tb ends.
func MySQLSchema(tb testing.TB, owner *sql.DB, cfg mysqlstore.Config) {
	tb.Helper()
	s, err := mysqlstore.New(owner, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() { MySQLDrop(tb, owner, cfg) })
	if err := s.Migrate(context.Background()); err != nil {
		tb.Fatalf("testserver: migrate: %v", err)
	}
	if err := s.Close(); err != nil {
		tb.Fatalf("testserver: close: %v", err)
	}
}

// MySQLDrop drops the tables and procedures of cfg, those that exist.
func MySQLDrop(tb testing.TB, owner *sql.DB, cfg mysqlstore.Config) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
	defer cancel()
	if err := MySQLDropObjects(ctx, owner, cfg); err != nil {
		tb.Errorf("testserver: %v", err)
	}
}

// MySQLDropObjects drops the tables and procedures of cfg, those that
// exist.
func MySQLDropObjects(ctx context.Context, owner *sql.DB, cfg mysqlstore.Config) error {
	obj, err := cfg.Objects()
	if err != nil {
		return err
	}
	for _, p := range []string{obj.AcquireProc, obj.RenewProc, obj.ReleaseProc, obj.GetProc, obj.ListProc,
		obj.FenceProc, obj.CheckLeaseProc, obj.CheckLeaseStrictProc} {
		if _, err := owner.ExecContext(ctx, "DROP PROCEDURE IF EXISTS "+obj.Ident(p)); err != nil {
			return fmt.Errorf("drop procedure %q: %w", p, err)
		}
	}
	for _, t := range []string{obj.Leases, obj.Fences, obj.Tokens, obj.Migrations, obj.Functions} {
		if _, err := owner.ExecContext(ctx, "DROP TABLE IF EXISTS "+obj.Ident(t)); err != nil {
			return fmt.Errorf("drop table %q: %w", t, err)
		}
	}
	return nil
}

// MySQLAccount creates an account with a name unique to this call, no
// password and no privileges, and drops it when tb ends (after the
// cleanups registered later, such as its handles). Grant it what it needs
// with [MySQLGrant].
func MySQLAccount(tb testing.TB, owner *sql.DB) string {
	tb.Helper()
	name := testutil.UniqueName(tb)
	if len(name) > 32 {
		name = name[len(name)-32:]
		name = "u" + name[1:]
	}
	ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
	defer cancel()
	if _, err := owner.ExecContext(ctx, "CREATE USER '"+name+"'@'%'"); err != nil {
		tb.Fatalf("testserver: create user %q: %v", name, err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testserver.CleanupTimeout)
		defer cancel()
		if _, err := owner.ExecContext(ctx, "DROP USER IF EXISTS '"+name+"'@'%'"); err != nil {
			tb.Errorf("testserver: drop user %q: %v", name, err)
		}
	})
	return name
}

// MySQLGrant runs what [mysqlstore.Config.GrantSQL] prints for account, as
// owner.
func MySQLGrant(tb testing.TB, owner *sql.DB, cfg mysqlstore.Config, account string) {
	tb.Helper()
	grants, err := cfg.GrantSQL(account)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	for stmt := range strings.SplitSeq(strings.TrimSpace(grants), ";\n") {
		if _, err := owner.ExecContext(context.Background(), strings.TrimSuffix(stmt, ";")); err != nil {
			tb.Fatalf("testserver: grant to %q: %v", account, err)
		}
	}
}

// MySQLHarness is a [storetest.Harness] for mysqlstore: every store gets a
// fresh table prefix, migrated by Owner and dropped when its test ends,
// and runs on DB (which may belong to a less privileged account).
type MySQLHarness struct {
	// Owner creates, migrates and drops the objects.
	Owner *sql.DB
	// DB is what the stores use. Nil means Owner.
	DB *sql.DB
	// Account, when set, is granted what the store needs at run time on
	// every new prefix; it should be DB's user.
	Account string
	// Config, when set, names each new store's prefix; it must return a
	// prefix unique to the call. Nil means [MySQLConfig].
	Config func(tb testing.TB) mysqlstore.Config
}

// NewStore implements [storetest.Harness].
func (h MySQLHarness) NewStore(tb testing.TB) store.Store {
	tb.Helper()
	return h.storeOn(tb, h.db())
}

// storeOn is [MySQLHarness.NewStore] on db.
func (h MySQLHarness) storeOn(tb testing.TB, db *sql.DB) store.Store {
	tb.Helper()
	newConfig := h.Config
	if newConfig == nil {
		newConfig = MySQLConfig
	}
	cfg := newConfig(tb)
	MySQLSchema(tb, h.Owner, cfg)
	if h.Account != "" {
		MySQLGrant(tb, h.Owner, cfg, h.Account)
	}
	s, err := mysqlstore.New(db, cfg)
	if err != nil {
		tb.Fatalf("testserver: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("testserver: close: %v", err)
		}
	})
	return s
}

// Capabilities implements [storetest.Harness]: MySQL has no
// notifications and expires exactly, to the microsecond; it keeps a line
// of followers without holding a released lease for the first; its round
// trip is `SELECT 1` on the store's handle.
func (h MySQLHarness) Capabilities() storetest.Capabilities {
	db := h.db()
	return storetest.Capabilities{
		Line:      true,
		NoHandoff: true,
		Faults:    h.Faults(),
		RoundTrip: func(ctx context.Context) error {
			var one int
			if err := db.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
				return fmt.Errorf("testserver: select 1: %w", err)
			}
			return nil
		},
	}
}

func (h MySQLHarness) db() *sql.DB {
	if h.DB == nil {
		return h.Owner
	}
	return h.DB
}
