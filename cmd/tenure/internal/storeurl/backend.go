package storeurl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/registry"
	"github.com/tenure-dev/tenure/store"
)

// Backend is one kind of store the tenure command speaks to. The value a
// parsed URL carries ([Target.Backend]) is the backend's own type
// ([*Postgres], [*Redis], ...), holding what the URL says; its methods are
// everything the command knows of that store. Every backend is one file of
// this package, chosen by scheme from [backends], the one table of them.
type Backend interface {
	// Name is the store's name for people: PostgreSQL, SQLite, Redis,
	// etcd, Consul, MySQL, NATS, Kubernetes or always-leader.
	Name() string
	// Form is how a URL of the store is written, as messages ask for it:
	// the scheme, the parts and tenure's parameters.
	Form() string
	// Traits are what the tenure command's messages and checks say of the
	// store.
	Traits() Traits
	// Open opens the store t names (t.Backend is the receiver): see
	// storeopen.Open.
	Open(ctx context.Context, t Target, o OpenOptions) (Conn, error)
	// MigrationSQL returns the SQL that creates or upgrades the store's
	// schema, for a DBA; a store without one refuses with an error matching
	// [store.ErrInvalid] that says what `tenure migrate` does instead.
	MigrationSQL(t Target) (string, error)
	// GrantSQL returns what gives role the store's run-time rights, or
	// refuses, saying why, with an error matching [store.ErrInvalid].
	GrantSQL(t Target, role string) (string, error)
	// ReadGrantSQL returns the SQL that grants role read-only access, or
	// refuses as GrantSQL does.
	ReadGrantSQL(t Target, role string) (string, error)
}

// Traits are what a backend's store does that the tenure command's
// messages and checks depend on. The zero value is a store with none of
// them.
type Traits struct {
	// RenewKeepsExpiry reports that a renewal sets the lease's expiry to
	// the store's now plus the TTL asked, so that a renewal for the time a
	// lease has left keeps its expiry where it was (what `tenure release
	// --force` stands a holder down with). etcd and Consul renew by
	// keepalive to the TTL fixed at the grant, NATS and Kubernetes by
	// their own rules.
	RenewKeepsExpiry bool
	// LeaseCheck and Fence name the SQL functions that refuse a released
	// holder's token: LeaseCheck at once, Fence once a greater token is
	// recorded. Empty when the store has none.
	LeaseCheck, Fence string
	// GrantsAlone reports that `tenure migrate --print --grant` prints the
	// grants alone: the store has no schema, only grants.
	GrantsAlone bool
	// Schema says what doctor's schema check found when the store answers
	// a lease read; empty for a store that keeps no schema.
	Schema string
	// TTLFloor says where the store's minimum TTL comes from, for doctor's
	// TTL finding (" (…)"); empty when it says nothing.
	TTLFloor string
	// TTLFloorHint is what `tenure run` adds to its refusal of a TTL below
	// the store's minimum (" (…)"); empty when it adds nothing.
	TTLFloorHint string
	// NoClock is doctor's clock finding for a store that reads no wall
	// clock ([ErrNoWallClock]); empty for the usual one.
	NoClock string
	// NoNotify is doctor's notifications finding for a store that tells
	// no holder of a change to its lease (release --force --now says the
	// holder learns of it at its next renewal); empty for the usual one.
	NoNotify string
	// TokenFloor reports that the store's token sequence can be raised
	// after a failover that lost tokens ([Fleet.RaiseTokenFloor]).
	TokenFloor bool
	// Reason is why every holder leads at once (the always-leader store),
	// for `tenure run` to say; empty for a store that excludes.
	Reason string
}

// OpenOptions tune [Backend.Open].
type OpenOptions struct {
	// Timeout bounds connecting and the first round trip; it is the
	// client's connect timeout too.
	Timeout time.Duration
	// Migrate opens the store for `tenure migrate`: a NATS bucket is
	// created when missing.
	Migrate bool
	// CloseTimeout bounds how long [Conn.Close] waits for connections that
	// may take long to say goodbye (PostgreSQL's).
	CloseTimeout time.Duration
}

