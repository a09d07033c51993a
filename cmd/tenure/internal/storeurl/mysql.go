package storeurl

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// MySQL is a mysql:// or mariadb:// URL: store/mysqlstore, on MySQL or
// MariaDB.
type MySQL struct {
	// Endpoints is the server's host:port.
	Endpoints []string
	// User and Password are the URL's user info. Print [Target.Display]
	// instead.
	User, Password string
	// Database is the database, from the URL's path.
	Database string
	// Prefix is the table prefix, from the tenure_prefix parameter; empty
	// for the default.
	Prefix string
	// DriverParams are the URL's other query parameters, encoded, for
	// go-sql-driver/mysql's DSN.
	DriverParams string
}

// Name is "MySQL".
func (*MySQL) Name() string { return "MySQL" }

// Form is how a MySQL URL is written.
func (*MySQL) Form() string { return mysqlForm }

// Traits of MySQL: renewals set the expiry from the server's now.
func (*MySQL) Traits() Traits {
	return Traits{RenewKeepsExpiry: true, Schema: "the MySQL schema answers a lease read at this library's version",
		NoNotify: "MySQL sends no notifications: tenure's clients wake their followers at a release with a user-level lock per lease (mysqlstore's Notifications), which needs a holding and a waiting process to check"}
}

const (
	mysqlForm        = "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?tenure_prefix=PREFIX&PARAM=VALUE…] (or mariadb://)"
	defaultMySQLPort = "3306"
)

// parseMySQL reads mysql://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS. The
// database is required. tenure_prefix sets the table prefix; every other
// parameter is for go-sql-driver/mysql, as a DSN parameter (tls, timeout,
// readTimeout, charset, …, or a session variable to SET).
func parseMySQL(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, mysqlForm)
	if err != nil {
		return Target{}, err
	}
	m := &MySQL{}
	t := Target{Backend: m}
	if u.User != nil {
		m.User = u.User.Username()
		if pw, ok := u.User.Password(); ok && pw != "" {
			m.Password = pw
			t.secrets = append(t.secrets, pw)
		}
	}
	for key, values := range q {
		if isSecretParam(key) {
			for _, v := range values {
				if v != "" {
					t.secrets = append(t.secrets, v)
				}
			}
		}
	}
	t.Display = t.Redact(displayURL(u))
	if m.Prefix, _, err = takeParam(q, ParamPrefix, t.Display); err != nil {
		return Target{}, err
	}
	m.Database = strings.TrimPrefix(u.Path, "/")
	if m.Database == "" || strings.Contains(m.Database, "/") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s names no database; write it as %s", t.Display, mysqlForm)
	}
	m.DriverParams = q.Encode()
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = defaultMySQLPort
	}
	m.Endpoints = []string{net.JoinHostPort(host, port)}
	return t, nil
}

// configs returns the driver's configuration for the MySQL URL t
// names (its parameters are DSN parameters) and the store's configuration,
// refusing what either refuses.
func (m *MySQL) configs(t Target) (*mysql.Config, mysqlstore.Config, error) {
	st := mysqlstore.Config{Database: m.Database, TablePrefix: m.Prefix}
	if _, err := st.Objects(); err != nil {
		return nil, mysqlstore.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: the database name or %s: %v", t.Display, ParamPrefix, err)
	}
	cfg := mysql.NewConfig()
	if m.DriverParams != "" {
		parsed, err := mysql.ParseDSN("/?" + m.DriverParams)
		if err != nil {
			return nil, mysqlstore.Config{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
		}
		cfg = parsed
	}
	cfg.User, cfg.Passwd = m.User, m.Password
	cfg.Net = "tcp"
	cfg.Addr = m.Endpoints[0]
	cfg.DBName = m.Database
	// The driver would print every dropped connection on stderr; the
	// store reports what matters as errors.
	cfg.Logger = &mysql.NopLogger{}
	return cfg, st, nil
}

// Open opens one database/sql handle and the store, and asks the server
// one round trip.
func (m *MySQL) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	timeout := o.Timeout
	cfg, stCfg, err := m.configs(t)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	db := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		if me, ok := errors.AsType[*mysql.MySQLError](err); ok && !mysqlUnavailable(me.Number) {
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: MySQL refused the connection: %s; check the URL's user, password and database", t.Display, t.Redact(me.Error()))
		}
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach MySQL at %s: %s", t.Display, t.Wrap(err))
	}
	st, err := mysqlstore.New(db, stCfg)
	if err != nil {
		_ = db.Close()
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	return &mysqlConn{baseConn: baseConn{t: t, st: st}, backend: m, mysql: st, db: db}, nil
}

