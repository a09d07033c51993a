package mysqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure/internal/storekit"
)

var (
	_ store.Store  = (*Store)(nil)
	_ store.Lister = (*Store)(nil)
)

// Store is the MySQL/MariaDB [store.Store]; docs/STORES.md lists the
// optional interfaces of package store it implements. It is safe for
// concurrent use. Create it with [New] and create its schema with
// [Store.Migrate] (or `tenure migrate`).
type Store struct {
	db  *sql.DB
	obj Objects

	acquireSQL, renewSQL, releaseSQL, getSQL, listSQL string

	// gate is shut by Close.
	gate *storekit.Gate
	// bells carry wake-ups (wake.go).
	bells *bells

	mu sync.Mutex
	// stmts holds the prepared CALL statements by text, prepared on first
	// use: database/sql prepares each once per connection, so a call
	// after the first on a connection is one round trip.
	stmts map[string]*sql.Stmt
}

// New returns a Store using db, with the objects cfg names. It does not
// touch the database: call [Store.Migrate] once (as an account that may
// create tables and procedures) before the first use, or calls fail with
// [store.ErrNotMigrated].
//
// db must come from github.com/go-sql-driver/mysql (sql.Open("mysql", dsn)
// or sql.OpenDB(connector)); its errors are how the store tells a missing
// schema, a denied call and an unreachable server apart. The store does
// not own db: [Store.Close] leaves it open. The store keeps no session
// state on the connections it returns to db's pool: the connections that
// hold or wait on the leases' user-level locks (see Notifications in the
// package documentation) are taken from db and closed, never returned.
func New(db *sql.DB, cfg Config) (*Store, error) {
	if db == nil {
		return nil, fmt.Errorf("mysqlstore: %w: db is nil; open one with sql.Open(\"mysql\", dsn)", store.ErrInvalid)
	}
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	s := &Store{
		db:         db,
		obj:        obj,
		acquireSQL: "CALL " + obj.Ident(obj.AcquireProc) + "(?, ?, ?, ?, ?, ?)",
		renewSQL:   "CALL " + obj.Ident(obj.RenewProc) + "(?)",
		releaseSQL: "CALL " + obj.Ident(obj.ReleaseProc) + "(?, ?, ?, ?)",
		getSQL:     "CALL " + obj.Ident(obj.GetProc) + "(?)",
		listSQL:    "CALL " + obj.Ident(obj.ListProc) + "()",
		gate:       storekit.NewGate("mysqlstore", "mysqlstore.New"),
		stmts:      make(map[string]*sql.Stmt),
	}
	s.bells = newBells(s)
	return s, nil
}

// Objects returns the names of the store's database objects.
func (s *Store) Objects() Objects { return s.obj }

// micros returns d in whole microseconds, rounded up, so that a positive
// TTL stays positive at the server's precision.
func micros(d time.Duration) int64 { return int64((d + time.Microsecond - 1) / time.Microsecond) }

func fromMicros(us int64) time.Duration { return time.Duration(max(us, 0)) * time.Microsecond }

// Acquire implements [store.Store.Acquire] with one CALL of the acquire
// procedure: one round trip, one transaction on the server. An error
// matching [store.ErrUnavailable] means it may have been applied.
func (s *Store) Acquire(ctx context.Context, p store.AcquireParams) (store.Grant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return store.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return store.Grant{}, fmt.Errorf("mysqlstore: acquire: %w", err)
	}
	op := fmt.Sprintf("acquire lease %q", p.Name)
	var (
		acquired                         bool
		g                                = store.Grant{Name: p.Name}
		remainingUS, decidedUS, position int64
	)
	err := s.queryRow(ctx, s.acquireSQL, []any{p.Name, p.Holder.Label, p.Holder.Instance, micros(p.TTL), p.Payload, p.Wait},
		&acquired, &g.Holder.Label, &g.Holder.Instance, &g.Token, &g.Seq, &remainingUS, &decidedUS, &g.Payload, &position)
	if err != nil {
		return store.Grant{}, interpretError(op, err)
	}
	g.Remaining = fromMicros(remainingUS)
	g.At = time.UnixMicro(decidedUS).UTC()
	s.bells.hold(p.Name, acquired)
	if !acquired {
		return store.Grant{}, &store.HeldError{Name: p.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining,
			Payload: g.Payload, Position: int(position)}
	}
	return g, nil
}

