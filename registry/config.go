package registry

import (
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// Defaults for [Config] and [CacheConfig].
const (
	// DefaultSchema is the schema used when [Config.Schema] is empty. It is
	// the same as pgstore's, so one `tenure migrate` sets up both.
	DefaultSchema = pgkit.DefaultSchema
	// DefaultTablePrefix is the prefix used when [Config.TablePrefix] is
	// empty. It is the same as pgstore's.
	DefaultTablePrefix = pgkit.DefaultTablePrefix
	// DefaultHeartbeatInterval is how often an agent heartbeats when
	// [Config.HeartbeatInterval] is zero.
	DefaultHeartbeatInterval = 10 * time.Second
	// DefaultStaleAfter is how old an agent's last heartbeat may get, by the
	// store's clock, before the agent is stale, when [Config.StaleAfter] is
	// zero.
	DefaultStaleAfter = 30 * time.Second
	// DefaultCacheTTL is how long a [Cache] serves a positive when
	// [CacheConfig.TTL] is zero.
	DefaultCacheTTL = 2 * time.Second
)

// MinHeartbeatInterval is the shortest [Config.HeartbeatInterval] accepted.
const MinHeartbeatInterval = 10 * time.Millisecond

// Name suffixes appended to [Config.TablePrefix]. The longest one bounds the
// prefix's length.
const (
	suffixAgents        = "agents"
	suffixOwners        = "owners"
	suffixOwnersAgent   = "owners_agent_idx"
	suffixReassignments = "reassignments"
	suffixReassignIdx   = "reassignments_idx"
	suffixMigrations    = "registry_migrations"
	longestSuffix       = len(suffixMigrations)
)

// MaxTablePrefixLen is the longest [Config.TablePrefix], in bytes: the
// prefix plus the longest object name it is put in front of
// ("registry_migrations") must fit PostgreSQL's 63-byte identifiers.
const MaxTablePrefixLen = pgkit.MaxIdentLen - longestSuffix

// Config configures a [Registry]. It is passed by value; the zero value
// means the defaults: tables named tenure_* in the schema public, heartbeats
// every 10 s, stale after 30 s.
//
// Names are always quoted when put into SQL, so they keep their case and may
// contain spaces and punctuation; they may not contain control characters
// or '$'.
type Config struct {
	// Schema is the PostgreSQL schema holding the registry's tables.
	// Default (empty): [DefaultSchema]. At most 63 bytes. [Registry.Migrate]
	// creates it when it is missing. It may be the schema of a pgstore
	// configuration: the objects do not collide.
	Schema string

	// TablePrefix is put in front of every object's name: with the default
	// [DefaultTablePrefix] they are tenure_agents, tenure_owners,
	// tenure_reassignments and tenure_registry_migrations. At most
	// [MaxTablePrefixLen] bytes.
	TablePrefix string

	// HeartbeatInterval is how often an agent registered by this registry
	// heartbeats ([Heartbeater]). Default (zero): [DefaultHeartbeatInterval];
	// at least [MinHeartbeatInterval]. Shorter intervals find dead agents
	// sooner at the cost of one UPDATE per agent per interval. It is stored
	// in the agent's row, so readers with another Config still judge that
	// agent by its own interval.
	HeartbeatInterval time.Duration

	// StaleAfter is how old an agent's last heartbeat may get, by the
	// store's clock, before the agent is stale: excluded from placement and
	// reported dead by [Registry.Owner]. Default (zero): [DefaultStaleAfter];
	// at least 2 × HeartbeatInterval, so one late heartbeat never makes a
	// healthy agent stale. Longer means fewer false alarms and slower
	// detection of dead hosts. Like HeartbeatInterval it is stored in the
	// agent's row at registration and every reader uses the row's value.
	StaleAfter time.Duration

	// Logger receives reassignments (Warn), identity conflicts (Warn) and
	// agents that come back after being stale (Warn). Default (nil): the
	// records are dropped; reassignments are stored in the database either
	// way.
	Logger *slog.Logger
}

// Objects names the database objects of one [Config], unquoted.
type Objects struct {
	Schema      string
	TablePrefix string
	// Agents is the table of agents, one row per agent id.
	Agents string
	// Owners is the table of ownerships: resource → agent.
	Owners string
	// Reassignments is the history of [Registry.Reassign] calls.
	Reassignments string
	// Migrations records which registry migrations were applied.
	Migrations string
	// OwnersAgentIndex and ReassignmentsIndex are indexes.
	OwnersAgentIndex   string
	ReassignmentsIndex string
}

// Objects validates c and names its database objects.
func (c Config) Objects() (Objects, error) {
	c, err := c.normalize()
	if err != nil {
		return Objects{}, err
	}
	ns := pgkit.Namespace{Schema: c.Schema, Prefix: c.TablePrefix}
	return Objects{
		Schema:             ns.Schema,
		TablePrefix:        ns.Prefix,
		Agents:             ns.Name(suffixAgents),
		Owners:             ns.Name(suffixOwners),
		Reassignments:      ns.Name(suffixReassignments),
		Migrations:         ns.Name(suffixMigrations),
		OwnersAgentIndex:   ns.Name(suffixOwnersAgent),
		ReassignmentsIndex: ns.Name(suffixReassignIdx),
	}, nil
}

// normalize fills in defaults and validates c.
func (c Config) normalize() (Config, error) {
	ns, err := pgkit.NewNamespace("registry", c.Schema, c.TablePrefix, longestSuffix)
	if err != nil {
		return c, err
	}
	c.Schema, c.TablePrefix = ns.Schema, ns.Prefix
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.StaleAfter == 0 {
		c.StaleAfter = DefaultStaleAfter
	}
	switch {
	case c.HeartbeatInterval < 0:
		return c, fmt.Errorf("registry: %w: HeartbeatInterval (%s) must be positive (zero means %s)",
			store.ErrInvalid, c.HeartbeatInterval, DefaultHeartbeatInterval)
	case c.HeartbeatInterval < MinHeartbeatInterval:
		return c, fmt.Errorf("registry: %w: HeartbeatInterval (%s) must be at least %s",
			store.ErrInvalid, c.HeartbeatInterval, MinHeartbeatInterval)
	case c.StaleAfter < 0:
		return c, fmt.Errorf("registry: %w: StaleAfter (%s) must be positive (zero means %s)",
			store.ErrInvalid, c.StaleAfter, DefaultStaleAfter)
	case c.StaleAfter < 2*c.HeartbeatInterval:
		return c, fmt.Errorf("registry: %w: StaleAfter (%s) must be at least 2 × HeartbeatInterval (%s), or one late heartbeat makes a healthy agent stale",
			store.ErrInvalid, c.StaleAfter, 2*c.HeartbeatInterval)
	}
	return c, nil
}

func (o Objects) namespace() pgkit.Namespace {
	return pgkit.Namespace{Schema: o.Schema, Prefix: o.TablePrefix}
}

// agentColumns is the column list every query that reports an agent selects,
// in the order [scanAgent] reads it. It expects the agents table as "a" and a
// relation "now" with the statement's clock_timestamp() as "t"; every
// column may be NULL (an ownership whose agent row is missing).
const agentColumns = `a.id, a.instance, a.seq, a.address, a.labels::text, a.capacity::text,
       a.heartbeat_interval_us, a.stale_after_us, a.registered_at, a.heartbeat_at,
       a.deregistered, a.last_gap_us, a.conflicts, a.last_conflict_at, a.last_conflict_instance,
       NOT a.deregistered AND a.heartbeat_at + a.stale_after_us * interval '1 microsecond' > now.t AS alive,
       greatest(0, floor(extract(epoch FROM now.t - a.heartbeat_at) * 1000000))::bigint AS age_us`

// function is one of the registry's functions (migration 002): the only
// way the run-time role reaches the tables.
type function struct {
	// suffix follows the table prefix in the function's name; the
	// placeholder of the name in the SQL is suffix + "_fn".
	suffix string
	// args is the argument list that identifies the function in GRANT.
	args string
	// read marks the functions of the read-only role.
	read bool
}

// functions lists the registry's functions, in the order they are granted.
var functions = []function{
	{suffix: "agent_register", args: "text, text, text, text, text, text, bigint, bigint"},
	{suffix: "agent_heartbeat", args: "text, text, bigint, text, text[]"},
	{suffix: "agent_conflict", args: "text, text, bigint"},
	{suffix: "agent_deregister", args: "text, text, bigint, text[]"},
	{suffix: "agent_get", args: "text", read: true},
	{suffix: "agent_list", args: "", read: true},
	{suffix: "owner_get", args: "text", read: true},
	{suffix: "owner_place", args: "text, text, text"},
	{suffix: "owner_lock", args: "text"},
	{suffix: "owner_reassign", args: "text, text, text, text, boolean, timestamptz"},
	{suffix: "owner_history", args: "text", read: true},
	{suffix: "owner_remove", args: "text, text, text, boolean, timestamptz"},
}

// executeGrant returns "EXECUTE ON FUNCTION f(args), ..." for the
// functions (the read-only ones when readOnly).
func (o Objects) executeGrant(readOnly bool) string {
	ns := o.namespace()
	var fs []string
	for _, f := range functions {
		if !readOnly || f.read {
			fs = append(fs, ns.Ident(ns.Name(f.suffix))+"("+f.args+")")
		}
	}
	return "EXECUTE ON FUNCTION " + strings.Join(fs, ", ")
}

// renderer returns the function that substitutes the quoted names (and the
// agent column list) into the embedded SQL, once, at construction.
func (o Objects) renderer() func(sql string) string {
	objects := map[string]string{
		"agents":        o.Agents,
		"owners":        o.Owners,
		"reassignments": o.Reassignments,
		"migrations":    o.Migrations,
	}
	for _, f := range functions {
		objects[f.suffix+"_fn"] = o.namespace().Name(f.suffix)
	}
	return o.namespace().Renderer(objects,
		"{{owners_agent_idx}}", pgkit.QuoteIdent(o.OwnersAgentIndex),
		"{{reassignments_idx}}", pgkit.QuoteIdent(o.ReassignmentsIndex),
		"{{agent_columns}}", agentColumns,
	)
}
