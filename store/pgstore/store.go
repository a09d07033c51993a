package pgstore

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure"
)

var (
	_ tenure.Store    = (*Store)(nil)
	_ tenure.Notifier = (*Store)(nil)
	_ tenure.Lister   = (*Store)(nil)
)

//go:embed queries/*.sql
var queryFS embed.FS

// acquireAttempts bounds how often Acquire repeats its statement when a
// concurrent first insert of the same name made it return nothing (see
// queries/acquire.sql). The second attempt always sees that row.
const acquireAttempts = 3

// Store is the PostgreSQL [tenure.Store], [tenure.Notifier] and
// [tenure.Lister]. It is safe for concurrent use. Create it with [New] and
// create its schema with [Store.Migrate] (or `tenure migrate`).
type Store struct {
	pool  *pgxpool.Pool
	obj   Objects
	names sqlNames
	// seqName is the token sequence as regclass text, a bind parameter.
	seqName string

	acquireSQL, renewSQL, releaseSQL, getSQL, listSQL string

	closed atomic.Bool
	// done is cancelled by Close; it ends every Listen.
	done   context.Context
	cancel context.CancelFunc

	hookMu sync.Mutex
	// listenHook, when set (by tests), is called with the backend pid of
	// each listening connection once its LISTEN succeeded.
	listenHook func(pid uint32)
}

// New returns a Store using pool, with the objects cfg names. It does not
// touch the database: call [Store.Migrate] once (as the schema's owner)
// before the first use, or calls fail with [tenure.ErrNotMigrated].
//
// The store does not own pool: [Store.Close] leaves it open. pool's
// DefaultQueryExecMode may be any of pgx's modes. Statements keep no
// session state; only [Store.Listen] holds a session of its own.
func New(pool *pgxpool.Pool, cfg Config) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("pgstore: %w: pool is nil; create one with pgxpool.New", tenure.ErrInvalid)
	}
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	names := newSQLNames(obj)
	s := &Store{
		pool:    pool,
		obj:     obj,
		names:   names,
		seqName: ident(obj.Schema, obj.TokenSeq),
	}
	for _, q := range []struct {
		file string
		dst  *string
	}{
		{"acquire.sql", &s.acquireSQL},
		{"renew.sql", &s.renewSQL},
		{"release.sql", &s.releaseSQL},
		{"get.sql", &s.getSQL},
		{"list.sql", &s.listSQL},
	} {
		text, err := queryFS.ReadFile("queries/" + q.file)
		if err != nil {
			return nil, fmt.Errorf("pgstore: embedded query %s is missing: %w", q.file, err)
		}
		*q.dst = names.render(string(text))
	}
	s.done, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Objects returns the names of the store's database objects.
func (s *Store) Objects() Objects { return s.obj }

// Acquire implements [tenure.Store.Acquire] in one statement (one round
// trip; two when it races with the very first insert of the same name).
// A successful acquisition is announced on the store's channel. An error
// matching [tenure.ErrUnavailable] means it may have been applied.
func (s *Store) Acquire(ctx context.Context, p tenure.AcquireParams) (tenure.Grant, error) {
	if err := s.begin(ctx, "acquire"); err != nil {
		return tenure.Grant{}, err
	}
	if err := p.Validate(); err != nil {
		return tenure.Grant{}, fmt.Errorf("pgstore: acquire: %w", err)
	}
	op := fmt.Sprintf("acquire lease %q", p.Name)
	for range acquireAttempts {
		var (
			acquired    bool
			g           = tenure.Grant{Name: p.Name}
			remainingUS int64
		)
		err := s.pool.QueryRow(ctx, s.acquireSQL,
			p.Name, p.Holder.Label, p.Holder.Instance, p.TTL.Microseconds(), s.seqName, s.obj.Channel,
		).Scan(&acquired, &g.Holder.Label, &g.Holder.Instance, &g.Token, &g.Seq, &remainingUS)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return tenure.Grant{}, interpretError(op, err)
		}
		g.Remaining = time.Duration(remainingUS) * time.Microsecond
		if !acquired {
			return tenure.Grant{}, &tenure.HeldError{
				Name: p.Name, Holder: g.Holder, Token: g.Token, Seq: g.Seq, Remaining: g.Remaining,
			}
		}
		return g, nil
	}
	return tenure.Grant{}, fmt.Errorf("pgstore: %s: %w: the lease row changed under %d attempts in a row; try again",
		op, tenure.ErrUnavailable, acquireAttempts)
}

