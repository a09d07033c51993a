package storeopen

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/cmd/tenure/internal/storeurl"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store/alwaysleader"
	"github.com/tenure-dev/tenure/store/k8sstore"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// DefaultConnectTimeout bounds opening a PostgreSQL store and its first
// round trip when [Options.ConnectTimeout] is zero, and each later
// connection attempt unless the URL sets connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// applicationName is set on PostgreSQL sessions unless the URL or PGAPPNAME
// names one, so they are easy to find in pg_stat_activity.
const applicationName = "tenure"

// postgresConfigs returns the configurations of the PostgreSQL store t
// names and of the fleet registry next to it: the same schema and table
// prefix, which both must take.
func postgresConfigs(t storeurl.Target) (pgstore.Config, registry.Config, error) {
	pg := pgstore.Config{Schema: t.Schema, TablePrefix: t.Prefix}
	fleet := registry.Config{Schema: t.Schema, TablePrefix: t.Prefix}
	if _, err := pg.Objects(); err != nil {
		return pgstore.Config{}, registry.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, storeurl.ParamSchema, storeurl.ParamPrefix, err)
	}
	if _, err := fleet.Objects(); err != nil {
		return pgstore.Config{}, registry.Config{}, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, storeurl.ParamSchema, storeurl.ParamPrefix, err)
	}
	return pg, fleet, nil
}

// MigrationSQL returns the SQL that creates or upgrades the schema of the
// store t names, for a DBA to review and apply: for PostgreSQL, pgstore's
// schema followed by the fleet registry's; for MySQL, mysqlstore's; for
// SQLite, the schema [sqlitestore.Open] creates itself. The other stores
// keep no schema: for them it fails with an error matching
// [store.ErrInvalid].
func MigrationSQL(t storeurl.Target) (string, error) {
	switch t.Kind {
	case storeurl.Postgres:
	case storeurl.MySQL:
		return mysqlMigrationSQL(t)
	case storeurl.SQLite:
		s, err := sqlitestore.SchemaSQL()
		if err != nil {
			return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
		}
		return s, nil
	case storeurl.Nats:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: the NATS store keeps no SQL: there is nothing to print; tenure migrate (without --print) creates its JetStream KV bucket")
	case storeurl.Kubernetes:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: the Kubernetes store keeps no schema: its Lease objects need only an existing namespace; tenure migrate --print --grant ACCOUNT prints the Role and RoleBinding a worker's service account needs, and the admission policy that guards the token")
	default:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: the %s store keeps no schema: there is no SQL to print, and tenure migrate has nothing to do", t.Kind.Name())
	}
	pg, fleet, err := postgresConfigs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.MigrationSQL()
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.MigrationSQL()
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n\n" + registrySQL, nil
}

// GrantSQL returns what gives role what the store t names needs at run
// time: SQL for PostgreSQL (with the fleet registry's grants) and MySQL;
// for Kubernetes, the Role and a RoleBinding of it to the service account
// role, and the admission policy that guards the token, as YAML. The other stores refuse it with an error matching
// [store.ErrInvalid].
func GrantSQL(t storeurl.Target, role string) (string, error) {
	switch t.Kind {
	case storeurl.Postgres:
	case storeurl.MySQL:
		return mysqlGrantSQL(t, role)
	case storeurl.Kubernetes:
		return kubernetesGrant(t, role)
	case storeurl.SQLite:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: an SQLite store has no roles to grant; it needs a file and directory this user can write (%s)", t.Path)
	default:
		return "", storeurl.Errorf(store.ErrInvalid, nil, "storeurl: the %s store has no SQL roles to grant; give the credentials in its URL what its package documentation lists", t.Kind.Name())
	}
	pg, fleet, err := postgresConfigs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.GrantSQL(role)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.GrantSQL(role)
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + registrySQL, nil
}

