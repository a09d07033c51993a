package storeopen

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/redis/go-redis/v9"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/store"
)

// ErrNoWallClock is returned by [Opened.WallClock] for a store whose
// expiry does not run on a wall clock (etcd and Consul time leases with
// monotonic timers, Kubernetes leases expire by each follower's monotonic
// clock; the always-leader store keeps no time at all).
var ErrNoWallClock = errors.New("storeurl: the store's expiry runs on no wall clock")

// WallClock reads a store's wall clock, the clock its expiry runs on, in
// one round trip per reading.
type WallClock struct {
	// Local reports that the store's clock is this host's (SQLite).
	Local bool
	read  func(ctx context.Context) (time.Time, error)
	close func() error
}

// Read returns the store's wall clock now.
func (c *WallClock) Read(ctx context.Context) (time.Time, error) { return c.read(ctx) }

// Close releases the connection the clock reads through.
func (c *WallClock) Close() error { return c.close() }

// WallClock returns a reader of the store's wall clock: PostgreSQL's
// clock_timestamp(), Redis's TIME, MySQL's SYSDATE(6), this host's clock
// for SQLite. For etcd, Consul, Kubernetes and the always-leader store it fails with
// [ErrNoWallClock]. Redis and MySQL get a connection of their own, made
// as the store's is (Redis's TLS files and password_file included), which
// Close closes.
func (o *Opened) WallClock(ctx context.Context) (*WallClock, error) {
	nothing := func() error { return nil }
	switch o.Target.Kind {
	case storeurl.SQLite:
		return &WallClock{Local: true, read: func(context.Context) (time.Time, error) { return time.Now(), nil }, close: nothing}, nil
	case storeurl.Postgres:
		return &WallClock{read: func(ctx context.Context) (time.Time, error) {
			var t time.Time
			err := o.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&t)
			return t, o.Target.Wrap(err)
		}, close: nothing}, nil
	case storeurl.Redis:
		opts, _, err := redisConfigs(o.Target)
		if err != nil {
			return nil, err
		}
		if _, err := applyRedis(o.Target, opts); err != nil {
			return nil, err
		}
		opts.ContextTimeoutEnabled = true
		client := redis.NewClient(opts)
		return &WallClock{read: func(ctx context.Context) (time.Time, error) {
			t, err := client.Time(ctx).Result()
			return t, o.Target.Wrap(err)
		}, close: client.Close}, nil
	case storeurl.MySQL:
		cfg, _, err := mysqlConfigs(o.Target)
		if err != nil {
			return nil, err
		}
		cfg.Loc = time.UTC
		cfg.ParseTime = true
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", o.Target.Display, o.Target.Redact(err.Error()))
		}
		db := sql.OpenDB(conn)
		db.SetMaxOpenConns(1)
		return &WallClock{read: func(ctx context.Context) (time.Time, error) {
			// The session's time zone is set to UTC so that SYSDATE(6)
			// reads as the instant it is.
			var t time.Time
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return t, o.Target.Wrap(err)
			}
			defer func() { _ = tx.Rollback() }() // Read-only.
			if _, err := tx.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
				return t, o.Target.Wrap(err)
			}
			err = tx.QueryRowContext(ctx, "SELECT SYSDATE(6)").Scan(&t)
			return t, o.Target.Wrap(err)
		}, close: db.Close}, nil
	case storeurl.Nats:
		// Message TTLs run on the wall clock of the stream's server.
		return &WallClock{read: func(ctx context.Context) (time.Time, error) {
			t, err := o.nats.ServerTime(ctx)
			return t, o.Target.Wrap(err)
		}, close: nothing}, nil
	}
	return nil, ErrNoWallClock
}

// Role returns the database role the store's connections use (PostgreSQL
// current_user, MySQL CURRENT_USER()), for the grant advice of `tenure
// doctor`; "" for stores without SQL roles.
func (o *Opened) Role(ctx context.Context) (string, error) {
	switch o.Target.Kind {
	case storeurl.Postgres:
		var role string
		err := o.pool.QueryRow(ctx, "SELECT current_user").Scan(&role)
		return role, o.Target.Wrap(err)
	case storeurl.MySQL:
		return o.Target.User, nil
	}
	return "", nil
}

// PermissionDenied reports whether err is a database's refusal for lack of
// a privilege: PostgreSQL's SQLSTATE 42501, MySQL's errors 1142 (table),
// 1370 (routine) and 1044 (database).
func PermissionDenied(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42501"
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1142 || me.Number == 1370 || me.Number == 1044
	}
	return false
}
