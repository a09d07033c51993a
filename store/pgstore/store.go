package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure/internal/pgkit"
	"github.com/tenure-dev/tenure/internal/storekit"
)

var (
	_ store.Store         = (*Store)(nil)
	_ store.Notifier      = (*Store)(nil)
	_ store.Lister        = (*Store)(nil)
	_ store.BatchReleaser = (*Store)(nil)
	_ store.BatchAcquirer = (*Store)(nil)
	_ store.Historian     = (*Store)(nil)
	_ store.ForceReleaser = (*Store)(nil)
)

//go:embed queries/*.sql
var queryFS embed.FS

// acquireAttempts bounds how often Acquire repeats its statement when a
// concurrent first insert of the same name made it return nothing (see
// queries/acquire.sql). The second attempt always sees that row.
const acquireAttempts = 3

// Store is the PostgreSQL [store.Store]; docs/STORES.md lists the optional
// interfaces of package store it implements. It is safe for concurrent
// use. Create it with [New] and create its schema with [Store.Migrate] (or
// `tenure migrate`).
type Store struct {
	pool *pgxpool.Pool
	obj  Objects
	// seqName is the token sequence, quoted, for Migrate's check.
	seqName string

	// retention is Config.HistoryRetention, for Migrate.
	retention time.Duration

	acquireSQL, acquireBatchSQL, renewSQL, releaseSQL, releaseBatchSQL, getSQL, listSQL string
	acquireSlotSQL                                                                      string
	historySQL, forceReleaseSQL                                                         string

	// gate is shut by Close; it ends every Listen.
	gate *storekit.Gate
	// acquires sends the Acquire calls made at once together (see Acquire).
	acquires *storekit.AcquireGroup
	// renews sends the Renew calls made at once together (see Renew).
	renews *storekit.RenewGroup
	// hub shares one listening connection among every Listen call.
	hub *storekit.Hub
	// listenConfig and noListen are Config.ListenConfig and
	// Config.NoListen.
	listenConfig *pgx.ConnConfig
	noListen     bool

	hookMu sync.Mutex
	// listenHook, when set (by tests), is called with the backend pid of
	// each listening connection once its LISTEN succeeded.
	listenHook func(pid uint32)
}

// New returns a Store using pool, with the objects cfg names. It does not
// touch the database: call [Store.Migrate] once (as the schema's owner)
// before the first use, or calls fail with [store.ErrNotMigrated].
//
// The store does not own pool: [Store.Close] leaves it open. pool's
// DefaultQueryExecMode may be any of pgx's modes on a direct connection;
// through a connection pooler in transaction mode (PgBouncer) it must
// prepare no named statement (see the package documentation, and
// [Store.CheckPooler]). Statements keep no session state; only
// [Store.Listen] holds a session of its own.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgstore: %w: pool is nil; create one with pgxpool.New", store.ErrInvalid)
	}
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	retention, err := cfg.historyRetention()
	if err != nil {
		return nil, err
	}
	if err := cfg.validateListen(); err != nil {
		return nil, err
	}
	render := obj.renderer()
	s := &Store{
		retention: retention,
		pool:      pool,
		obj:       obj,
		seqName:   obj.namespace().Ident(obj.TokenSeq),
		gate:      storekit.NewGate("pgstore", "pgstore.New"),

		listenConfig: cfg.ListenConfig,
		noListen:     cfg.NoListen,
	}
	s.hub = storekit.NewHub(s.listenLoop)
	s.acquires = storekit.NewAcquireGroup("pgstore", s.acquireTogether)
	s.renews = storekit.NewRenewGroup("pgstore", s.renewTogether)
	if err := pgkit.Queries("pgstore", queryFS, "queries", render, map[string]*string{
		"acquire.sql":       &s.acquireSQL,
		"acquire_batch.sql": &s.acquireBatchSQL,
		"acquire_slot.sql":  &s.acquireSlotSQL,
		"renew.sql":         &s.renewSQL,
		"release.sql":       &s.releaseSQL,
		"release_batch.sql": &s.releaseBatchSQL,
		"get.sql":           &s.getSQL,
		"list.sql":          &s.listSQL,
		"history.sql":       &s.historySQL,
		"force_release.sql": &s.forceReleaseSQL,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Objects returns the names of the store's database objects.
func (s *Store) Objects() Objects { return s.obj }

// Acquire implements [store.Store.Acquire] in one statement (one round
// trip; two when it races with the very first insert of the same name).
// A successful acquisition is announced on the store's channel. An error
// matching [store.ErrUnavailable] means it may have been applied.
//
// Calls made at once, by any callers of the store, share round trips
// (group commit): while fewer than two acquisitions are out, a call goes
// at once, alone; calls made while two are out wait for one to come back
// and then go together, up to 1,000 to a statement of acquire_batch (as
// [Store.AcquireBatch] sends them), each lease at most once a statement.
// A call whose context ends while it waits for its turn is not attempted;
// one whose context ends while its statement is out returns at once and
// may have been applied; the statement goes on for the others until the
// last of them has left. A statement that fails as a whole fails each of
// its calls with the error its own statement would have had.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("pgstore: acquire: %w", err)
	}
	return s.acquires.Acquire(ctx, p)
}