// reportEntry is one lease of the renew procedure's report, as it was
// before the update: [ord, renewed, known, label, instance, token, seq,
// released, expires_us].
type reportEntry struct {
	ord       int
	renewed   bool
	known     bool
	holder    store.Holder
	token     store.Token
	seq       int64
	released  bool
	expiresUS int64
}

func (e *reportEntry) UnmarshalJSON(b []byte) error {
	var (
		ord, renewed, known, released int
		raw                           = []any{&ord, &renewed, &known, &e.holder.Label, &e.holder.Instance, &e.token, &e.seq, &released, &e.expiresUS}
	)
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if len(raw) != 9 {
		return fmt.Errorf("report entry has %d fields, not 9", len(raw))
	}
	e.ord, e.renewed, e.known, e.released = ord, renewed == 1, known == 1, released == 1
	return nil
}

// Renew implements [store.Store.Renew]: the whole batch (up to
// [store.MaxRenewBatch] leases) is one CALL of the renew procedure, one
// round trip and one transaction on the server. An error matching
// [store.ErrUnavailable] means some or all of the batch may have been
// renewed.
func (s *Store) Renew(ctx context.Context, ps []store.RenewParams) ([]store.RenewResult, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := store.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("mysqlstore: renew: %w", err)
	}
	if len(ps) == 0 {
		return []store.RenewResult{}, nil
	}
	batch := make([][]any, len(ps))
	for i, p := range ps {
		batch[i] = []any{p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token), p.Seq, micros(p.TTL)}
	}
	arg, err := json.Marshal(batch)
	if err != nil {
		return nil, fmt.Errorf("mysqlstore: renew: encode the batch: %w", err)
	}
	op := fmt.Sprintf("renew %d leases", len(ps))
	if len(ps) == 1 {
		op = fmt.Sprintf("renew lease %q", ps[0].Name)
	}
	var (
		report           []byte
		decidedUS, nowUS int64
	)
	if err := s.queryRow(ctx, s.renewSQL, []any{string(arg)}, &report, &decidedUS, &nowUS); err != nil {
		return nil, interpretError(op, err)
	}
	var entries []reportEntry
	if err := json.Unmarshal(report, &entries); err != nil {
		return nil, fmt.Errorf("mysqlstore: %s: %w: the server's report is not what this library expects (%v); migrate the schema to this version",
			op, store.ErrUnavailable, err)
	}
	if len(entries) != len(ps) {
		return nil, fmt.Errorf("mysqlstore: %s: %w: the server answered %d results for %d leases", op, store.ErrUnavailable, len(entries), len(ps))
	}
	slices.SortFunc(entries, func(a, b reportEntry) int { return a.ord - b.ord })
	results := make([]store.RenewResult, len(ps))
	for i, p := range ps {
		e := entries[i]
		g := store.Grant{Name: p.Name}
		switch {
		case e.renewed:
			g.Holder, g.Token, g.Seq = p.Holder, p.Token, e.seq+1
			g.Remaining = fromMicros(decidedUS + micros(p.TTL) - nowUS)
			g.At = time.UnixMicro(decidedUS).UTC()
		case e.known:
			g.Token, g.Seq = e.token, e.seq
			if !e.released && e.expiresUS > nowUS {
				g.Holder, g.Remaining = e.holder, fromMicros(e.expiresUS-nowUS)
			}
		}
		if !e.renewed {
			s.bells.hold(p.Name, false)
		}
		results[i] = store.RenewResult{Renewed: e.renewed, Grant: g}
	}
	return results, nil
}

