package storeurl

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store/alwaysleader"
	"github.com/tenure-dev/tenure/store/consulstore"
	"github.com/tenure-dev/tenure/store/etcdstore"
	"github.com/tenure-dev/tenure/store/k8sstore"
	"github.com/tenure-dev/tenure/store/mysqlstore"
	"github.com/tenure-dev/tenure/store/natsstore"
	"github.com/tenure-dev/tenure/store/pgstore"
	"github.com/tenure-dev/tenure/store/redisstore"
	"github.com/tenure-dev/tenure/store/sqlitestore"
)

// EnvVar names the environment variable that holds the store URL when no
// --store flag gives one.
const EnvVar = "TENURE_STORE"

// Query parameters of a PostgreSQL URL that are tenure's own; [Parse]
// removes them before the URL reaches pgx.
const (
	// ParamSchema sets the schema of the tenure objects (pgstore.Config.Schema).
	ParamSchema = "tenure_schema"
	// ParamPrefix sets the prefix of their names (pgstore.Config.TablePrefix);
	// in a Redis, etcd or Consul URL, the store's key prefix.
	ParamPrefix = "tenure_prefix"
)

// DefaultConnectTimeout bounds opening a PostgreSQL store and its first
// round trip when [Options.ConnectTimeout] is zero, and each later
// connection attempt unless the URL sets connect_timeout.
const DefaultConnectTimeout = 10 * time.Second

// applicationName is set on PostgreSQL sessions unless the URL or PGAPPNAME
// names one, so they are easy to find in pg_stat_activity.
const applicationName = "tenure"

// mask replaces every secret in what this package prints.
const mask = "xxxxx"

// Supported lists the URL forms accepted, for messages.
const Supported = "postgres://…, postgresql://…, mysql://…, mariadb://…, sqlite:PATH, redis://…, rediss://…, etcd://HOST:PORT[,HOST:PORT], consul://HOST:PORT, nats://HOST:PORT[,HOST:PORT], k8s://NAMESPACE or always:REASON"

// Kind is the kind of store a URL names.
type Kind string

// The kinds of store [Parse] knows.
const (
	Postgres Kind = "postgres"
	SQLite   Kind = "sqlite"
	Redis    Kind = "redis"
	Etcd     Kind = "etcd"
	Consul   Kind = "consul"
	// AlwaysLeader is store/alwaysleader: every holder leads, for
	// genuinely idempotent jobs, with a written reason.
	AlwaysLeader Kind = "always"
)

// Name is the kind's name for people: PostgreSQL, SQLite, Redis, etcd or
// Consul.
func (k Kind) Name() string {
	switch k {
	case Postgres:
		return "PostgreSQL"
	case SQLite:
		return "SQLite"
	case Redis:
		return "Redis"
	case Etcd:
		return "etcd"
	case Consul:
		return "Consul"
	case AlwaysLeader:
		return "always-leader"
	case MySQL:
		return "MySQL"
	case Nats:
		return "NATS"
	case Kubernetes:
		return "Kubernetes"
	}
	return string(k)
}

