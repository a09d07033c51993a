package pgstore

import (
	"context"
	"embed"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/internal/storekit"
	"github.com/tenure-dev/tenure/store"
)

var (
	//go:embed migrations/*.up.sql
	migrationFS embed.FS
	//go:embed functions/*.sql
	functionFS embed.FS
)

// squashed names the migrations 001 to 010 of the numbering before
// v0.1.0, which migration 001_tables and the functions replace (see
// Migrations in the package documentation).
var squashed = []string{
	"init", "token_seq_cache", "functions_only", "renew_in_place", "history",
	"payload", "line", "history_prune_bound", "acquire_batch", "history_prune_sampled",
}

// migrations returns the store's migrations and functions for obj.
func migrations(obj Objects) (pgkit.Set, error) {
	set, err := pgkit.LoadSet(pgkit.Set{
		Errors:         errs,
		Namespace:      obj.namespace(),
		Title:          "tenure schema",
		Table:          obj.namespace().Ident(obj.Migrations),
		FunctionsTable: obj.namespace().Ident(obj.Functions),
		Squashed:       squashed,
		Render:         obj.renderer(),
	}, migrationFS, "migrations")
	if err != nil {
		return set, err
	}
	set.Functions, err = storekit.LoadFunctions(errs.Owner, functionFS, "functions")
	return set, err
}

// Migrate creates or upgrades the store's schema, tables, sequence and
// functions to this version of the library. It needs DDL rights (run it as
// the schema's owner; the run-time role needs only what [Config.GrantSQL]
// grants). It is idempotent and safe to call from many processes at once,
// and alongside the fleet registry's Migrate on the same schema: it runs
// in one transaction under a transaction-scoped advisory lock per schema.
// It applies the migrations the prefix's migrations table does not record,
// then installs each function the prefix's functions table records
// missing, at a lower revision or with other text; migrations and
// functions recorded by a newer library are left alone. A schema migrated
// with the numbering before v0.1.0 is upgraded in place (see Migrations
// in the package documentation).
//
// The token sequence must hand out one value at a time (CACHE 1): a cached
// sequence gives each session its own block of values, so tokens drawn by
// different sessions come out of order. Migration 001 sets CACHE 1; every
// Migrate then checks it and fails with an error that says what to run when
// the sequence was altered since.
func (s *Store) Migrate(ctx context.Context) error {
	if err := s.begin(ctx, "migrate"); err != nil {
		return err
	}
	set, err := migrations(s.obj)
	if err != nil {
		return err
	}
	if err := set.Run(ctx, s.pool); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, retentionSQL(s.obj), s.retention.Microseconds()); err != nil {
		return interpretError("migrate: set the history retention", err)
	}
	return s.checkTokenSeq(ctx)
}

// SchemaStatus reports what the schema records next to what [Store.Migrate]
// would apply, and changes nothing: [store.SchemaStatus.Behind] says whether
// Migrate has work to do (tenure migrate --check), its String is the
// version line of tenure migrate. It takes no lock.
func (s *Store) SchemaStatus(ctx context.Context) (store.SchemaStatus, error) {
	if err := s.begin(ctx, "migration status"); err != nil {
		return store.SchemaStatus{}, err
	}
	set, err := migrations(s.obj)
	if err != nil {
		return store.SchemaStatus{}, err
	}
	return set.Status(ctx, s.pool)
}

// retentionSQL sets the history's retention to $1 microseconds.
func retentionSQL(obj Objects) string {
	return "UPDATE " + obj.namespace().Ident(obj.Settings) + " SET history_retention = $1::bigint * interval '1 microsecond'"
}

// checkTokenSeq fails when the token sequence caches more than one value
// per session. Migration 001 sets CACHE 1, so this finds only a sequence
// altered after it ran; Migrate reports it rather than undo a DBA's change
// behind their back.
func (s *Store) checkTokenSeq(ctx context.Context) error {
	var cache int64
	err := s.pool.QueryRow(ctx, "SELECT seqcache FROM pg_catalog.pg_sequence WHERE seqrelid = $1::regclass", s.seqName).Scan(&cache)
	if err != nil {
		return interpretError("migrate: check the token sequence", err)
	}
	if cache != 1 {
		return fmt.Errorf("pgstore: migrate: the token sequence %s has CACHE %d: each session takes %d values at a time, so tokens are handed out out of order across sessions and a new tenure can get a lower token than an earlier one (promise P2); run ALTER SEQUENCE %s CACHE 1 as its owner, then migrate again",
			s.seqName, cache, cache, s.seqName)
	}
	return nil
}

