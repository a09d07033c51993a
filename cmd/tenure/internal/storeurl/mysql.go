package storeurl

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// MySQL is the kind of a mysql:// or mariadb:// URL: store/mysqlstore.
const MySQL Kind = "mysql"

const (
	mysqlForm        = "mysql://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?tenure_prefix=PREFIX&PARAM=VALUE…] (or mariadb://)"
	defaultMySQLPort = "3306"
)

// parseMySQL reads mysql://USER:PASSWORD@HOST:PORT/DATABASE?PARAMS. The
// database is required. tenure_prefix sets the table prefix; every other
// parameter goes to go-sql-driver/mysql as a DSN parameter (tls, timeout,
// readTimeout, charset, …, or a session variable to SET).
func parseMySQL(raw string) (Target, error) {
	u, q, err := parseServerURL(raw, mysqlForm)
	if err != nil {
		return Target{}, err
	}
	t := Target{Kind: MySQL}
	cfg := mysql.NewConfig()
	if u.User != nil {
		cfg.User = u.User.Username()
		if pw, ok := u.User.Password(); ok && pw != "" {
			cfg.Passwd = pw
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
	prefix, _, err := takeParam(q, ParamPrefix, t.Display)
	if err != nil {
		return Target{}, err
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" || strings.Contains(db, "/") {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s names no database; write it as %s", t.Display, mysqlForm)
	}
	t.MySQL = mysqlstore.Config{Database: db, TablePrefix: prefix}
	if _, err := t.MySQL.Objects(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: the database name or %s: %v", t.Display, ParamPrefix, err)
	}
	if len(q) > 0 {
		parsed, err := mysql.ParseDSN("/?" + q.Encode())
		if err != nil {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
		}
		parsed.User, parsed.Passwd = cfg.User, cfg.Passwd
		cfg = parsed
	}
	cfg.Net = "tcp"
	host, port := u.Hostname(), u.Port()
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = defaultMySQLPort
	}
	cfg.Addr = net.JoinHostPort(host, port)
	cfg.DBName = db
	t.connString = cfg.FormatDSN()
	return t, nil
}

// openMySQL opens the database/sql handle and the store, and asks the
// server one round trip.
func (t Target) openMySQL(ctx context.Context, timeout time.Duration) (*Opened, error) {
	cfg, err := mysql.ParseDSN(t.connString)
	if err != nil {
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	// The driver would print every dropped connection on stderr; the
	// store reports what matters as errors.
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	db := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach MySQL at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	st, err := mysqlstore.New(db, t.MySQL)
	if err != nil {
		_ = db.Close()
		return nil, newError(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	return &Opened{Target: t, Store: st, closeClient: db.Close, mysql: st}, nil
}

// migrateMySQL runs the MySQL store's migration and says what it made.
func (o *Opened) migrateMySQL(ctx context.Context) (string, error) {
	if err := o.mysql.Migrate(ctx); err != nil {
		return "", o.Target.Wrap(err)
	}
	obj := o.mysql.Objects()
	return fmt.Sprintf("migrated the MySQL store %s: database %q, tables %s, %s and %s, procedures %s… and fence procedure %s",
		o.Target.Display, obj.Database, obj.Leases, obj.Tokens, obj.Fences, obj.AcquireProc, obj.FenceProc), nil
}

// mysqlMigrationSQL is [Target.MigrationSQL] for MySQL: the store's
// schema, for the mysql client.
func (t Target) mysqlMigrationSQL() (string, error) {
	s, err := t.MySQL.MigrationSQL()
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}

// mysqlGrantSQL is [Target.GrantSQL] for MySQL: EXECUTE on the store's
// procedures, no table privileges.
func (t Target) mysqlGrantSQL(account string) (string, error) {
	s, err := t.MySQL.GrantSQL(account)
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}