// Release implements [store.Store.Release]: it expires the lease now and
// keeps its row and the token counter. An error matching
// [store.ErrUnavailable] means it may have been applied.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) error {
	if err := s.begin(ctx, "release"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("mysqlstore: release: %w", err)
	}
	// The bell is freed while the release runs, not after it: a follower
	// it wakes acquires after the release's row lock at the earliest, and
	// one that came before it is woken again (see bells.wait).
	s.bells.hold(p.Name, false)
	var n int64
	if err := s.queryRow(ctx, s.releaseSQL, []any{p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token)}, &n); err != nil {
		return interpretError(fmt.Sprintf("release lease %q", p.Name), err)
	}
	if n == 0 {
		return fmt.Errorf("mysqlstore: release of lease %q by %s with token %d refused: %w", p.Name, p.Holder, p.Token, store.ErrNotHeld)
	}
	s.bells.announce(store.Notice{Name: p.Name, Kind: store.NoticeReleased})
	return nil
}

// Get implements [store.Store.Get].
func (s *Store) Get(ctx context.Context, name string) (store.Record, error) {
	if err := s.begin(ctx, "get"); err != nil {
		return store.Record{}, err
	}
	if err := store.ValidateName(name); err != nil {
		return store.Record{}, fmt.Errorf("mysqlstore: get: %w", err)
	}
	op := fmt.Sprintf("get lease %q", name)
	records, err := s.records(ctx, s.getSQL, name)
	if err != nil {
		return store.Record{}, interpretError(op, err)
	}
	if len(records) == 0 {
		return store.Record{}, fmt.Errorf("mysqlstore: lease %q: %w", name, store.ErrNotFound)
	}
	return records[0], nil
}

// List implements [store.Lister.List], ordered by name in byte order.
func (s *Store) List(ctx context.Context) ([]store.Record, error) {
	if err := s.begin(ctx, "list"); err != nil {
		return nil, err
	}
	records, err := s.records(ctx, s.listSQL)
	if err != nil {
		return nil, interpretError("list leases", err)
	}
	return records, nil
}

// Close implements [store.Store.Close]: later calls fail with
// [store.ErrClosed]. It closes the store's prepared statements and leaves
// db open. Closing twice is harmless.
func (s *Store) Close() error {
	if !s.gate.Close() {
		return nil
	}
	s.bells.close()
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for q, st := range s.stmts {
		err = errors.Join(err, st.Close())
		delete(s.stmts, q)
	}
	if err != nil {
		return fmt.Errorf("mysqlstore: close prepared statements: %w", err)
	}
	return nil
}

// stmt returns the prepared statement of query, preparing it on first use.
// A statement that fails to prepare (the schema is not migrated yet) is
// not kept, so the next call prepares it again. The lock is not held while
// preparing, so a slow server holds up only the calls that prepare.
func (s *Store) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	s.mu.Lock()
	st, ok := s.stmts[query]
	s.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.gate.Check("call"); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	if prev, ok := s.stmts[query]; ok {
		_ = st.Close() // Another call prepared it meanwhile; a failure to close the spare changes nothing.
		return prev, nil
	}
	s.stmts[query] = st
	return st, nil
}

// queryRow runs a CALL that answers one row and scans it into dest.
func (s *Store) queryRow(ctx context.Context, query string, args []any, dest ...any) error {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer func() { _ = rows.Close() }() // Closed below on success; a second Close is harmless.
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("the procedure answered no row")
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	// Closing reads the rest of the CALL's answer, where a later error
	// would be.
	return rows.Close()
}

// records runs get's or list's CALL and reads its rows.
func (s *Store) records(ctx context.Context, query string, args ...any) ([]store.Record, error) {
	st, err := s.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }() // Closed below on success; a second Close is harmless.
	records := []store.Record{}
	for rows.Next() {
		var (
			r                        store.Record
			acquiredUS, expUS, nowUS int64
			released                 bool
		)
		if err := rows.Scan(&r.Name, &r.Holder.Label, &r.Holder.Instance, &r.Token, &r.Seq, &acquiredUS, &released, &expUS, &nowUS, &r.Payload); err != nil {
			return nil, err
		}
		r.AcquiredAt = time.UnixMicro(acquiredUS).UTC()
		switch {
		case released:
			r.State = store.StateReleased
		case expUS > nowUS:
			r.State = store.StateHeld
			r.Remaining = fromMicros(expUS - nowUS)
		default:
			r.State = store.StateExpired
		}
		records = append(records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return records, rows.Close()
}

// begin refuses a call on a closed store or with a context that is already
// done, before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error { return s.gate.Begin(ctx, op) }