// RegistryConfig returns the configuration of the fleet registry that
// lives next to the PostgreSQL store t names: the same schema and table
// prefix. The registry exists for PostgreSQL only; for another store
// RegistryConfig fails with an error matching [store.ErrInvalid].
func RegistryConfig(t storeurl.Target) (registry.Config, error) {
	if t.Kind != storeurl.Postgres {
		return registry.Config{}, storeurl.Errorf(store.ErrInvalid, nil,
			"storeurl: the fleet registry (tenure agents, tenure owner) lives in PostgreSQL, not in the %s store %s; pass --store postgres://… or set %s",
			t.Kind.Name(), t.Display, storeurl.EnvVar)
	}
	_, fleet, err := postgresConfigs(t)
	return fleet, err
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

	pg     *pgstore.Store
	mysql  *mysqlstore.Store
	nats   *natsstore.Store
	pool   *pgxpool.Pool
	sqlite *sqlitestore.Store
	// closeClient closes the client of a Redis, etcd, Consul, MySQL or
	// NATS store.
	closeClient func() error
	// prefix is the key prefix of a Redis, etcd or Consul store.
	prefix string
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
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	switch t.Kind {
	case storeurl.SQLite:
		st, err := sqlitestore.Open(ctx, t.Path, sqlitestore.Config{})
		if err != nil {
			kind := store.ErrUnavailable
			if errors.Is(err, store.ErrInvalid) {
				kind = store.ErrInvalid
			}
			return nil, storeurl.Errorf(kind, err, "storeurl: cannot open the SQLite store %s: %v", t.Display, err)
		}
		return &Opened{Target: t, Store: st, sqlite: st}, nil
	case storeurl.Postgres:
		return openPostgres(ctx, t, timeout)
	case storeurl.Redis:
		return openRedis(ctx, t, timeout)
	case storeurl.Etcd:
		return openEtcd(ctx, t, timeout)
	case storeurl.Consul:
		return openConsul(ctx, t, timeout)
	case storeurl.MySQL:
		return openMySQL(ctx, t, timeout)
	case storeurl.Nats:
		return openNats(ctx, t, timeout, opts.Migrate)
	case storeurl.Kubernetes:
		return openKubernetes(ctx, t, timeout)
	case storeurl.AlwaysLeader:
		st, err := alwaysleader.New(t.Reason)
		if err != nil {
			return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: store URL %q: %v; write always:REASON, e.g. always:the%%20report%%20is%%20idempotent", t.Display, err)
		}
		return &Opened{Target: t, Store: st}, nil
	}
	return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store target has no kind; make it with storeurl.Parse or storeurl.Resolve")
}

// pingAfterIdle is how long a pooled PostgreSQL connection must have been
// idle before it is pinged when lent: longer than any renew interval.
const pingAfterIdle = time.Hour

func openPostgres(ctx context.Context, t storeurl.Target, timeout time.Duration) (*Opened, error) {
	pg, _, err := postgresConfigs(t)
	if err != nil {
		return nil, err
	}
	pg.NoListen = t.NoListen
	if t.Listen != "" {
		lc, err := pgx.ParseConfig(t.Listen)
		if err != nil {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s: %s", t.Display, storeurl.ParamListen, t.Redact(err.Error()))
		}
		if lc.ConnectTimeout == 0 {
			lc.ConnectTimeout = timeout
		}
		if _, ok := lc.RuntimeParams["application_name"]; !ok {
			lc.RuntimeParams["application_name"] = applicationName
		}
		pg.ListenConfig = lc
	}
	cfg, err := pgxpool.ParseConfig(t.URL)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = timeout
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = applicationName
	}
	// pgxpool pings a connection idle for a second before lending it,
	// which doubles the round trips of every renewal (they come TTL/3
	// apart). A connection that died while idle fails its renewal instead:
	// the tenure ends and is acquired again, on a fresh connection.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration >= pingAfterIdle }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	st, err := pgstore.New(pool, pg)
	if err != nil {
		pool.Close()
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := st.CheckPooler(pctx); err != nil {
		pool.Close()
		if pe, ok := errors.AsType[*pgstore.PoolerError](err); ok {
			return nil, poolerError(t, pe)
		}
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && !pgUnavailable(pe.Code) {
			return nil, storeurl.Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: PostgreSQL refused the connection: %s (SQLSTATE %s); check the URL's user, password, database and parameters", t.Display, t.Redact(pe.Message), pe.Code)
		}
		return nil, storeurl.Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach PostgreSQL at %s: %s", t.Display, t.Wrap(err))
	}
	return &Opened{Target: t, Store: st, pg: st, pool: pool}, nil
}

// pgUnavailable reports whether a server's refusal to connect, by its
// SQLSTATE, may pass on its own: a connection exception (08), too many
// connections or another lack of resources (53), a server starting or
// shutting down (57). Any other refusal (authentication, an unknown
// database or parameter) is the URL's to fix.
func pgUnavailable(code string) bool {
	class := code[:min(2, len(code))]
	return class == "08" || class == "53" || class == "57"
}

// poolerError says what to add to the URL of a store that goes through a
// connection pooler in transaction mode.
func poolerError(t storeurl.Target, pe *pgstore.PoolerError) error {
	var need []string
	if pe.Mode != 0 {
		need = append(need, fmt.Sprintf("add default_query_exec_mode=exec to the URL (pgx's mode %q prepares named statements, which the pooler loses)", pe.Mode))
	}
	if pe.Listen {
		need = append(need, fmt.Sprintf("add %s=URL, the postgres:// URL of a direct connection to the server (through a pooler in session mode, this URL will do) escaped as a query value, for notifications (LISTEN through the pooler hears nothing), or %s=%s to wait for expiries without them",
			storeurl.ParamListen, storeurl.ParamListen, storeurl.ListenOff))
	}
	return storeurl.Errorf(store.ErrInvalid, pe,
		"storeurl: store URL %s goes through a connection pooler such as PgBouncer (the server's backend pid %d is not the %d the connection was given), which in transaction mode hands the session to another client after each transaction: %s",
		t.Display, pe.ServerPID, pe.ClientPID, strings.Join(need, "; and "))
}