// Target is a parsed store URL: what to open, and how to show it.
type Target struct {
	// Kind says which store the URL names.
	Kind Kind
	// Display is the URL with every password replaced by xxxxx, safe to
	// print and log.
	Display string
	// Default reports that no URL was given and the default SQLite file is
	// used.
	Default bool
	// Path is the SQLite file, as given (Kind SQLite).
	Path string
	// PG names the schema and table prefix of a PostgreSQL store, from the
	// URL's tenure_schema and tenure_prefix parameters (Kind Postgres).
	PG pgstore.Config
	// Redis is the configuration of a Redis store: its key prefix, from the
	// URL's tenure_prefix parameter (Kind Redis).
	Redis redisstore.Config
	// Etcd is the configuration of an etcd store: its key prefix, from the
	// URL's tenure_prefix parameter (Kind Etcd).
	Etcd etcdstore.Config
	// Consul is the configuration of a Consul store, from the URL's
	// tenure_prefix, tenure_session_ttl_min and tenure_lock_delay
	// parameters (Kind Consul).
	Consul consulstore.Config
	// MySQL names the database and table prefix of a MySQL or MariaDB
	// store, from the URL's path and tenure_prefix parameter (Kind MySQL).
	MySQL mysqlstore.Config
	// Nats names the bucket of a NATS JetStream KV store, from the URL's
	// tenure_bucket and tenure_replicas parameters (Kind Nats).
	Nats natsstore.Config
	// K8s is the configuration of a Kubernetes store: its object name
	// prefix, from the URL's tenure_prefix parameter (Kind Kubernetes).
	K8s k8sstore.Config
	// Endpoints are the etcd endpoints or NATS servers, host:port each
	// (Kind Etcd, Nats), or the
	// Consul agent's host:port, none for the Consul client's default:
	// $CONSUL_HTTP_ADDR, else 127.0.0.1:8500 (Kind Consul).
	Endpoints []string
	// Reason is why an always-leader store may run the job anywhere, any
	// number of times at once (Kind AlwaysLeader).
	Reason string

	connString string   // PostgreSQL or Redis URL without tenure's parameters; MySQL DSN
	user       string   // etcd or NATS user name
	password   string   // etcd or NATS password
	secrets    []string // what Redact masks
	sec        security // TLS files and password file (tls.go)
	k8s        k8sTarget
}

// Resolve returns the target of flagValue when it is non-empty, else of
// the TENURE_STORE variable read with getenv, else the default SQLite file.
func Resolve(flagValue string, getenv func(string) string) (Target, error) {
	if flagValue != "" {
		return Parse(flagValue)
	}
	if raw := getenv(EnvVar); raw != "" {
		t, err := Parse(raw)
		if err != nil {
			return Target{}, fmt.Errorf("%w (from %s)", err, EnvVar)
		}
		return t, nil
	}
	path, err := sqlitestore.DefaultPath()
	if err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: no store URL given and no default SQLite file: %v; pass --store or set %s", err, EnvVar)
	}
	return Target{Kind: SQLite, Display: "sqlite:" + path, Default: true, Path: path}, nil
}

// Parse parses a store URL (see the package documentation). It reads no
// file and no environment variable except HOME, for a leading ~/ in an
// SQLite path.
func Parse(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	scheme, rest, ok := strings.Cut(raw, ":")
	if !ok || !schemeSyntax.MatchString(scheme) {
		hint := ""
		if strings.ContainsAny(raw, "/.") && !strings.Contains(raw, "://") {
			hint = fmt.Sprintf(" (for an SQLite file write %q)", "sqlite:"+raw)
		}
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q has no scheme; use %s%s", roughRedact(raw), Supported, hint)
	}
	switch s := strings.ToLower(scheme); s {
	case "postgres", "postgresql":
		return parsePostgres(raw)
	case "sqlite":
		return parseSQLite(raw, rest)
	case "redis", "rediss":
		return parseRedis(raw)
	case "etcd":
		return parseEtcd(raw)
	case "consul":
		return parseConsul(raw)
	case "mysql", "mariadb":
		return parseMySQL(raw)
	case "nats":
		return parseNats(raw)
	case "k8s":
		return parseKubernetes(raw)
	case "always":
		return parseAlways(raw, rest)
	default:
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL scheme %q is not supported; use %s", scheme, Supported)
	}
}

// parseAlways reads always:REASON; the reason may be percent-encoded.
func parseAlways(raw, rest string) (Target, error) {
	reason, err := url.PathUnescape(rest)
	if err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %q: the reason is not valid percent-encoding: %v", raw, err)
	}
	if _, err := alwaysleader.New(reason); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %q: %v; write always:REASON, e.g. always:the%%20report%%20is%%20idempotent", raw, err)
	}
	return Target{Kind: AlwaysLeader, Display: "always:" + reason, Reason: reason}, nil
}