// acquireTogether is the round trip of Acquire's group: one lease through
// the acquire function, several through acquire_batch.
func (s *Store) acquireTogether(ctx context.Context, ps []store.AcquireParams) []store.AcquireResult {
	if len(ps) == 1 {
		g, err := s.acquire(ctx, ps[0])
		return []store.AcquireResult{{Grant: g, Err: err}}
	}
	res, err := s.acquireBatch(ctx, ps)
	if err != nil {
		res = make([]store.AcquireResult, len(ps))
		for i, p := range ps {
			res[i].Err = interpretError(fmt.Sprintf("acquire lease %q (in a batch of %d)", p.Name, len(ps)), err)
		}
	}
	return res
}

// acquire carries out p, which is valid.
func (s *Store) acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	op := fmt.Sprintf("acquire lease %q", p.Name)
	for range acquireAttempts {
		var a acquireRow
		err := s.pool.QueryRow(ctx, s.acquireSQL,
			p.Name, p.Holder.Label, p.Holder.Instance, p.TTL.Microseconds(), p.Payload, p.Wait,
		).Scan(a.dest()...)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return store.Grant{}, interpretError(op, err)
		}
		return a.result(p.Name)
	}
	return store.Grant{}, fmt.Errorf("pgstore: %s: %w: the lease row changed under %d attempts in a row; try again",
		op, store.ErrUnavailable, acquireAttempts)
}

// AcquireBatch implements [store.BatchAcquirer.AcquireBatch]: one
// statement, the acquire_batch function, which takes the free leases of
// the batch with one UPDATE and creates the missing ones with one INSERT,
// with the same rules as [Store.Acquire] (see functions/acquire_batch.sql). A lease
// whose row another transaction had locked, or that became free while the
// statement ran, is asked for again alone.
func (s *Store) AcquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return nil, err
	}
	if err := store.ValidateAcquireBatch(ps); err != nil {
		return nil, fmt.Errorf("pgstore: acquire: %w", err)
	}
	res, err := s.acquireBatch(ctx, ps)
	if err != nil {
		return nil, interpretError(fmt.Sprintf("acquire %d leases", len(ps)), err)
	}
	return res, nil
}