// Renew implements [tenure.Store.Renew]: the whole batch (up to
// [tenure.MaxRenewBatch] leases) is one statement and one round trip. An
// error matching [tenure.ErrUnavailable] means some or all of the batch
// may have been renewed.
func (s *Store) Renew(ctx context.Context, ps []tenure.RenewParams) ([]tenure.RenewResult, error) {
	if err := s.begin(ctx, "renew"); err != nil {
		return nil, err
	}
	if err := tenure.ValidateRenewBatch(ps); err != nil {
		return nil, fmt.Errorf("pgstore: renew: %w", err)
	}
	if len(ps) == 0 {
		return []tenure.RenewResult{}, nil
	}
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
	op := fmt.Sprintf("renew %d leases", len(ps))
	if len(ps) == 1 {
		op = fmt.Sprintf("renew lease %q", ps[0].Name)
	}
	rows, err := s.pool.Query(ctx, s.renewSQL, names, labels, instances, tokens, seqs, ttls)
	if err != nil {
		return nil, interpretError(op, err)
	}
	results := make([]tenure.RenewResult, 0, len(ps))
	for rows.Next() {
		var (
			r           tenure.RenewResult
			known, held bool
			remainingUS int64
		)
		if err := rows.Scan(&r.Renewed, &known, &r.Grant.Holder.Label, &r.Grant.Holder.Instance,
			&r.Grant.Token, &r.Grant.Seq, &held, &remainingUS); err != nil {
			rows.Close()
			return nil, interpretError(op, err)
		}
		if !known {
			r.Grant = tenure.Grant{}
		}
		if !held {
			r.Grant.Holder = tenure.Holder{}
			remainingUS = 0
		}
		r.Grant.Remaining = time.Duration(remainingUS) * time.Microsecond
		results = append(results, r)
	}
	if err := rows.Err(); err != nil {
		return nil, interpretError(op, err)
	}
	if len(results) != len(ps) {
		return nil, fmt.Errorf("pgstore: %s: %w: the server answered %d results for %d leases",
			op, tenure.ErrUnavailable, len(results), len(ps))
	}
	for i := range results {
		results[i].Grant.Name = ps[i].Name
	}
	return results, nil
}

// Release implements [tenure.Store.Release]: it expires the lease now,
// keeps its row and token order, and announces the release on the store's
// channel. An error matching [tenure.ErrUnavailable] means it may have
// been applied.
func (s *Store) Release(ctx context.Context, p tenure.ReleaseParams) error {
	if err := s.begin(ctx, "release"); err != nil {
		return err
	}
	if err := p.Validate(); err != nil {
		return fmt.Errorf("pgstore: release: %w", err)
	}
	var n int64
	err := s.pool.QueryRow(ctx, s.releaseSQL,
		p.Name, p.Holder.Label, p.Holder.Instance, int64(p.Token), s.obj.Channel,
	).Scan(&n)
	if err != nil {
		return interpretError(fmt.Sprintf("release lease %q", p.Name), err)
	}
	if n == 0 {
		return fmt.Errorf("pgstore: release of lease %q by %s with token %d refused: %w",
			p.Name, p.Holder, p.Token, tenure.ErrNotHeld)
	}
	return nil
}

// Get implements [tenure.Store.Get].
func (s *Store) Get(ctx context.Context, name string) (tenure.Record, error) {
	if err := s.begin(ctx, "get"); err != nil {
		return tenure.Record{}, err
	}
	if err := tenure.ValidateName(name); err != nil {
		return tenure.Record{}, fmt.Errorf("pgstore: get: %w", err)
	}
	rows, err := s.pool.Query(ctx, s.getSQL, name)
	if err != nil {
		return tenure.Record{}, interpretError(fmt.Sprintf("get lease %q", name), err)
	}
	records, err := scanRecords(rows)
	if err != nil {
		return tenure.Record{}, interpretError(fmt.Sprintf("get lease %q", name), err)
	}
	if len(records) == 0 {
		return tenure.Record{}, fmt.Errorf("pgstore: lease %q: %w", name, tenure.ErrNotFound)
	}
	return records[0], nil
}

// List implements [tenure.Lister.List], ordered by name in byte order.
func (s *Store) List(ctx context.Context) ([]tenure.Record, error) {
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

// Close implements [tenure.Store.Close]: later calls fail with
// [tenure.ErrClosed] and every [Store.Listen] returns. It leaves the pool
// open. Closing twice is harmless.
func (s *Store) Close() error {
	s.closed.Store(true)
	s.cancel()
	return nil
}

// scanRecords reads the rows of get.sql or list.sql and closes them.
func scanRecords(rows pgx.Rows) ([]tenure.Record, error) {
	defer rows.Close()
	var records []tenure.Record
	for rows.Next() {
		var (
			r           tenure.Record
			released    bool
			held        bool
			remainingUS int64
		)
		if err := rows.Scan(&r.Name, &r.Holder.Label, &r.Holder.Instance, &r.Token, &r.Seq,
			&r.AcquiredAt, &released, &held, &remainingUS); err != nil {
			return nil, err
		}
		switch {
		case released:
			r.State = tenure.StateReleased
		case held:
			r.State = tenure.StateHeld
			r.Remaining = time.Duration(remainingUS) * time.Microsecond
		default:
			r.State = tenure.StateExpired
		}
		records = append(records, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if records == nil {
		records = []tenure.Record{}
	}
	return records, nil
}

// begin refuses a call on a closed store or with a context that is already
// done, before anything is attempted.
func (s *Store) begin(ctx context.Context, op string) error {
	if s.closed.Load() {
		return closedError(op)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("pgstore: %s not attempted: %w: %w", op, tenure.ErrUnavailable, err)
	}
	return nil
}