// MigrationSQL is the store's schema, for the mysql client.
func (m *MySQL) MigrationSQL(t Target) (string, error) {
	_, cfg, err := m.configs(t)
	if err != nil {
		return "", err
	}
	s, err := cfg.MigrationSQL()
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}

// GrantSQL is EXECUTE on the store's procedures, no table privileges.
func (m *MySQL) GrantSQL(t Target, account string) (string, error) {
	_, cfg, err := m.configs(t)
	if err != nil {
		return "", err
	}
	s, err := cfg.GrantSQL(account)
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}

// mysqlUnavailable reports whether a server's refusal to connect, by its
// error number, may pass on its own: too many connections (1040, 1203),
// the server shutting down (1053), this host blocked after failed
// connects (1129). Any other refusal (access denied, an unknown database)
// is the URL's to fix.
func mysqlUnavailable(number uint16) bool {
	switch number {
	case 1040, 1053, 1129, 1203:
		return true
	}
	return false
}

// ReadGrantSQL refuses: a MySQL role reads leases through the procedures.
func (*MySQL) ReadGrantSQL(Target, string) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: read-only grants exist for PostgreSQL only: on MySQL, tenure status needs the run-time grants that --grant prints")
}

// PermissionDenied reports MySQL's errors 1142 (table), 1370 (routine)
// and 1044 (database).
func (*MySQL) PermissionDenied(err error) bool {
	me, ok := errors.AsType[*mysql.MySQLError](err)
	return ok && (me.Number == 1142 || me.Number == 1370 || me.Number == 1044)
}

// mysqlConn is an open MySQL store and its handle.
type mysqlConn struct {
	baseConn
	backend *MySQL
	mysql   *mysqlstore.Store
	db      *sql.DB
}

func (c *mysqlConn) Close() error { return c.db.Close() }

// CheckSchema reads the status of the store's migrations and procedures.
func (b *MySQL) CheckSchema(ctx context.Context, t Target, o OpenOptions) ([]string, bool, error) {
	return checkVersioned(ctx, b, t, o)
}

// SchemaStatus reads the status of the store's migrations and procedures.
func (c *mysqlConn) SchemaStatus(ctx context.Context) ([]SchemaPart, error) {
	st, err := c.mysql.SchemaStatus(ctx)
	if err != nil {
		return nil, c.t.Wrap(err)
	}
	return []SchemaPart{{"MySQL store " + c.t.Display, st}}, nil
}

// Migrate runs the store's migration and says what it made, then a line
// with the schema's version and procedures before and after.
func (c *mysqlConn) Migrate(ctx context.Context) (string, error) {
	return migrateVersioned(ctx, c, func() (string, error) { return c.migrate(ctx) })
}

func (c *mysqlConn) migrate(ctx context.Context) (string, error) {
	if err := c.mysql.Migrate(ctx); err != nil {
		return "", c.t.Wrap(err)
	}
	obj := c.mysql.Objects()
	return fmt.Sprintf("migrated the MySQL store %s: database %q, tables %s, %s and %s, procedures %s… and fence procedure %s",
		c.t.Display, obj.Database, obj.Leases, obj.Tokens, obj.Fences, obj.AcquireProc, obj.FenceProc), nil
}

// WallClock reads SYSDATE(6) on a connection of its own, which Close
// closes.
func (c *mysqlConn) WallClock(context.Context) (*WallClock, error) {
	cfg, _, err := c.backend.configs(c.t)
	if err != nil {
		return nil, err
	}
	cfg.Loc = time.UTC
	cfg.ParseTime = true
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", c.t.Display, c.t.Redact(err.Error()))
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(1)
	return &WallClock{read: func(ctx context.Context) (time.Time, error) {
		// The session's time zone is set to UTC so that SYSDATE(6)
		// reads as the instant it is.
		var now time.Time
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return now, c.t.Wrap(err)
		}
		defer func() { _ = tx.Rollback() }() // Read-only.
		if _, err := tx.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
			return now, c.t.Wrap(err)
		}
		err = tx.QueryRowContext(ctx, "SELECT SYSDATE(6)").Scan(&now)
		return now, c.t.Wrap(err)
	}, close: db.Close}, nil
}

// Role is the URL's user.
func (c *mysqlConn) Role(context.Context) (string, error) { return c.backend.User, nil }

var (
	_ Backend    = (*MySQL)(nil)
	_ Privileged = (*MySQL)(nil)
)
