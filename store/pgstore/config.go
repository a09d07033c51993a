package pgstore

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// Defaults for [Config].
const (
	// DefaultSchema is the schema used when [Config.Schema] is empty.
	DefaultSchema = pgkit.DefaultSchema
	// DefaultTablePrefix is the prefix used when [Config.TablePrefix] is
	// empty.
	DefaultTablePrefix = pgkit.DefaultTablePrefix
	// DefaultHistoryRetention is how long the history keeps events when
	// [Config.HistoryRetention] is zero.
	DefaultHistoryRetention = 30 * 24 * time.Hour
	// MinHistoryRetention is the shortest [Config.HistoryRetention].
	MinHistoryRetention = time.Minute
)

// Name suffixes appended to [Config.TablePrefix]. The longest one bounds the
// prefix's length.
const (
	suffixLeases           = "leases"
	suffixFences           = "fences"
	suffixTokenSeq         = "token_seq"
	suffixMigrations       = "migrations"
	suffixFence            = "fence"
	suffixCheckLease       = "check_lease"
	suffixCheckLeaseStrict = "check_lease_strict"
	suffixAcquire          = "acquire"
	suffixAcquireBatch     = "acquire_batch"
	suffixAcquireSlot      = "acquire_slot"
	suffixRenew            = "renew"
	suffixRelease          = "release"
	suffixGet              = "get_lease"
	suffixList             = "list_leases"
	suffixFunctions        = "functions"
	suffixFenceForeign     = "fence_foreign"
	suffixFenceReset       = "fence_reset"
	suffixFenceResets      = "fence_resets"
	suffixHistory          = "history"
	suffixSettings         = "settings"
	suffixHistoryNameAt    = "history_name_at"
	suffixHistoryAt        = "history_at"
	suffixRecordHistory    = "record_history"
	suffixHistoryRead      = "history_read"
	suffixForceRelease     = "force_release"
	suffixWaiters          = "waiters"
	suffixWaitersLine      = "waiters_line"
	suffixWindows          = "windows"
	suffixWindowStart      = "window_start"
	suffixWindowFinish     = "window_finish"
	suffixWindowGet        = "window_get"
	suffixHistoryEvents    = "history_events"
	longestSuffix          = len(suffixCheckLeaseStrict)
)

// MaxTablePrefixLen is the longest [Config.TablePrefix], in bytes: the
// prefix plus the longest object name it is put in front of
// ("check_lease_strict") must fit PostgreSQL's 63-byte identifiers.
const MaxTablePrefixLen = pgkit.MaxIdentLen - longestSuffix

// Config configures a [Store] (and names the objects [pgfence] calls). It is
// passed by value; the zero value means the defaults: tables, sequence and
// functions named tenure_* in the schema public.
//
// Names are always quoted when put into SQL, so they keep their case and may
// contain spaces and punctuation; they may not contain control characters
// or '$'.
//
// [pgfence]: https://pkg.go.dev/github.com/tenure-dev/tenure/fence/pgfence
type Config struct {
	// Schema is the PostgreSQL schema holding the tables, the token sequence
	// and the fence functions. Default (empty): [DefaultSchema]. At most 63
	// bytes. [Store.Migrate] creates it when it is missing (which needs the
	// CREATE privilege on the database); the run-time role only needs USAGE
	// on it.
	Schema string

	// TablePrefix is put in front of every object's name: with the default
	// [DefaultTablePrefix] they are tenure_leases, tenure_fences,
	// tenure_token_seq, tenure_migrations, tenure_fence_resets and the
	// functions tenure_acquire, tenure_renew, tenure_release,
	// tenure_get_lease, tenure_list_leases, tenure_fence,
	// tenure_fence_foreign, tenure_fence_reset, tenure_check_lease and
	// tenure_check_lease_strict, and those of the history: tenure_history,
	// tenure_settings, tenure_history_read, tenure_force_release and
	// tenure_record_history. Several prefixes can live side by side in one
	// schema, each with its own leases, tokens, fences and history. At most
	// [MaxTablePrefixLen] bytes.
	TablePrefix string

	// HistoryRetention is how long the history ([Store.History]) keeps an
	// event, by the server's clock. Zero means [DefaultHistoryRetention]
	// (30 days); less than [MinHistoryRetention] is refused. It lives in
	// the database (<prefix>settings), where the trigger that records
	// events reads it: [Store.Migrate] and [Config.MigrationSQL] write it,
	// so it takes effect when the owner migrates, and a store made with
	// [New] only checks it. Longer keeps more answers to "who held it
	// then" at the price of a bigger table: one row per grant and per
	// release, about 150 bytes with its index entries; renewals add none.
	HistoryRetention time.Duration

	// ListenConfig, when set, is the connection [Store.Listen] makes for
	// itself (with pgx.ConnectConfig; make it with pgx.ParseConfig)
	// instead of taking one out of the pool. Set it when the pool goes
	// through a connection pooler in transaction mode (PgBouncer's
	// pool_mode = transaction), which gives the session to another client
	// after every transaction, so that a LISTEN on a pooled connection
	// hears nothing: point it at the server itself, or at a pooler in
	// session mode. Default (nil): the pool's connection, which
	// [Store.Listen] refuses when it goes through a pooler.
	ListenConfig *pgx.ConnConfig

	// NoListen makes [Store.Listen] refuse at once (with an error matching
	// [store.ErrInvalid]), for a pool that goes through a pooler in
	// transaction mode when no direct connection is to be had: followers
	// then try again at the expiries they are told (the ordered retry),
	// so a lease released early is taken up to a TTL later than with
	// notifications. The store still announces releases and acquisitions
	// for other processes. It excludes ListenConfig.
	NoListen bool
}