// acquireBatch carries out ps, which are valid, in one statement (and a
// statement of its own for each lease the batch answered "ask again
// alone"). An error is for the whole statement, as pgx returned it: the
// caller interprets it.
func (s *Store) acquireBatch(ctx context.Context, ps []store.AcquireParams) ([]store.AcquireResult, error) {
	var (
		names     = make([]string, len(ps))
		labels    = make([]string, len(ps))
		instances = make([]string, len(ps))
		ttls      = make([]int64, len(ps))
		payloads  = make([]string, len(ps))
		waits     = make([]bool, len(ps))
	)
	for i, p := range ps {
		names[i], labels[i], instances[i] = p.Name, p.Holder.Label, p.Holder.Instance
		ttls[i], payloads[i], waits[i] = p.TTL.Microseconds(), p.Payload, p.Wait
	}
	rows, err := s.pool.Query(ctx, s.acquireBatchSQL, names, labels, instances, ttls, payloads, waits)
	if err != nil {
		return nil, err
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (acquireRow, error) {
		var a acquireRow
		return a, row.Scan(a.nullable()...)
	})
	if err != nil {
		return nil, err
	}
	if len(found) != len(ps) {
		return nil, fmt.Errorf("the server answered %d results for %d leases", len(found), len(ps))
	}
	res := make([]store.AcquireResult, len(ps))
	for i, a := range found {
		if a.missing() {
			res[i].Grant, res[i].Err = s.acquire(ctx, ps[i])
			continue
		}
		res[i].Grant, res[i].Err = a.result(ps[i].Name)
	}
	return res, nil
}

// acquireRow is one answer of the acquire function (queries/acquire.sql).
type acquireRow struct {
	acquired    *bool // nil: the function returned no row
	g           store.Grant
	remainingUS int64
	position    int32
	next        store.Holder
}

// dest returns where a row of queries/acquire.sql scans into.
func (a *acquireRow) dest() []any {
	a.acquired = new(bool)
	return []any{a.acquired, &a.g.Holder.Label, &a.g.Holder.Instance, &a.g.Token, &a.g.Seq, &a.remainingUS, &a.g.Payload,
		&a.g.At, &a.position, &a.next.Label, &a.next.Instance}
}

// nullable returns where a row of queries/acquire_batch.sql scans into:
// acquired is null there when the function returned no row.
func (a *acquireRow) nullable() []any {
	d := a.dest()
	d[0] = &a.acquired
	return d
}

func (a *acquireRow) missing() bool { return a.acquired == nil }

// result is the grant, or the refusal, the row reports.
func (a *acquireRow) result(name string) (store.Grant, error) {
	a.g.Name = name
	a.g.Remaining = time.Duration(a.remainingUS) * time.Microsecond
	a.g.At = a.g.At.UTC()
	if !*a.acquired {
		return store.Grant{}, &store.HeldError{
			Name: name, Holder: a.g.Holder, Token: a.g.Token, Seq: a.g.Seq, Remaining: a.g.Remaining, Payload: a.g.Payload,
			Position: int(a.position), Next: a.next,
		}
	}
	return a.g, nil
}

// Renew implements [store.Store.Renew]: the whole batch (up to
// [store.MaxRenewBatch] leases) is one statement and one round trip. An
// error matching [store.ErrUnavailable] means some or all of the batch
// may have been renewed.
//
// Calls made at once, by any callers of the store, share statements
// (group commit, as for [Store.Acquire]): while fewer than two renewal
// statements are out, a call goes at once, alone; calls made while two are
// out wait for one to come back and then go together, up to
// [store.MaxRenewBatch] leases to a statement, each lease at most once a
// statement. So the rounds of many clients sharing the store, which come
// due together when they acquired together, take a few statements of many
// leases rather than one each. A call whose context ends while it waits
// is not attempted; one whose context ends while its statement is out
// returns at once and may have been applied. A statement that fails as a
// whole fails each of its calls with its error.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("pgstore: renew: %w", err)
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	return s.renews.Renew(ctx, ps)
}