// Conn is a store a backend opened, and what the tenure command asks of
// it besides the [store.Store]. Optional extras are separate interfaces
// ([Fleet]), found by type assertion.
type Conn interface {
	// Target is the store's URL, with the secrets read from the files it
	// names added to what its Redact masks.
	Target() Target
	Store() store.Store
	// Close closes the client the store was made with, after the store
	// itself was closed.
	Close() error
	// Migrate creates or upgrades the store's schema and returns a
	// sentence saying what it did (or that the store keeps none).
	Migrate(ctx context.Context) (string, error)
	// WallClock returns a reader of the clock the store's expiry runs on,
	// or [ErrNoWallClock].
	WallClock(ctx context.Context) (*WallClock, error)
	// Role returns the database role the connections use, for doctor's
	// grant advice; "" for a store without SQL roles.
	Role(ctx context.Context) (string, error)
}

// Registrar is a [Backend] whose store has the fleet registry next to it
// (PostgreSQL).
type Registrar interface {
	// RegistryConfig returns the registry's configuration: the store's
	// schema and table prefix.
	RegistryConfig(t Target) (registry.Config, error)
}

// Fleet is a [Conn] whose store has the fleet registry and fences next to
// it (PostgreSQL).
type Fleet interface {
	// Registry returns the fleet registry, using the store's connections.
	Registry() (*registry.Registry, error)
	// RaiseTokenFloor raises the store's token sequence after a failover.
	RaiseTokenFloor(ctx context.Context) (store.Token, error)
	// ResetFence sets the fence of resource to tok, recording reason, and
	// returns the token it replaced.
	ResetFence(ctx context.Context, resource string, tok store.Token, reason string) (store.Token, error)
}

// Durable is a [Conn] whose store checks, as far as a client can see,
// whether it keeps the writes it acknowledged (Redis, NATS), for doctor's
// durability check.
type Durable interface {
	// Durability returns what the check found: one concern per risk, or
	// one that says none was found.
	Durability(ctx context.Context) []Concern
}

// Concern is one finding of a store's own check.
type Concern struct {
	// Warn reports a risk; false for a finding that all is well.
	Warn bool
	// Detail says what was found, Fix what to do; Fix is empty when
	// nothing needs doing.
	Detail, Fix string
}

// Privileged is a [Backend] whose store refuses calls for lack of a
// privilege the role was not granted.
type Privileged interface {
	// PermissionDenied reports whether err is such a refusal.
	PermissionDenied(err error) bool
}

// ErrNoWallClock is returned by [Conn.WallClock] for a store whose expiry
// does not run on a wall clock (etcd and Consul time leases with monotonic
// timers, Kubernetes leases expire by each follower's monotonic clock; the
// always-leader store keeps no time at all).
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

// baseConn is the [Conn] of a store with nothing to close beyond the store
// itself, no wall clock to read and no SQL role. Backends embed it and
// override what their store has; each writes its own Migrate.
type baseConn struct {
	t  Target
	st store.Store
}

func (c baseConn) Target() Target                                { return c.t }
func (c baseConn) Store() store.Store                            { return c.st }
func (c baseConn) Close() error                                  { return nil }
func (c baseConn) WallClock(context.Context) (*WallClock, error) { return nil, ErrNoWallClock }
func (c baseConn) Role(context.Context) (string, error)          { return "", nil }

// noSchema is MigrationSQL's refusal for a store that keeps no schema.
func noSchema(t Target) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: the %s store keeps no schema: there is no SQL to print, and tenure migrate has nothing to do", t.Backend.Name())
}

// noGrant is GrantSQL's refusal for a store without SQL roles.
func noGrant(t Target) (string, error) {
	return "", Errorf(store.ErrInvalid, nil, "storeurl: the %s store has no SQL roles to grant; give the credentials in its URL what its package documentation lists", t.Backend.Name())
}