// validateListen refuses ListenConfig and NoListen together.
func (c Config) validateListen() error {
	if c.ListenConfig != nil && c.NoListen {
		return fmt.Errorf("pgstore: %w: ListenConfig and NoListen are both set; set ListenConfig to listen on a direct connection, or NoListen not to listen", store.ErrInvalid)
	}
	return nil
}

// historyRetention returns c.HistoryRetention with its default, or an error.
func (c Config) historyRetention() (time.Duration, error) {
	switch {
	case c.HistoryRetention == 0:
		return DefaultHistoryRetention, nil
	case c.HistoryRetention < MinHistoryRetention:
		return 0, fmt.Errorf("pgstore: %w: HistoryRetention (%s) must be at least %s; use 0 for the default of %s",
			store.ErrInvalid, c.HistoryRetention, MinHistoryRetention, DefaultHistoryRetention)
	}
	return c.HistoryRetention, nil
}

// Objects names the database objects of one [Config], unquoted. Quote them
// as identifiers (pgx.Identifier{o.Schema, o.Leases}.Sanitize()) before
// putting them into SQL.
type Objects struct {
	Schema      string
	TablePrefix string
	// Leases is the table of leases, one row per name, never deleted from.
	Leases string
	// Fences is the table of fences: resource → highest token accepted.
	Fences string
	// TokenSeq is the sequence every new tenure's token is drawn from.
	TokenSeq string
	// Migrations records which migrations were applied, Functions which
	// revision of each function is installed (see the package
	// documentation).
	Migrations string
	Functions  string
	// FenceResets records every operator reset of a fence (who, when,
	// why, old and new token).
	FenceResets string
	// History is the table of recorded events ([Store.History]);
	// Settings holds the history's retention.
	History  string
	Settings string
	// Waiters is the line of followers waiting for each lease.
	Waiters string
	// HistoryReadFunc reads the history; ForceReleaseFunc is release
	// recorded as an operator's; RecordHistoryFunc is the trigger
	// function that records events.
	HistoryReadFunc   string
	ForceReleaseFunc  string
	RecordHistoryFunc string
	// AcquireFunc, AcquireBatchFunc, RenewFunc, ReleaseFunc, GetFunc and
	// ListFunc are the functions the store calls: the run-time role's only
	// way to the leases (see the package documentation).
	AcquireFunc      string
	AcquireBatchFunc string
	// AcquireSlotFunc takes the first free slot of a name (see
	// [Store.AcquireSlot]).
	AcquireSlotFunc string
	RenewFunc       string
	ReleaseFunc     string
	GetFunc         string
	ListFunc        string
	// FenceFunc, CheckLeaseFunc and CheckLeaseStrictFunc are the fence
	// functions, FenceForeignFunc the fence for tokens of another store
	// and FenceResetFunc the operator's repair (see the package
	// documentation).
	FenceFunc            string
	CheckLeaseFunc       string
	CheckLeaseStrictFunc string
	FenceForeignFunc     string
	FenceResetFunc       string
	// Windows is the table of windows ([Store.StartWindow]);
	// WindowStartFunc, WindowFinishFunc and WindowGetFunc are the
	// functions that begin, finish and read them.
	Windows          string
	WindowStartFunc  string
	WindowFinishFunc string
	WindowGetFunc    string
	// HistoryEventsFunc reads the history with the windows' events
	// (HistoryReadFunc leaves them out, for older libraries).
	HistoryEventsFunc string
	// Channel is the LISTEN/NOTIFY channel on which releases and takeovers
	// are announced, with the lease name as payload.
	Channel string
}

