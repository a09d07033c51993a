package storeopen

import (
	"context"
	"errors"
	"time"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

// DefaultConnectTimeout bounds opening a server store and its first round
// trip when [Options.ConnectTimeout] is zero, and each later PostgreSQL
// connection attempt unless the URL sets connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// CloseTimeout bounds how long [Opened.Close] waits for PostgreSQL
// connections to close.
const CloseTimeout = 2 * time.Second

// MigrationSQL returns the SQL that creates or upgrades the schema of the
// store t names, for a DBA to review and apply: for PostgreSQL, pgstore's
// schema followed by the fleet registry's; for MySQL, mysqlstore's; for
// SQLite, the schema sqlitestore.Open creates itself. The other stores
// keep no schema: for them it fails with an error matching
// [store.ErrInvalid].
func MigrationSQL(t storeurl.Target) (string, error) { return t.Backend.MigrationSQL(t) }

// GrantSQL returns what gives role what the store t names needs at run
// time: SQL for PostgreSQL (with the fleet registry's grants) and MySQL;
// for Kubernetes, the Role and a RoleBinding of it to the service account
// role, and the admission policy that guards the token, as YAML. The other
// stores refuse it with an error matching [store.ErrInvalid].
func GrantSQL(t storeurl.Target, role string) (string, error) { return t.Backend.GrantSQL(t, role) }

// ReadGrantSQL returns the SQL that grants role read-only access to the
// store t names and the fleet registry (for tenure status, agents and
// dashboards): it can list and get leases and read the registry, and
// change nothing. It exists for PostgreSQL only.
func ReadGrantSQL(t storeurl.Target, role string) (string, error) {
	return t.Backend.ReadGrantSQL(t, role)
}

// RegistryConfig returns the configuration of the fleet registry that
// lives next to the PostgreSQL store t names: the same schema and table
// prefix. The registry exists for PostgreSQL only; for another store
// RegistryConfig fails with an error matching [store.ErrInvalid].
func RegistryConfig(t storeurl.Target) (registry.Config, error) {
	r, ok := t.Backend.(storeurl.Registrar)
	if !ok {
		return registry.Config{}, storeurl.Errorf(store.ErrInvalid, nil,
			"storeurl: the fleet registry (tenure agents, tenure owner) lives in PostgreSQL, not in the %s store %s; pass --store postgres://… or set %s",
			t.Backend.Name(), t.Display, storeurl.EnvVar)
	}
	return r.RegistryConfig(t)
}

// TokenFloorSupported reports, with an error matching [store.ErrInvalid],
// a store whose token floor cannot be raised: every store but PostgreSQL.
func TokenFloorSupported(t storeurl.Target) error {
	if !t.Backend.Traits().TokenFloor {
		return storeurl.Errorf(store.ErrInvalid, nil, "storeurl: --token-floor is for PostgreSQL, whose tokens a failover of asynchronous replication can lose; the %s store %s has no token sequence to raise", t.Backend.Name(), t.Display)
	}
	return nil
}

// Options tunes [Open]. The zero value means the defaults.
type Options struct {
	// ConnectTimeout bounds connecting to a server store and the first
	// round trip that proves it answers. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Migrate opens the store to call [Opened.Migrate] on it: a NATS
	// store's bucket, which [Open] otherwise requires, is created when
	// missing.
	Migrate bool
}

// Opened is an open store and what the tenure command needs besides the
// [store.Store] itself.
type Opened struct {
	// Target is the store's URL, with the secrets read from the files it
	// names added to what its Redact masks.
	Target storeurl.Target
	Store  store.Store

	conn storeurl.Conn
}

// Open opens the store t names. What the URL says is first checked against
// the store's own rules (a prefix it cannot use is refused with an error
// matching [store.ErrInvalid], before anything is connected). A server
// store is then asked one round trip before Open returns, so an
// unreachable server, a refused login or a missing database fails here
// (matching [store.ErrUnavailable]); tables are not checked (calls on an
// unmigrated PostgreSQL schema fail with [store.ErrNotMigrated]). An SQLite
// file is created and migrated when needed.
func Open(ctx context.Context, t storeurl.Target, opts Options) (*Opened, error) {
	if t.Backend == nil {
		return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store target has no backend; make it with storeurl.Parse or storeurl.Resolve")
	}
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	c, err := t.Backend.Open(ctx, t, storeurl.OpenOptions{Timeout: timeout, Migrate: opts.Migrate, CloseTimeout: CloseTimeout})
	if err != nil {
		return nil, err
	}
	return &Opened{Target: c.Target(), Store: c.Store(), conn: c}, nil
}

// HasRegistry reports whether the fleet registry lives next to the store
// (PostgreSQL), so that [Opened.Registry] gives it.
func (o *Opened) HasRegistry() bool {
	_, ok := o.conn.(storeurl.Fleet)
	return ok
}

// Registry returns the fleet registry next to an open PostgreSQL store,
// using its connections (see [RegistryConfig]). For another store it
// fails with an error matching [store.ErrInvalid].
func (o *Opened) Registry() (*registry.Registry, error) {
	f, ok := o.conn.(storeurl.Fleet)
	if !ok {
		_, err := RegistryConfig(o.Target)
		return nil, err
	}
	return f.Registry()
}

// Migrate creates or upgrades the store's schema and returns a sentence
// saying what it did; for PostgreSQL and MySQL a line per part of the
// schema follows, with its version and functions before and after. A PostgreSQL store needs DDL rights for it, and gets
// the fleet registry's tables too; a MySQL store gets its tables and
// procedures; a NATS store's bucket was created by Open (with
// [Options.Migrate]); an SQLite store was already migrated by Open; Redis,
// etcd, Consul and Kubernetes keep no schema, and Migrate only says so.
func (o *Opened) Migrate(ctx context.Context) (string, error) { return o.conn.Migrate(ctx) }

// RaiseTokenFloor raises a PostgreSQL store's token sequence after a
// failover (pgstore.Store.RaiseTokenFloor); other stores refuse it with an
// error matching [store.ErrInvalid].
func (o *Opened) RaiseTokenFloor(ctx context.Context) (store.Token, error) {
	if err := TokenFloorSupported(o.Target); err != nil {
		return 0, err
	}
	return o.conn.(storeurl.Fleet).RaiseTokenFloor(ctx)
}

// ResetFence sets the fence of resource in an open PostgreSQL store to
// tok and records the reset with reason (pgfence.Fencer.Reset); it returns
// the token it replaced. Only the schema's owner may: the run-time role is
// refused. For another store it fails with an error matching
// [store.ErrInvalid].
func (o *Opened) ResetFence(ctx context.Context, resource string, tok store.Token, reason string) (store.Token, error) {
	f, ok := o.conn.(storeurl.Fleet)
	if !ok {
		return 0, storeurl.Errorf(store.ErrInvalid, nil,
			"storeurl: fence reset repairs the fences of a PostgreSQL store, not of the %s store %s; pass --store postgres://… or set %s",
			o.Target.Backend.Name(), o.Target.Display, storeurl.EnvVar)
	}
	return f.ResetFence(ctx, resource, tok, reason)
}

// WallClock returns a reader of the store's wall clock: PostgreSQL's
// clock_timestamp(), Redis's TIME, MySQL's SYSDATE(6), the NATS server's
// clock, this host's clock for SQLite. For etcd, Consul, Kubernetes and
// the always-leader store it fails with [storeurl.ErrNoWallClock]. Redis
// and MySQL get a connection of their own, made as the store's is (Redis's
// TLS files and password_file included), which Close closes.
func (o *Opened) WallClock(ctx context.Context) (*storeurl.WallClock, error) {
	return o.conn.WallClock(ctx)
}

// Role returns the database role the store's connections use (PostgreSQL
// current_user, MySQL CURRENT_USER()), for the grant advice of `tenure
// doctor`; "" for stores without SQL roles.
func (o *Opened) Role(ctx context.Context) (string, error) { return o.conn.Role(ctx) }

// Durability returns what the store's own check of its durability found
// (Redis's settings, the replicas of a NATS bucket), and false for a store
// that has no such check.
func (o *Opened) Durability(ctx context.Context) ([]storeurl.Concern, bool) {
	d, ok := o.conn.(storeurl.Durable)
	if !ok {
		return nil, false
	}
	return d.Durability(ctx), true
}

// PermissionDenied reports whether err is the store's refusal for lack of
// a privilege: PostgreSQL's SQLSTATE 42501, MySQL's errors 1142 (table),
// 1370 (routine) and 1044 (database).
func (o *Opened) PermissionDenied(err error) bool {
	p, ok := o.Target.Backend.(storeurl.Privileged)
	return ok && p.PermissionDenied(err)
}

// Close closes the store and the connections it opened. It waits at most
// [CloseTimeout] for PostgreSQL connections: pgx gives a connection broken
// by a timeout up to 15 s to say goodbye to a server that may be
// partitioned away, and a command that is about to exit must not wait for
// that. Connections still closing then are abandoned to the process's exit,
// and Close reports it with an error matching [store.ErrUnavailable].
func (o *Opened) Close() error {
	err := o.Store.Close()
	if err != nil {
		err = o.Target.Wrap(err)
	}
	if cerr := o.conn.Close(); cerr != nil {
		err = errors.Join(err, o.Target.Wrap(cerr))
	}
	return err
}
