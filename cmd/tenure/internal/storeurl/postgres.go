package storeurl

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/fence/pgfence"
	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// Query parameters of a PostgreSQL URL that are tenure's own (with
// [ParamPrefix]); [Parse] removes them before the URL reaches pgx.
const (
	// ParamSchema sets the schema of the tenure objects ([Postgres.Schema]).
	ParamSchema = "tenure_schema"
	// ParamListen says where a PostgreSQL store listens for notifications
	// ([Postgres.Listen], [Postgres.NoListen]): a postgres:// URL (escaped
	// as a query value) of a direct connection, for a URL that goes
	// through PgBouncer in transaction mode, or "off".
	ParamListen = "tenure_listen"
	// ListenOff is the value of [ParamListen] that turns listening off.
	ListenOff = "off"
)

// postgresForm is how the messages of this package ask for a PostgreSQL URL.
const postgresForm = "postgres://USER@HOST:PORT/DATABASE"

// applicationName is set on the sessions and clients of a store unless
// its URL names one, so they are easy to find (pg_stat_activity, CLIENT
// LIST, ...).
const applicationName = "tenure"

// Postgres is a postgres:// or postgresql:// URL: store/pgstore, with the
// fleet registry next to it.
type Postgres struct {
	// URL is the URL without tenure's parameters, for pgx to parse. It
	// holds the password: print [Target.Display] instead.
	URL string
	// Schema is the schema of the tenure objects, from the tenure_schema
	// parameter; empty for the default.
	Schema string
	// Prefix is the table prefix, from the tenure_prefix parameter; empty
	// for the default.
	Prefix string
	// Listen is the URL of the connection the store listens on, from the
	// tenure_listen parameter; empty for one of the URL's own. It holds
	// its password: print Display instead.
	Listen string
	// NoListen reports tenure_listen=off: the store does not listen.
	NoListen bool
}

// Name is "PostgreSQL".
func (*Postgres) Name() string { return "PostgreSQL" }

// Form is how a PostgreSQL URL is written.
func (*Postgres) Form() string { return postgresForm }

// Traits of PostgreSQL: renewals set the expiry from the server's now,
// tenure_check_lease and tenure_fence refuse a released holder, and its
// token sequence can be raised.
func (*Postgres) Traits() Traits {
	return Traits{RenewKeepsExpiry: true, LeaseCheck: "tenure_check_lease", Fence: "tenure_fence", TokenFloor: true,
		Schema: "the PostgreSQL schema answers a lease read at this library's version"}
}

func parsePostgres(raw string) (Target, error) {
	u, err := url.Parse(raw)
	if err != nil {
		reason := err.Error()
		if ue, ok := errors.AsType[*url.Error](err); ok {
			reason = ue.Err.Error() // url.Error repeats the URL, password included
		}
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: %s", roughRedact(raw), roughRedact(reason))
	}
	if u.Opaque != "" || !strings.HasPrefix(raw[len(u.Scheme)+1:], "//") {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid PostgreSQL URL; write it as %s", roughRedact(raw), postgresForm)
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		// Whatever follows "#" is no part of the connection: a password
		// written after it would neither be used nor be known as one.
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q has a fragment (#…); write it as %s", roughRedact(raw), postgresForm)
	}
	pg := &Postgres{}
	t := Target{Backend: pg}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			t.secrets = append(t.secrets, pw)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %q is not a valid URL: its query has a bad escape or separator", roughRedact(raw))
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
	listen, err := parseListen(q)
	if err != nil {
		return Target{}, err
	}
	t.Display = t.Redact(displayURL(u))
	if listen != nil {
		t.secrets = append(t.secrets, listen.secrets...)
		t.Display = t.Redact(displayURL(withListen(u, listen.Display)))
		inner := listen.Backend.(*Postgres)
		pg.Listen, pg.NoListen = inner.URL, inner.NoListen
	}
	for _, p := range []struct {
		key string
		dst *string
	}{{ParamSchema, &pg.Schema}, {ParamPrefix, &pg.Prefix}, {ParamListen, new(string)}} {
		vs, ok := q[p.key]
		if !ok {
			continue
		}
		if len(vs) != 1 || vs[0] == "" {
			return Target{}, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s must be given once, with a value", t.Display, p.key)
		}
		*p.dst = vs[0]
		q.Del(p.key)
	}
	if pg.Schema != "" || pg.Prefix != "" || listen != nil {
		u.RawQuery = q.Encode()
	}
	pg.URL = withSlashes(u.String(), u.Scheme)
	return t, nil
}

// parseListen reads the tenure_listen parameter of q: nil when there is
// none, a target whose NoListen is set for "off", else the target of the
// PostgreSQL URL it holds.
func parseListen(q url.Values) (*Target, error) {
	vs, ok := q[ParamListen]
	if !ok {
		return nil, nil
	}
	if len(vs) != 1 || vs[0] == "" {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: %s must be given once, with a value: %s, or the URL of a direct connection to the server (escaped as a query value)", ParamListen, ListenOff)
	}
	if vs[0] == ListenOff {
		return &Target{Backend: &Postgres{NoListen: true}, Display: ListenOff}, nil
	}
	if !strings.HasPrefix(vs[0], "postgres://") && !strings.HasPrefix(vs[0], "postgresql://") {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: %s is %q: write %s, or the postgres:// URL of a direct connection to the server, escaped as a query value", ParamListen, roughRedact(vs[0]), ListenOff)
	}
	inner, err := parsePostgres(vs[0])
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "%v (the URL of %s)", err, ParamListen)
	}
	if p := inner.Backend.(*Postgres); p.Schema != "" || p.Prefix != "" || p.Listen != "" || p.NoListen {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: the URL of %s (%s) takes no tenure_ parameters: those of the store URL hold", ParamListen, inner.Display)
	}
	return &inner, nil
}

