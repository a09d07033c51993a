package storeopen

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/go-sql-driver/mysql"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// mysqlConfigs returns the driver's configuration for the MySQL URL t
// names (its parameters are DSN parameters) and the store's configuration,
// refusing what either refuses.
func mysqlConfigs(t storeurl.Target) (*mysql.Config, mysqlstore.Config, error) {
	st := mysqlstore.Config{Database: t.Database, TablePrefix: t.Prefix}
	if _, err := st.Objects(); err != nil {
		return nil, mysqlstore.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: the database name or %s: %v", t.Display, storeurl.ParamPrefix, err)
	}
	cfg := mysql.NewConfig()
	if t.DriverParams != "" {
		parsed, err := mysql.ParseDSN("/?" + t.DriverParams)
		if err != nil {
			return nil, mysqlstore.Config{}, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
		}
		cfg = parsed
	}
	cfg.User, cfg.Passwd = t.User, t.Password
	cfg.Net = "tcp"
	cfg.Addr = t.Endpoints[0]
	cfg.DBName = t.Database
	// The driver would print every dropped connection on stderr; the
	// store reports what matters as errors.
	cfg.Logger = &mysql.NopLogger{}
	return cfg, st, nil
}

// openMySQL opens the database/sql handle and the store, and asks the
// server one round trip.
func openMySQL(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	cfg, stCfg, err := mysqlConfigs(t)
	if err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = timeout
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	db := sql.OpenDB(conn)
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := db.PingContext(pctx); err != nil {
		_ = db.Close()
		if me, ok := errors.AsType[*mysql.MySQLError](err); ok && !mysqlUnavailable(me.Number) {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: MySQL refused the connection: %s; check the URL's user, password and database", t.Display, t.Redact(me.Error()))
		}
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach MySQL at %s: %s", t.Display, t.Wrap(err))
	}
	st, err := mysqlstore.New(db, stCfg)
	if err != nil {
		_ = db.Close()
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
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

// mysqlMigrationSQL is [MigrationSQL] for MySQL: the store's schema, for
// the mysql client.
func mysqlMigrationSQL(t storeurl.Target) (string, error) {
	_, cfg, err := mysqlConfigs(t)
	if err != nil {
		return "", err
	}
	s, err := cfg.MigrationSQL()
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return s, nil
}

// mysqlGrantSQL is [GrantSQL] for MySQL: EXECUTE on the store's
// procedures, no table privileges.
func mysqlGrantSQL(t storeurl.Target, account string) (string, error) {
	_, cfg, err := mysqlConfigs(t)
	if err != nil {
		return "", err
	}
	s, err := cfg.GrantSQL(account)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
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