// renewTogether is the round trip of Renew's group: one statement of the
// renew function, for one call's batch or several calls' together.
func (s *Store) renewTogether(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	var (
		names     = make([]string, len(ps))
		labels    = make([]string, len(ps))
		instances = make([]string, len(ps))
		tokens    = make([]int64, len(ps))
		seqs      = make([]int64, len(ps))
		ttls      = make([]int64, len(ps))
	)
	for i, p := range ps {
		names[i], labels[i], instances[i] = p.Name, p.Holder.Label, p.Holder.Instance
		tokens[i], seqs[i], ttls[i] = int64(p.Token), p.Seq, p.TTL.Microseconds()
	}
	op := storekit.RenewOp(ps)
	rows, err := s.pool.Query(ctx, s.renewSQL, names, labels, instances, tokens, seqs, ttls)
	if err != nil {
		return nil, interpretError(op, err)
	}
	results := make([]store.RenewResult, 0, len(ps))
	for rows.Next() {
		var (
			r           store.RenewResult
			known, held bool
			remainingUS int64
			at          time.Time
		)
		if err := rows.Scan(&r.Renewed, &known, &r.Grant.Holder.Label, &r.Grant.Holder.Instance,
			&r.Grant.Token, &r.Grant.Seq, &held, &remainingUS, &at); err != nil {
			rows.Close()
			return nil, interpretError(op, err)
		}
		if !known {
			r.Grant = store.Grant{}
		}
		if !held {
			r.Grant.Holder = store.Holder{}
			remainingUS = 0
		}
		r.Grant.Remaining = time.Duration(remainingUS) * time.Microsecond
		if r.Renewed {
			r.Grant.At = at.UTC()
		}
		results = append(results, r)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(op, err)
	}
	if len(results) != len(ps) {
		return nil, fmt.Errorf("pgstore: %s: %w: the server answered %d results for %d leases",
			op, store.ErrUnavailable, len(results), len(ps))
	}
	for i := range results {
		results[i].Grant.Name = ps[i].Name
	}
	return results, nil
}

// Release implements [store.Store.Release]: it expires the lease now,
// keeps its row and token order, and announces the release on the store's
// channel. An error matching [store.ErrUnavailable] means it may have
// been applied.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "release", s.releaseSQL, p)
}

// ForceRelease implements [store.ForceReleaser]: [Store.Release] through
// the force_release function, which the history records as
// force-released.
func (s *Store) ForceRelease(ctx context.Context, p store.ReleaseParams) error {
	return s.release(ctx, "force release", s.forceReleaseSQL, p)
}

func (s *Store) release(ctx context.Context, op, sql string, p store.ReleaseParams) error {
	if err := s.begin(ctx, op); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var n int64
	err := s.pool.QueryRow(ctx, sql,
		p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token),
	).Scan(&n)
	if err != nil {
		return interpretError(fmt.Sprintf("%s lease %q", op, p.Name), err)
	}
	if n == 0 {
		return fmt.Errorf("pgstore: %s of lease %q by %s with token %d refused: %w",
			op, p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	return nil
}

// ReleaseBatch implements [store.BatchReleaser.ReleaseBatch] in one
// statement that calls the release function once per tenure: each is
// released, and announced, as [Store.Release] would.
func (s *Store) ReleaseBatch(ctx context.Context, ps []store.ReleaseParams) ([]error, error) {
	if err := s.begin(ctx, "release"); err != nil {
		return nil, err
	}
	if err := store.ValidateReleaseBatch(ps); err != nil {
		return nil, fmt.Errorf("pgstore: release: %w", err)
	}
	var (
		names     = make([]string, len(ps))
		labels    = make([]string, len(ps))
		instances = make([]string, len(ps))
		tokens    = make([]int64, len(ps))
	)
	for i, p := range ps {
		names[i], labels[i], instances[i], tokens[i] = p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token)
	}
	op := fmt.Sprintf("release %d leases", len(ps))
	rows, err := s.pool.Query(ctx, s.releaseBatchSQL, names, labels, instances, tokens)
	if err != nil {
		return nil, interpretError(op, err)
	}
	released, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, interpretError(op, err)
	}
	if len(released) != len(ps) {
		return nil, fmt.Errorf("pgstore: %s: %w: the server answered %d results for %d leases",
			op, store.ErrUnavailable, len(released), len(ps))
	}
	errs := make([]error, len(ps))
	for i, n := range released {
		if n == 0 {
			p := ps[i]
			errs[i] = fmt.Errorf("pgstore: release of lease %q by %s with token %d refused: %w",
				p.Name, p.Holder, p.Token, store.ErrNotHeld)
		}
	}
	return errs, nil
}