// withListen returns u with the value of its tenure_listen parameter
// replaced by display, for Display.
func withListen(u *url.URL, display string) *url.URL {
	c := *u
	q := c.Query()
	q.Set(ParamListen, display)
	c.RawQuery = q.Encode()
	return &c
}

// configs returns the configurations of the store and of the fleet
// registry next to it: the same schema and table prefix, which both must
// take.
func (p *Postgres) configs(t Target) (pgstore.Config, registry.Config, error) {
	pg := pgstore.Config{Schema: p.Schema, TablePrefix: p.Prefix}
	fleet := registry.Config{Schema: p.Schema, TablePrefix: p.Prefix}
	if _, err := pg.Objects(); err != nil {
		return pgstore.Config{}, registry.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, ParamSchema, ParamPrefix, err)
	}
	if _, err := fleet.Objects(); err != nil {
		return pgstore.Config{}, registry.Config{}, Errorf(store.ErrInvalid, err, "storeurl: store URL %s: %s or %s: %v", t.Display, ParamSchema, ParamPrefix, err)
	}
	return pg, fleet, nil
}

// RegistryConfig returns the configuration of the fleet registry next to
// the store: the same schema and table prefix.
func (p *Postgres) RegistryConfig(t Target) (registry.Config, error) {
	_, fleet, err := p.configs(t)
	return fleet, err
}

// MigrationSQL is pgstore's schema followed by the fleet registry's.
func (p *Postgres) MigrationSQL(t Target) (string, error) {
	pg, fleet, err := p.configs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.MigrationSQL()
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.MigrationSQL()
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n\n" + registrySQL, nil
}

// GrantSQL is pgstore's run-time grants followed by the fleet registry's.
func (p *Postgres) GrantSQL(t Target, role string) (string, error) {
	pg, fleet, err := p.configs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.GrantSQL(role)
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.GrantSQL(role)
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + registrySQL, nil
}

// ReadGrantSQL grants role read-only access to the store and the fleet
// registry (for tenure status, agents and dashboards): it can list and get
// leases and read the registry, and change nothing.
func (p *Postgres) ReadGrantSQL(t Target, role string) (string, error) {
	pg, fleet, err := p.configs(t)
	if err != nil {
		return "", err
	}
	leases, err := pg.ReadGrantSQL(role)
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	registrySQL, err := fleet.ReadGrantSQL(role)
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %v", err)
	}
	return strings.TrimRight(leases, "\n") + "\n" + registrySQL, nil
}

// PermissionDenied reports PostgreSQL's SQLSTATE 42501.
func (*Postgres) PermissionDenied(err error) bool {
	pe, ok := errors.AsType[*pgconn.PgError](err)
	return ok && pe.Code == "42501"
}