// keysOnly is what `tenure migrate` says of a store of keys under prefix
// (Redis, etcd, Consul): there is nothing to migrate.
func keysOnly(t Target, prefix string) string {
	return fmt.Sprintf("the %s store %s keeps no schema: nothing to migrate (its keys live under the prefix %q)", t.Backend.Name(), t.Display, prefix)
}

// backends is the one table of the stores the tenure command speaks to:
// each entry's schemes, and the function that parses a URL of them (its
// scheme checked, surrounding space trimmed) into a [Target] whose Backend
// is the store's own value. Adding a store is a file of its own and a line
// here ([Supported] names its form too).
var backends = []struct {
	schemes []string
	parse   func(raw string) (Target, error)
}{
	{[]string{"postgres", "postgresql"}, parsePostgres},
	{[]string{"mysql", "mariadb"}, parseMySQL},
	{[]string{"sqlite"}, parseSQLite},
	{[]string{"redis", "rediss"}, parseRedis},
	{[]string{"etcd"}, parseEtcd},
	{[]string{"consul"}, parseConsul},
	{[]string{"nats"}, parseNats},
	{[]string{"k8s"}, parseKubernetes},
	{[]string{"always"}, parseAlways},
}

// parserOf returns the parse function of scheme (any case), or nil.
func parserOf(scheme string) func(raw string) (Target, error) {
	scheme = strings.ToLower(scheme)
	for _, b := range backends {
		for _, s := range b.schemes {
			if s == scheme {
				return b.parse
			}
		}
	}
	return nil
}

// schemes lists every scheme of [backends], in the table's order.
func schemes() []string {
	var all []string
	for _, b := range backends {
		all = append(all, b.schemes...)
	}
	return all
}

// SchemaPart is the status of one part of a store's schema, named.
type SchemaPart struct {
	What   string
	Status store.SchemaStatus
}

// Versioned is an open store whose schema has versions and functions to
// compare with what this tenure installs (PostgreSQL, MySQL): `tenure
// migrate` reports each part before and after, `migrate --check` reads
// them.
type Versioned interface {
	SchemaStatus(ctx context.Context) ([]SchemaPart, error)
}

// SchemaChecker is a backend whose store keeps a schema that `tenure
// migrate --check` can examine, changing nothing: CheckSchema returns a
// line per part and whether a migration would change any. A backend
// without it keeps no schema.
type SchemaChecker interface {
	CheckSchema(ctx context.Context, t Target, o OpenOptions) (lines []string, behind bool, err error)
}

// checkVersioned opens t's store without migrating it and reads the
// status of each part of its schema.
func checkVersioned(ctx context.Context, b Backend, t Target, o OpenOptions) ([]string, bool, error) {
	o.Migrate = false
	c, err := b.Open(ctx, t, o)
	if err != nil {
		return nil, false, err
	}
	defer func() { _ = c.Close() }() // Nothing was changed; a failed close leaves nothing to do.
	parts, err := c.(Versioned).SchemaStatus(ctx)
	if err != nil {
		return nil, false, err
	}
	var lines []string
	behind := false
	for _, p := range parts {
		lines = append(lines, p.What+": "+p.Status.String())
		behind = behind || p.Status.Behind()
	}
	return lines, behind, nil
}

// migrateVersioned runs migrate between two readings of the schema's
// status and appends, to what migrate says, a line per part with its
// status before and after.
func migrateVersioned(ctx context.Context, c Versioned, migrate func() (string, error)) (string, error) {
	before, err := c.SchemaStatus(ctx)
	if err != nil {
		return "", err
	}
	msg, err := migrate()
	if err != nil {
		return "", err
	}
	after, err := c.SchemaStatus(ctx)
	if err != nil {
		return "", err
	}
	for i, a := range after {
		msg += fmt.Sprintf("\n%s: before: %s; now: %s", a.What, before[i].Status, a.Status)
	}
	return msg, nil
}