var schemeSyntax = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*$`)

func parseSQLite(raw, rest string) (Target, error) {
	path := rest
	if after, ok := strings.CutPrefix(rest, "//"); ok {
		if !strings.HasPrefix(after, "/") {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q names a host; an SQLite store is a local file: use sqlite:PATH or sqlite:///ABSOLUTE/PATH", raw)
		}
		path = after
	}
	if path == "" {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q has no file path; use sqlite:PATH, e.g. sqlite:/var/lib/myjob/tenure.db", raw)
	}
	if after, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %q starts with ~/ but the home directory is unknown: %v; use an absolute path", raw, err)
		}
		path = filepath.Join(home, after)
	}
	return Target{Kind: SQLite, Display: "sqlite:" + path, Path: path}, nil
}

func parsePostgres(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		reason := err.Error()
		if ue, ok := errors.AsType[*url.Error](err); ok {
			reason = ue.Err.Error() // url.Error repeats the URL, password included
		}
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: %s", roughRedact(raw), roughRedact(reason))
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid PostgreSQL URL; write it as postgres://USER@HOST:PORT/DATABASE", roughRedact(raw))
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		// Whatever follows "#" is no part of the connection: a password
		// written after it would neither be used nor be known as one.
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q has a fragment (#…); write it as postgres://USER@HOST:PORT/DATABASE", roughRedact(raw))
	}
	t := Target{Kind: Postgres}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.secrets = append(t.secrets, pw)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: its query has a bad escape or separator", roughRedact(raw))
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
	for _, p := range []struct {
		key string
		dst *string
	}{{ParamSchema, &t.PG.Schema}, {ParamPrefix, &t.PG.TablePrefix}} {
		vs, ok := q[p.key]
		if !ok {
			continue
		}
		if len(vs) != 1 || vs[0] == "" {
			return Target{}, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s must be given once, with a value", t.Display, p.key)
		}
		*p.dst = vs[0]
		q.Del(p.key)
	}
	if _, err := t.PG.Objects(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, ParamSchema, ParamPrefix, err)
	}
	if _, err := t.registryConfig().Objects(); err != nil {
		return Target{}, newError(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, ParamSchema, ParamPrefix, err)
	}
	if t.PG.Schema != "" || t.PG.TablePrefix != "" {
		u.RawQuery = q.Encode()
	}
	t.connString = withSlashes(u.String(), u.Scheme)
	return t, nil
}

// withSlashes puts back the "//" that url.URL.String drops when a URL has
// neither host nor path ("postgres://?sslmode=disable"): without it pgx
// would not read the string as a URL.
func withSlashes(s, scheme string) string {
	if rest, ok := strings.CutPrefix(s, scheme+":"); ok && !strings.HasPrefix(rest, "//") {
		return scheme + "://" + rest
	}
	return s
}

// isSecretParam reports whether a query parameter's value is to be kept
// secret: password and sslpassword, and any key that ends as they do (a
// mistyped URL such as postgres://?/db?password=… makes "/db?password" a
// key, and its value is still the user's password).
func isSecretParam(key string) bool {
	return strings.HasSuffix(strings.ToLower(key), "password")
}

// displayURL renders u with every password replaced by the mask.
func displayURL(u *url.URL) string {
	c := *u
	if c.User != nil {
		if _, ok := c.User.Password(); ok {
			c.User = url.UserPassword(c.User.Username(), mask)
		}
	}
	q := c.Query()
	masked := false
	for key := range q {
		if isSecretParam(key) {
			q[key] = []string{mask}
			masked = true
		}
	}
	if masked {
		c.RawQuery = q.Encode()
	}
	return withSlashes(c.String(), c.Scheme)
}

// roughRedact masks what looks like a password in a string that is not a
// valid URL: everything between the scheme and the last '@', and every
// password parameter.
func roughRedact(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		if at := strings.LastIndex(s, "@"); at > i {
			s = s[:i+3] + mask + s[at:]
		}
	}
	return secretParam.ReplaceAllString(s, "${1}="+mask)
}

var secretParam = regexp.MustCompile(`(?i)((?:ssl)?password)=[^&\s]*`)

// Redact returns s with every secret of t masked. Every message this
// package returns has been through it; use it on messages of errors that
// come from the store's client library.
func (t Target) Redact(s string) string {
	for _, secret := range t.secrets {
		for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret)} {
			s = strings.ReplaceAll(s, form, mask)
		}
	}
	return s
}

// MigrationSQL returns the SQL that creates or upgrades the store's schema,
// for a DBA to review and apply: for PostgreSQL, pgstore's schema followed
// by the fleet registry's; for SQLite, the schema [sqlitestore.Open] creates
// itself. Redis, etcd and Consul keep no schema: for them it fails with an
// error matching [store.ErrInvalid].
func (t Target) MigrationSQL() (string, error) {
	switch t.Kind {
	case Postgres:
	case MySQL:
		return t.mysqlMigrationSQL()
	case SQLite:
		s, err := sqlitestore.SchemaSQL()
		if err != nil {
			return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
		}
		return s, nil
	case Nats:
		return "", newError(store.ErrInvalid, nil, "storeurl: the NATS store keeps no SQL: there is nothing to print; tenure migrate (without --print) creates its JetStream KV bucket")
	case Kubernetes:
		return "", newError(store.ErrInvalid, nil, "storeurl: the Kubernetes store keeps no schema: its Lease objects need only an existing namespace; tenure migrate --print --grant ACCOUNT prints the Role and RoleBinding a worker's service account needs")
	default:
		return "", newError(store.ErrInvalid, nil, "storeurl: the %s store keeps no schema: there is no SQL to print, and tenure migrate has nothing to do", t.Kind.Name())
	}
	leases, err := t.PG.MigrationSQL()
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	fleet, err := t.registryConfig().MigrationSQL()
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n\n" + fleet, nil
}

// GrantSQL returns the SQL that grants role what the store and the fleet
// registry need at run time. Like [Target.MigrationSQL] it exists for
// PostgreSQL only.
func (t Target) GrantSQL(role string) (string, error) {
	switch t.Kind {
	case Postgres:
	case MySQL:
		return t.mysqlGrantSQL(role)
	case Kubernetes:
		return t.kubernetesGrant(role)
	case SQLite:
		return "", newError(store.ErrInvalid, nil, "storeurl: an SQLite store has no roles to grant; it needs a file and directory this user can write (%s)", t.Path)
	default:
		return "", newError(store.ErrInvalid, nil, "storeurl: the %s store has no SQL roles to grant; give the credentials in its URL what its package documentation lists", t.Kind.Name())
	}
	leases, err := t.PG.GrantSQL(role)
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	fleet, err := t.registryConfig().GrantSQL(role)
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + fleet, nil
}

// RegistryConfig returns the configuration of the fleet registry that
// lives next to a PostgreSQL store: the same schema and table prefix. The
// registry exists for PostgreSQL only; for another store RegistryConfig
// fails with an error matching [store.ErrInvalid].
func (t Target) RegistryConfig() (registry.Config, error) {
	if t.Kind != Postgres {
		return registry.Config{}, newError(store.ErrInvalid, nil,
			"storeurl: the fleet registry (tenure agents, tenure owner) lives in PostgreSQL, not in the %s store %s; pass --store postgres://… or set %s",
			t.Kind.Name(), t.Display, EnvVar)
	}
	return t.registryConfig(), nil
}

func (t Target) registryConfig() registry.Config {
	return registry.Config{Schema: t.PG.Schema, TablePrefix: t.PG.TablePrefix}
}

// Options tunes [Target.Open]. The zero value means the defaults.
type Options struct {
	// ConnectTimeout bounds connecting to a server store and the first
	// round trip that proves it answers. Default DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// Migrate opens the store to call [Opened.Migrate] on it: a NATS
	// store's bucket, which [Target.Open] otherwise requires, is created
	// when missing.
	Migrate bool
}

// Opened is an open store and what the tenure command needs besides the
// [store.Store] itself.
type Opened struct {
	Target Target
	Store  store.Store

	pg     *pgstore.Store
	mysql  *mysqlstore.Store
	nats   *natsstore.Store
	pool   *pgxpool.Pool
	sqlite *sqlitestore.Store
	// closeClient closes the client of a Redis, etcd or Consul store.
	closeClient func() error
	// prefix is the key prefix of a Redis, etcd or Consul store.
	prefix string
}

// Open opens the store t names. A server store is asked one round trip
// before Open returns, so an unreachable server, a refused login or a
// missing database fails here (matching [store.ErrUnavailable]); tables
// are not checked (calls on an unmigrated PostgreSQL schema fail with
// [store.ErrNotMigrated]). An SQLite file is created and migrated when
// needed.
func (t Target) Open(ctx context.Context, opts Options) (*Opened, error) {
	timeout := opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	switch t.Kind {
	case SQLite:
		st, err := sqlitestore.Open(ctx, t.Path, sqlitestore.Config{})
		if err != nil {
			kind := store.ErrUnavailable
			if errors.Is(err, store.ErrInvalid) {
				kind = store.ErrInvalid
			}
			return nil, newError(kind, err, "storeurl: cannot open the SQLite store %s: %v", t.Display, err)
		}
		return &Opened{Target: t, Store: st, sqlite: st}, nil
	case Postgres:
		return t.openPostgres(ctx, timeout)
	case Redis:
		return t.openRedis(ctx, timeout)
	case Etcd:
		return t.openEtcd(ctx, timeout)
	case Consul:
		return t.openConsul(ctx, timeout)
	case MySQL:
		return t.openMySQL(ctx, timeout)
	case Nats:
		return t.openNats(ctx, timeout, opts.Migrate)
	case Kubernetes:
		return t.openKubernetes(ctx, timeout)
	case AlwaysLeader:
		st, err := alwaysleader.New(t.Reason)
		if err != nil {
			return nil, newError(store.ErrInvalid, err, "storeurl: %v", err)
		}
		return &Opened{Target: t, Store: st}, nil
	}
	return nil, newError(store.ErrInvalid, nil, "storeurl: store target has no kind; make it with Parse or Resolve")
}

// pingAfterIdle is how long a pooled PostgreSQL connection must have been
// idle before it is pinged when lent: longer than any renew interval.
const pingAfterIdle = time.Hour

func (t Target) openPostgres(ctx context.Context, timeout time.Duration) (*Opened, error) {
	cfg, err := pgxpool.ParseConfig(t.connString)
	if err != nil {
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
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
		return nil, newError(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, newError(store.ErrUnavailable, nil, "storeurl: cannot reach PostgreSQL at %s: %s", t.Display, t.Redact(oneLine(err.Error())))
	}
	st, err := pgstore.New(pool, t.PG)
	if err != nil {
		pool.Close()
		return nil, newError(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	return &Opened{Target: t, Store: st, pg: st, pool: pool}, nil
}

// Registry returns the fleet registry next to an open PostgreSQL store,
// using its connections (see [Target.RegistryConfig]). For another store it
// fails with an error matching [store.ErrInvalid].
func (o *Opened) Registry() (*registry.Registry, error) {
	cfg, err := o.Target.RegistryConfig()
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(o.pool, cfg)
	if err != nil {
		return nil, newError(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	return reg, nil
}

// Migrate creates or upgrades the store's schema and returns a sentence
// saying what it did. A PostgreSQL store needs DDL rights for it, and gets
// the fleet registry's tables too; an SQLite store was already migrated by
// Open; Redis, etcd and Consul keep no schema, and Migrate only says so.
func (o *Opened) Migrate(ctx context.Context) (string, error) {
	switch {
	case o.sqlite != nil:
		return fmt.Sprintf("the SQLite store %s is at schema version %d (it creates and upgrades its schema itself when opened)",
			o.Target.Display, sqlitestore.SchemaVersion), nil
	case o.Target.Kind == AlwaysLeader:
		return "the always-leader store keeps nothing: nothing to migrate", nil
	case o.mysql != nil:
		return o.migrateMySQL(ctx)
	case o.nats != nil:
		return o.migrateNats(), nil
	case o.Target.Kind == Kubernetes:
		return fmt.Sprintf("the Kubernetes store %s keeps no schema: nothing to migrate (its Lease objects are named %s-…); tenure migrate --print --grant ACCOUNT prints the Role its workers need",
			o.Target.Display, cmp.Or(o.Target.K8s.Prefix, k8sstore.DefaultPrefix)), nil
	case o.pg == nil:
		return fmt.Sprintf("the %s store %s keeps no schema: nothing to migrate (its keys live under the prefix %q)",
			o.Target.Kind.Name(), o.Target.Display, o.prefix), nil
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
	fleet, err := o.Target.registryConfig().Objects()
	if err != nil {
		return "", newError(store.ErrInvalid, err, "storeurl: %s", o.Target.Redact(err.Error()))
	}
	return fmt.Sprintf("migrated the PostgreSQL store %s: schema %q, tables %s and %s, fence function %s; fleet registry tables %s, %s and %s",
		o.Target.Display, obj.Schema, obj.Leases, obj.Fences, obj.FenceFunc, fleet.Agents, fleet.Owners, fleet.Reassignments), nil
}

// TokenFloorSupported reports, with an error matching [store.ErrInvalid],
// a store whose token floor cannot be raised: every store but PostgreSQL.
func (t Target) TokenFloorSupported() error {
	if t.Kind != Postgres {
		return newError(store.ErrInvalid, nil, "storeurl: --token-floor is for PostgreSQL, whose tokens a failover of asynchronous replication can lose; the %s store %s has no token sequence to raise", t.Kind.Name(), t.Display)
	}
	return nil
}

// RaiseTokenFloor raises a PostgreSQL store's token sequence after a
// failover ([pgstore.Store.RaiseTokenFloor]); other stores refuse it with
// an error matching [store.ErrInvalid].
func (o *Opened) RaiseTokenFloor(ctx context.Context) (store.Token, error) {
	if err := o.Target.TokenFloorSupported(); err != nil {
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
		return errors.Join(err, newError(store.ErrUnavailable, nil,
			"storeurl: the connections to %s did not close within %s; abandoned", o.Target.Display, CloseTimeout))
	}
}

// Wrap returns err with its message redacted and on one line, keeping
// what it matches with errors.Is and errors.As. Use it on every error of
// the store before printing it.
func (t Target) Wrap(err error) error {
	if err == nil {
		return nil
	}
	return &redacted{msg: t.Redact(oneLine(err.Error())), err: err}
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// oneLine joins a multi-line message (pgx indents continuation lines).
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// storeError is this package's error: a message already redacted, the
// sentinel it matches, and the cause (whose message may hold a secret and
// is never shown).
type storeError struct {
	msg   string
	kind  error
	cause error
}

func newError(kind, cause error, format string, args ...any) error {
	return &storeError{msg: fmt.Sprintf(format, args...), kind: kind, cause: cause}
}

func (e *storeError) Error() string { return e.msg }

// Is matches the sentinel the error was classified as.
func (e *storeError) Is(target error) bool { return target == e.kind }

func (e *storeError) Unwrap() error { return e.cause }