// pingAfterIdle is how long a pooled connection must have been idle
// before it is pinged when lent: longer than any renew interval.
const pingAfterIdle = time.Hour

// Open opens a connection pool named "tenure" in pg_stat_activity (unless
// the URL names one) and asks the server one round trip, which also
// detects a pooler in transaction mode that the URL is not written for.
func (p *Postgres) Open(ctx context.Context, t Target, o OpenOptions) (Conn, error) {
	pg, _, err := p.configs(t)
	if err != nil {
		return nil, err
	}
	pg.NoListen = p.NoListen
	if p.Listen != "" {
		lc, err := pgx.ParseConfig(p.Listen)
		if err != nil {
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s: %s", t.Display, ParamListen, t.Redact(err.Error()))
		}
		if lc.ConnectTimeout == 0 {
			lc.ConnectTimeout = o.Timeout
		}
		if _, ok := lc.RuntimeParams["application_name"]; !ok {
			lc.RuntimeParams["application_name"] = applicationName
		}
		pg.ListenConfig = lc
	}
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = o.Timeout
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
		return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: %s", t.Display, t.Redact(err.Error()))
	}
	st, err := pgstore.New(pool, pg)
	if err != nil {
		pool.Close()
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %s", t.Redact(err.Error()))
	}
	pctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if err := st.CheckPooler(pctx); err != nil {
		pool.Close()
		if pe, ok := errors.AsType[*pgstore.PoolerError](err); ok {
			return nil, poolerError(t, pe)
		}
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && !pgUnavailable(pe.Code) {
			return nil, Errorf(store.ErrInvalid, nil, "storeurl: store URL %s: PostgreSQL refused the connection: %s (SQLSTATE %s); check the URL's user, password, database and parameters", t.Display, t.Redact(pe.Message), pe.Code)
		}
		return nil, Errorf(store.ErrUnavailable, nil, "storeurl: cannot reach PostgreSQL at %s: %s", t.Display, t.Wrap(err))
	}
	return &pgConn{baseConn: baseConn{t: t, st: st}, backend: p, pg: st, pool: pool, closeTimeout: o.CloseTimeout}, nil
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
func poolerError(t Target, pe *pgstore.PoolerError) error {
	var need []string
	if pe.Mode != 0 {
		need = append(need, fmt.Sprintf("add default_query_exec_mode=exec to the URL (pgx's mode %q prepares named statements, which the pooler loses)", pe.Mode))
	}
	if pe.Listen {
		need = append(need, fmt.Sprintf("add %s=URL, the postgres:// URL of a direct connection to the server (through a pooler in session mode, this URL will do) escaped as a query value, for notifications (LISTEN through the pooler hears nothing), or %s=%s to wait for expiries without them",
			ParamListen, ParamListen, ListenOff))
	}
	return Errorf(store.ErrInvalid, pe,
		"storeurl: store URL %s goes through a connection pooler such as PgBouncer (the server's backend pid %d is not the %d the connection was given), which in transaction mode hands the session to another client after each transaction: %s",
		t.Display, pe.ServerPID, pe.ClientPID, strings.Join(need, "; and "))
}

// pgConn is an open PostgreSQL store and its pool.
type pgConn struct {
	baseConn
	backend      *Postgres
	pg           *pgstore.Store
	pool         *pgxpool.Pool
	closeTimeout time.Duration
}

var (
	_ Backend    = (*Postgres)(nil)
	_ Registrar  = (*Postgres)(nil)
	_ Privileged = (*Postgres)(nil)
	_ Conn       = (*pgConn)(nil)
	_ Fleet      = (*pgConn)(nil)
)

// Close waits at most closeTimeout for the connections: pgx gives a
// connection broken by a timeout up to 15 s to say goodbye to a server
// that may be partitioned away, and a command that is about to exit must
// not wait for that. Connections still closing then are abandoned to the
// process's exit, and Close reports it with an error matching
// [store.ErrUnavailable].
func (c *pgConn) Close() error {
	closed := make(chan struct{})
	go func() {
		c.pool.Close()
		close(closed)
	}()
	timer := time.NewTimer(c.closeTimeout)
	defer timer.Stop()
	select {
	case <-closed:
		return nil
	case <-timer.C:
		return Errorf(store.ErrUnavailable, nil, "storeurl: the connections to %s did not close within %s; abandoned", c.t.Display, c.closeTimeout)
	}
}