// Objects validates c and names its database objects.
func (c Config) Objects() (Objects, error) {
	ns, err := c.namespace()
	if err != nil {
		return Objects{}, err
	}
	return Objects{
		Schema:               ns.Schema,
		TablePrefix:          ns.Prefix,
		Leases:               ns.Name(suffixLeases),
		Fences:               ns.Name(suffixFences),
		TokenSeq:             ns.Name(suffixTokenSeq),
		Migrations:           ns.Name(suffixMigrations),
		Functions:            ns.Name(suffixFunctions),
		FenceResets:          ns.Name(suffixFenceResets),
		History:              ns.Name(suffixHistory),
		Settings:             ns.Name(suffixSettings),
		Waiters:              ns.Name(suffixWaiters),
		HistoryReadFunc:      ns.Name(suffixHistoryRead),
		ForceReleaseFunc:     ns.Name(suffixForceRelease),
		RecordHistoryFunc:    ns.Name(suffixRecordHistory),
		AcquireFunc:          ns.Name(suffixAcquire),
		AcquireBatchFunc:     ns.Name(suffixAcquireBatch),
		AcquireSlotFunc:      ns.Name(suffixAcquireSlot),
		RenewFunc:            ns.Name(suffixRenew),
		ReleaseFunc:          ns.Name(suffixRelease),
		GetFunc:              ns.Name(suffixGet),
		ListFunc:             ns.Name(suffixList),
		FenceFunc:            ns.Name(suffixFence),
		CheckLeaseFunc:       ns.Name(suffixCheckLease),
		CheckLeaseStrictFunc: ns.Name(suffixCheckLeaseStrict),
		FenceForeignFunc:     ns.Name(suffixFenceForeign),
		FenceResetFunc:       ns.Name(suffixFenceReset),
		Windows:              ns.Name(suffixWindows),
		WindowStartFunc:      ns.Name(suffixWindowStart),
		WindowFinishFunc:     ns.Name(suffixWindowFinish),
		WindowGetFunc:        ns.Name(suffixWindowGet),
		HistoryEventsFunc:    ns.Name(suffixHistoryEvents),
		Channel:              channelName(ns.Schema, ns.Prefix),
	}, nil
}

// namespace fills in defaults and validates c.
func (c Config) namespace() (pgkit.Namespace, error) {
	return pgkit.NewNamespace("pgstore", c.Schema, c.TablePrefix, longestSuffix)
}

func (o Objects) namespace() pgkit.Namespace {
	return pgkit.Namespace{Schema: o.Schema, Prefix: o.TablePrefix}
}

// channelName derives the notification channel from schema and prefix:
// readable when it fits PostgreSQL's 63 bytes, a hash of both otherwise.
func channelName(schema, prefix string) string {
	name := schema + "." + prefix + suffixLeases
	if len(name) <= pgkit.MaxIdentLen {
		return name
	}
	sum := sha256.Sum256([]byte(schema + "\x00" + prefix))
	return "tenure_" + hex.EncodeToString(sum[:16])
}

// renderer returns the function that substitutes the quoted names into the
// embedded SQL, once, at construction.
func (o Objects) renderer() func(sql string) string {
	return o.namespace().Renderer(map[string]string{
		"leases":                o.Leases,
		"fences":                o.Fences,
		"token_seq":             o.TokenSeq,
		"migrations":            o.Migrations,
		"fence_resets":          o.FenceResets,
		"acquire_fn":            o.AcquireFunc,
		"acquire_batch_fn":      o.AcquireBatchFunc,
		"acquire_slot_fn":       o.AcquireSlotFunc,
		"renew_fn":              o.RenewFunc,
		"release_fn":            o.ReleaseFunc,
		"get_lease_fn":          o.GetFunc,
		"list_leases_fn":        o.ListFunc,
		"fence_fn":              o.FenceFunc,
		"check_lease_fn":        o.CheckLeaseFunc,
		"check_lease_strict_fn": o.CheckLeaseStrictFunc,
		"fence_foreign_fn":      o.FenceForeignFunc,
		"fence_reset_fn":        o.FenceResetFunc,
		"history":               o.History,
		"settings":              o.Settings,
		"history_read_fn":       o.HistoryReadFunc,
		"force_release_fn":      o.ForceReleaseFunc,
		"record_history_fn":     o.RecordHistoryFunc,
		"waiters":               o.Waiters,
		"windows":               o.Windows,
		"window_start_fn":       o.WindowStartFunc,
		"window_finish_fn":      o.WindowFinishFunc,
		"window_get_fn":         o.WindowGetFunc,
		"history_events_fn":     o.HistoryEventsFunc,
	}, "{{channel_lit}}", pgkit.QuoteLiteral(o.Channel),
		// Index names take no schema: an index lives in its table's.
		"{{history_name_at_idx}}", pgkit.QuoteIdent(o.TablePrefix+suffixHistoryNameAt),
		"{{history_at_idx}}", pgkit.QuoteIdent(o.TablePrefix+suffixHistoryAt),
		"{{waiters_line_idx}}", pgkit.QuoteIdent(o.TablePrefix+suffixWaitersLine))
}