// Registry returns the fleet registry next to an open PostgreSQL store,
// using its connections (see [RegistryConfig]). For another store it
// fails with an error matching [store.ErrInvalid].
func (o *Opened) Registry() (*registry.Registry, error) {
	cfg, err := RegistryConfig(o.Target)
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(o.pool, cfg)
	if err != nil {
		return nil, storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	return reg, nil
}

// Migrate creates or upgrades the store's schema and returns a sentence
// saying what it did; for PostgreSQL and MySQL a line per part of the
// schema follows, with its version and functions before and after. A PostgreSQL store needs DDL rights for it, and gets
// the fleet registry's tables too; a MySQL store gets its tables and
// procedures; a NATS store's bucket was created by Open (with
// [Options.Migrate]); an SQLite store was already migrated by Open; Redis,
// etcd, Consul and Kubernetes keep no schema, and Migrate only says so.
func (o *Opened) Migrate(ctx context.Context) (string, error) {
	switch {
	case o.sqlite != nil:
		return fmt.Sprintf("the SQLite store %s is at schema version %d (it creates and upgrades its schema itself when opened)",
			o.Target.Display, sqlitestore.SchemaVersion), nil
	case o.Target.Kind == storeurl.AlwaysLeader:
		return "the always-leader store keeps nothing: nothing to migrate", nil
	case o.mysql != nil:
		before, err := o.schemaStatus(ctx)
		if err != nil {
			return "", err
		}
		msg, err := o.migrateMySQL(ctx)
		if err != nil {
			return "", err
		}
		after, err := o.schemaStatus(ctx)
		if err != nil {
			return "", err
		}
		return msg + versionLines(before, after), nil
	case o.nats != nil:
		return o.migrateNats(), nil
	case o.Target.Kind == storeurl.Kubernetes:
		return fmt.Sprintf("the Kubernetes store %s keeps no schema: nothing to migrate (its Lease objects are named %s-…); tenure migrate --print --grant ACCOUNT prints the Role its workers need",
			o.Target.Display, cmp.Or(o.Target.Prefix, k8sstore.DefaultPrefix)), nil
	case o.pg == nil:
		return fmt.Sprintf("the %s store %s keeps no schema: nothing to migrate (its keys live under the prefix %q)",
			o.Target.Kind.Name(), o.Target.Display, o.prefix), nil
	}
	before, err := o.schemaStatus(ctx)
	if err != nil {
		return "", err
	}
	if err := o.pg.Migrate(ctx); err != nil {
		return "", o.Target.Wrap(err)
	}
	reg, err := o.Registry()
	if err != nil {
		return "", err
	}
	if err := reg.Migrate(ctx); err != nil {
		return "", o.Target.Wrap(err)
	}
	obj := o.pg.Objects()
	cfg, err := RegistryConfig(o.Target)
	if err != nil {
		return "", err
	}
	fleet, err := cfg.Objects()
	if err != nil {
		return "", storeurl.Errorf(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	after, err := o.schemaStatus(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("migrated the PostgreSQL store %s: schema %q, tables %s and %s, fence function %s; fleet registry tables %s, %s and %s",
		o.Target.Display, obj.Schema, obj.Leases, obj.Fences, obj.FenceFunc, fleet.Agents, fleet.Owners, fleet.Reassignments) + versionLines(before, after), nil
}

// TokenFloorSupported reports, with an error matching [store.ErrInvalid],
// a store whose token floor cannot be raised: every store but PostgreSQL.
func TokenFloorSupported(t storeurl.Target) error {
	if t.Kind != storeurl.Postgres {
		return storeurl.Errorf(store.ErrInvalid, nil, "storeurl: --token-floor is for PostgreSQL, whose tokens a failover of asynchronous replication can lose; the %s store %s has no token sequence to raise", t.Kind.Name(), t.Display)
	}
	return nil
}

// RaiseTokenFloor raises a PostgreSQL store's token sequence after a
// failover ([pgstore.Store.RaiseTokenFloor]); other stores refuse it with
// an error matching [store.ErrInvalid].
func (o *Opened) RaiseTokenFloor(ctx context.Context) (store.Token, error) {
	if err := TokenFloorSupported(o.Target); err != nil {
		return 0, err
	}
	floor, err := o.pg.RaiseTokenFloor(ctx)
	if err != nil {
		return 0, o.Target.Wrap(err)
	}
	return floor, nil
}

// CloseTimeout bounds how long [Opened.Close] waits for PostgreSQL
// connections to close.
const CloseTimeout = 2 * time.Second

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
	if o.closeClient != nil {
		if cerr := o.closeClient(); cerr != nil {
			err = errors.Join(err, o.Target.Wrap(cerr))
		}
	}
	if o.pool == nil {
		return err
	}
	closed := make(chan struct{})
	go func() {
		o.pool.Close()
		close(closed)
	}()
	t := time.NewTimer(CloseTimeout)
	defer t.Stop()
	select {
	case <-closed:
		return err
	case <-t.C:
		return errors.Join(err, storeurl.Errorf(store.ErrUnavailable, nil,
			"storeurl: the connections to %s did not close within %s; abandoned", o.Target.Display, CloseTimeout))
	}
}