// Registry returns the fleet registry next to the store, using its
// connections.
func (c *pgConn) Registry() (*registry.Registry, error) {
	cfg, err := c.backend.RegistryConfig(c.t)
	if err != nil {
		return nil, err
	}
	reg, err := registry.New(c.pool, cfg)
	if err != nil {
		return nil, Errorf(store.ErrInvalid, err, "storeurl: %s", c.t.Redact(err.Error()))
	}
	return reg, nil
}

// CheckSchema reads the status of the store's and the fleet registry's
// migrations and functions.
func (b *Postgres) CheckSchema(ctx context.Context, t Target, o OpenOptions) ([]string, bool, error) {
	return checkVersioned(ctx, b, t, o)
}

// SchemaStatus reads the status of the store's and the fleet registry's
// migrations and functions.
func (c *pgConn) SchemaStatus(ctx context.Context) ([]SchemaPart, error) {
	st, err := c.pg.SchemaStatus(ctx)
	if err != nil {
		return nil, c.t.Wrap(err)
	}
	reg, err := c.Registry()
	if err != nil {
		return nil, err
	}
	fleet, err := reg.SchemaStatus(ctx)
	if err != nil {
		return nil, c.t.Wrap(err)
	}
	return []SchemaPart{{"PostgreSQL store " + c.t.Display, st}, {"fleet registry", fleet}}, nil
}

// Migrate needs DDL rights, and makes the fleet registry's tables too; a
// line per part of the schema follows what it made, with its version and
// functions before and after.
func (c *pgConn) Migrate(ctx context.Context) (string, error) {
	return migrateVersioned(ctx, c, func() (string, error) { return c.migrate(ctx) })
}

func (c *pgConn) migrate(ctx context.Context) (string, error) {
	if err := c.pg.Migrate(ctx); err != nil {
		return "", c.t.Wrap(err)
	}
	reg, err := c.Registry()
	if err != nil {
		return "", err
	}
	if err := reg.Migrate(ctx); err != nil {
		return "", c.t.Wrap(err)
	}
	obj := c.pg.Objects()
	cfg, err := c.backend.RegistryConfig(c.t)
	if err != nil {
		return "", err
	}
	fleet, err := cfg.Objects()
	if err != nil {
		return "", Errorf(store.ErrInvalid, err, "storeurl: %s", c.t.Redact(err.Error()))
	}
	return fmt.Sprintf("migrated the PostgreSQL store %s: schema %q, tables %s and %s, fence function %s; fleet registry tables %s, %s and %s",
		c.t.Display, obj.Schema, obj.Leases, obj.Fences, obj.FenceFunc, fleet.Agents, fleet.Owners, fleet.Reassignments), nil
}

// RaiseTokenFloor raises the token sequence ([pgstore.Store.RaiseTokenFloor]).
func (c *pgConn) RaiseTokenFloor(ctx context.Context) (store.Token, error) {
	floor, err := c.pg.RaiseTokenFloor(ctx)
	if err != nil {
		return 0, c.t.Wrap(err)
	}
	return floor, nil
}

// ResetFence resets a fence with [pgfence.Fencer.Reset]: only the
// schema's owner may.
func (c *pgConn) ResetFence(ctx context.Context, resource string, tok store.Token, reason string) (store.Token, error) {
	cfg, _, err := c.backend.configs(c.t)
	if err != nil {
		return 0, err
	}
	f, err := pgfence.New(cfg)
	if err != nil {
		return 0, Errorf(store.ErrInvalid, err, "storeurl: %s", c.t.Redact(err.Error()))
	}
	old, err := f.Reset(ctx, c.pool, resource, tok, reason)
	if err != nil {
		return 0, c.t.Wrap(err)
	}
	return old, nil
}

// WallClock reads clock_timestamp().
func (c *pgConn) WallClock(context.Context) (*WallClock, error) {
	return &WallClock{read: func(ctx context.Context) (time.Time, error) {
		var now time.Time
		err := c.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&now)
		return now, c.t.Wrap(err)
	}, close: func() error { return nil }}, nil
}

// Role reads current_user.
func (c *pgConn) Role(ctx context.Context) (string, error) {
	var role string
	err := c.pool.QueryRow(ctx, "SELECT current_user").Scan(&role)
	return role, c.t.Wrap(err)
}