// History implements [store.Historian] with one call of the history_events
// function (index scans on (name, at) or at). Events are kept for
// [Config.HistoryRetention] as the last Migrate set it.
func (s *Store) History(ctx context.Context, p store.HistoryParams) ([]store.HistoryEvent, error) {
	if err := s.begin(ctx, "history"); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("pgstore: history: %w", err)
	}
	var (
		name  *string
		since *time.Time
	)
	op := "read the history"
	if p.Name != "" {
		name = &p.Name
		op = fmt.Sprintf("read the history of lease %q", p.Name)
	}
	if !p.Since.IsZero() {
		since = &p.Since
	}
	rows, err := s.pool.Query(ctx, s.historySQL, name, since, int32(p.EffectiveLimit()))
	if err != nil {
		return nil, interpretError(op, err)
	}
	defer rows.Close()
	events := []store.HistoryEvent{}
	for rows.Next() {
		var (
			ev   store.HistoryEvent
			kind string
		)
		if err := rows.Scan(&ev.Name, &kind, &ev.Holder.Label, &ev.Holder.Instance, &ev.Token,
			&ev.PreviousHolder.Label, &ev.PreviousHolder.Instance, &ev.PreviousToken, &ev.At, &ev.Window); err != nil {
			return nil, interpretError(op, err)
		}
		if ev.Kind, err = store.ParseEventKind(kind); err != nil {
			return nil, fmt.Errorf("pgstore: %s: the server recorded an event this library does not know (%w); upgrade tenure", op, err)
		}
		ev.At = ev.At.UTC()
		events = append(events, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(op, err)
	}
	return events, nil
}

// Get implements [store.Store.Get].
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("pgstore: get: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.getSQL, name)
	if err != nil {
		return store.Record{}, interpretError(fmt.Sprintf("get lease %q", name), err)
	}
	records, err := scanRecords(rows)
	if err != nil {
		return store.Record{}, interpretError(fmt.Sprintf("get lease %q", name), err)
	}
	if len(records) == 0 {
		return store.Record{}, fmt.Errorf("pgstore: lease %q: %w", name, store.ErrNotFound)
	}
	return records[0], nil
}

// List implements [store.Lister.List], ordered by name in byte order.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin(ctx, "list"); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.listSQL)
	if err != nil {
		return nil, interpretError("list leases", err)
	}
	records, err := scanRecords(rows)
	if err != nil {
		return nil, interpretError("list leases", err)
	}
	return records, nil
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed] and every [Store.Listen] returns. It leaves the pool
// open. Closing twice is harmless.
func (s *Store) Close() error {
	s.gate.Close()
	return nil
}

// scanRecords reads the rows of get.sql or list.sql and closes them.
func scanRecords(rows pgx.Rows) ([]store.Record, error) {
	defer rows.Close()
	var records []store.Record
	for rows.Next() {
		var (
			r           store.Record
			released    bool
			held        bool
			remainingUS int64
		)
		if err := rows.Scan(&r.Name, &r.Holder.Label, &r.Holder.Instance, &r.Token, &r.Seq,
			&r.AcquiredAt, &released, &held, &remainingUS, &r.Payload); err != nil {
			return nil, err
		}
		switch {
		case released:
			r.State = store.StateReleased
		case held:
			r.State = store.StateHeld
			r.Remaining = time.Duration(remainingUS) * time.Microsecond
		default:
			r.State = store.StateExpired
		}
		records = append(records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if records == nil {
		records = []store.Record{}
	}
	return records, nil
}

// begin refuses a call on a closed store or with a context that is already
// done, before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error { return s.gate.Begin(ctx, op) }