// MigrationSQL returns the whole schema for c as one SQL script, for a DBA
// to review and run (psql -v ON_ERROR_STOP=1 -f) instead of [Store.Migrate]:
// it takes the same advisory lock, creates what is missing, records every
// version and can be run again without harm.
func (c Config) MigrationSQL() (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	retention, err := c.historyRetention()
	if err != nil {
		return "", err
	}
	script, err := pgkit.ScriptOf(migrations(obj))
	if err != nil {
		return "", err
	}
	return script + fmt.Sprintf("\n-- The history's retention (Config.HistoryRetention).\n%s;\n",
		strings.Replace(retentionSQL(obj), "$1::bigint", fmt.Sprint(retention.Microseconds()), 1)), nil
}

// GrantSQL returns the GRANT statements that let role use a store
// configured by c at run time, and nothing more: USAGE on the schema and
// EXECUTE on the functions of the lease protocol (acquire, acquire_batch, acquire_slot,
// renew, release, get, list, history_read, history_events, force_release,
// window_start, window_finish, window_get) and of fencing
// (fence, check_lease, check_lease_strict). The functions run as their
// owner; the role gets no privilege on the tables or the token sequence,
// so it cannot rewind a fence, forge or extend a lease or move the
// sequence: it can do only what the protocol does. Not
// granted: fence_foreign (fences for tokens of another store, which can
// raise any fence to any value; grant it by hand where that is what you
// want) and fence_reset (the operator's repair, which needs the owner).
// Run it after the migration, as the schema's owner.
func (c Config) GrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	ns := obj.namespace()
	return ns.GrantSQL("pgstore", role,
		"EXECUTE ON FUNCTION "+strings.Join([]string{
			ns.Ident(obj.AcquireFunc) + "(text, text, text, bigint, text, boolean)",
			ns.Ident(obj.AcquireBatchFunc) + "(text[], text[], text[], bigint[], text[], boolean[])",
			ns.Ident(obj.AcquireSlotFunc) + "(text, integer, text, text, bigint, text)",
			ns.Ident(obj.RenewFunc) + "(text[], text[], text[], bigint[], bigint[], bigint[])",
			ns.Ident(obj.ReleaseFunc) + "(text, text, text, bigint)",
			ns.Ident(obj.GetFunc) + "(text)",
			ns.Ident(obj.ListFunc) + "()",
			ns.Ident(obj.FenceFunc) + "(text, bigint)",
			ns.Ident(obj.CheckLeaseFunc) + "(text, bigint)",
			ns.Ident(obj.CheckLeaseStrictFunc) + "(text, bigint, text, text, bigint)",
			ns.Ident(obj.HistoryReadFunc) + "(text, timestamptz, integer)",
			ns.Ident(obj.ForceReleaseFunc) + "(text, text, text, bigint)",
			ns.Ident(obj.WindowStartFunc) + "(text, text, text, bigint, text, bigint, boolean)",
			ns.Ident(obj.WindowFinishFunc) + "(text, text, text, text, bigint, text)",
			ns.Ident(obj.WindowGetFunc) + "(text, text)",
			ns.Ident(obj.HistoryEventsFunc) + "(text, timestamptz, integer)",
		}, ", "),
	)
}

// ReadGrantSQL returns the GRANT statements of a read-only role (`tenure
// status`, `serve`, `history`, dashboards): USAGE on the schema and
// EXECUTE on the get, list, history_read, history_events and window_get
// functions. It can see every
// lease and its history and change none.
func (c Config) ReadGrantSQL(role string) (string, error) {
	obj, err := c.Objects()
	if err != nil {
		return "", err
	}
	ns := obj.namespace()
	return ns.GrantSQL("pgstore", role,
		"EXECUTE ON FUNCTION "+ns.Ident(obj.GetFunc)+"(text), "+ns.Ident(obj.ListFunc)+"(), "+
			ns.Ident(obj.HistoryReadFunc)+"(text, timestamptz, integer), "+ns.Ident(obj.WindowGetFunc)+"(text, text), "+
			ns.Ident(obj.HistoryEventsFunc)+"(text, timestamptz, integer)",
	)
}
