package pgfence

import (
	"context"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store/pgstore"
)

// Querier is what the helpers need of a connection: pgx.Tx, *pgx.Conn,
// *pgxpool.Pool, *pgxpool.Conn and *pgxpool.Tx all satisfy it. Pass the
// transaction that makes the protected write, so the check and the write
// commit or roll back together.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ Querier = pgx.Tx(nil)
	_ Querier = (*pgx.Conn)(nil)
	_ Querier = (*pgxpool.Pool)(nil)
	_ Querier = (*pgxpool.Conn)(nil)
	_ Querier = (*pgxpool.Tx)(nil)
)

var _ store.ChainWrite = (*tenure.ChainWrite)(nil)

// Beginner starts transactions: *pgxpool.Pool, *pgx.Conn and pgx.Tx (a
// savepoint) all do.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

var (
	_ Beginner = (*pgxpool.Pool)(nil)
	_ Beginner = (*pgx.Conn)(nil)
	_ Beginner = pgx.Tx(nil)
)

// Fencer calls the fence functions of one schema and table prefix. Its
// methods are safe for concurrent use. The package-level functions use the
// default one (schema public, prefix tenure_).
type Fencer struct {
	fenceSQL, foreignSQL, resetSQL, checkSQL, strictSQL string
}

// New returns a Fencer for the functions that [pgstore.Store.Migrate]
// installed for cfg. Only cfg's Schema and TablePrefix matter; a cfg that
// [pgstore.New] would refuse is refused the same way.
func New(cfg pgstore.Config) (*Fencer, error) {
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	return &Fencer{
		fenceSQL:   "SELECT " + pgx.Identifier{obj.Schema, obj.FenceFunc}.Sanitize() + "($1::text, $2::bigint)",
		foreignSQL: "SELECT " + pgx.Identifier{obj.Schema, obj.FenceForeignFunc}.Sanitize() + "($1::text, $2::bigint)",
		resetSQL:   "SELECT " + pgx.Identifier{obj.Schema, obj.FenceResetFunc}.Sanitize() + "($1::text, $2::bigint, $3::text)",
		checkSQL:   "SELECT " + pgx.Identifier{obj.Schema, obj.CheckLeaseFunc}.Sanitize() + "($1::text, $2::bigint)",
		strictSQL:  "SELECT " + pgx.Identifier{obj.Schema, obj.CheckLeaseStrictFunc}.Sanitize() + "($1::text, $2::bigint, $3::text, $4::text, $5::bigint)",
	}, nil
}

// defaultFencer serves the package-level functions; the default Config is
// always valid, so defaultErr is nil.
var defaultFencer, defaultErr = New(pgstore.Config{})

// Fence is [Fencer.Fence] on the default schema and prefix.
func Fence(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.Fence(ctx, q, resource, tok)
}

// FenceForeign is [Fencer.FenceForeign] on the default schema and prefix.
func FenceForeign(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.FenceForeign(ctx, q, resource, tok)
}

// CheckLease is [Fencer.CheckLease] on the default schema and prefix.
func CheckLease(ctx context.Context, q Querier, name string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.CheckLease(ctx, q, name, tok)
}

// CheckLeaseStrict is [Fencer.CheckLeaseStrict] on the default schema and
// prefix.
func CheckLeaseStrict(ctx context.Context, q Querier, c store.ChainWrite) (int64, error) {
	if defaultErr != nil {
		return 0, defaultErr
	}
	return defaultFencer.CheckLeaseStrict(ctx, q, c)
}

// StrictTx is [Fencer.StrictTx] on the default schema and prefix.
func StrictTx(ctx context.Context, db Beginner, l *tenure.Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.StrictTx(ctx, db, l, fn)
}

// Fence records tok as accepted by resource, in q's transaction: it passes
// when tok is equal to or greater than every token resource accepted
// before, and fails with a [*store.FencedError] (matching
// [store.ErrFenced]) carrying resource, tok and the recorded token when a
// greater one was recorded. A token the store's token sequence never
// issued (greater than its last value) fails with an error matching
// [fence.ErrNotIssued] and [store.ErrInvalid], and changes nothing: a
// fence takes only tokens of the leases in the same schema and prefix (for
// tokens of another store, see [Fencer.FenceForeign]). It locks the resource's fence row until the
// transaction ends, so fenced writes to one resource commit in token
// order; a transaction that rolls back leaves the fence as it was.
//
// resource is 1 to [store.MaxNameLen] bytes of UTF-8 without control
// characters ([fence.ValidateWrite]); tok must be positive (a [tenure.Lease] whose Token is 0 is no
// longer trusted: do not write). Bad input fails with [store.ErrInvalid]
// before anything is sent.
func (f *Fencer) Fence(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if err := validate(q, resource, tok); err != nil {
		return fmt.Errorf("pgfence: fence: %w", err)
	}
	_, err := q.Exec(ctx, f.fenceSQL, resource, int64(tok))
	return interpretError(fmt.Sprintf("fence %q", resource), resource, tok, err)
}

// FenceForeign is [Fencer.Fence] for tokens of another lease store (etcd,
// Consul, Redis): it accepts any positive token, since the database cannot
// know which tokens that store issued. The run-time role of
// [pgstore.Config.GrantSQL] may not call it; grant EXECUTE on the
// fence_foreign function by hand to the role of a resource whose leases
// live elsewhere, knowing that such a role can raise any fence of the
// prefix to any value.
func (f *Fencer) FenceForeign(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if err := validate(q, resource, tok); err != nil {
		return fmt.Errorf("pgfence: foreign fence: %w", err)
	}
	_, err := q.Exec(ctx, f.foreignSQL, resource, int64(tok))
	return interpretError(fmt.Sprintf("foreign fence %q", resource), resource, tok, err)
}

// Reset is the operator's repair of a poisoned fence (one that recorded a
// token so high that every legitimate writer is refused): it sets the
// fence of resource to tok, which may be 0 and at most the last token the
// store issued, and returns the token it replaced. The reset is recorded
// in the fence_resets table with the reason, the role that ran it
// (current_user and session_user) and the server's time. It runs as its
// caller: only the schema's owner (or a role granted EXECUTE on
// fence_reset and the privileges on the fences and fence_resets tables)
// may call it; the run-time role is refused with permission denied.
//
// reason must not be empty. A resource with no fence fails; so does a tok
// outside 0..issued ([fence.ErrNotIssued]).
func (f *Fencer) Reset(ctx context.Context, q Querier, resource string, tok store.Token, reason string) (store.Token, error) {
	if q == nil {
		return 0, fmt.Errorf("pgfence: reset fence: %w: querier is nil", store.ErrInvalid)
	}
	if err := store.ValidateText("resource", resource, store.MaxNameLen); err != nil {
		return 0, fmt.Errorf("pgfence: reset fence: %w", err)
	}
	if tok < 0 {
		return 0, fmt.Errorf("pgfence: reset fence %q: %w: token %d is negative; pass 0 or a token the store issued", resource, store.ErrInvalid, tok)
	}
	if strings.TrimSpace(reason) == "" {
		return 0, fmt.Errorf("pgfence: reset fence %q: %w: a reason is required; it is recorded with the reset", resource, store.ErrInvalid)
	}
	var old int64
	if err := q.QueryRow(ctx, f.resetSQL, resource, int64(tok), reason).Scan(&old); err != nil {
		return 0, interpretError(fmt.Sprintf("reset fence %q", resource), resource, tok, err)
	}
	return store.Token(old), nil
}

// CheckLease checks, in q's transaction, that lease name is held with tok
// by the server's clock. It fails with an error matching [store.ErrFenced]
// when it is not (absent, taken over, released or expired): errors.As finds
// a [*store.FencedError] with Resource "lease:"+name, Offered tok and
// Recorded the lease's current token (0 when the lease does not exist).
//
// It holds a share lock on the lease row until the transaction ends: a
// takeover, a release and the holder's own renewals wait for the commit,
// so the write is in before any new holder exists. Keep the transaction
// short next to the TTL.
func (f *Fencer) CheckLease(ctx context.Context, q Querier, name string, tok store.Token) error {
	if err := validate(q, name, tok); err != nil {
		return fmt.Errorf("pgfence: check lease: %w", err)
	}
	_, err := q.Exec(ctx, f.checkSQL, name, int64(tok))
	return interpretError(fmt.Sprintf("check lease %q", name), name, tok, err)
}

// CheckLeaseStrict is [Fencer.CheckLease] that also requires c's holder and
// renewal seq to match the store's, and advances the seq by one, so that of
// two byte-identical clones of one holder only one can ever pass: the
// other fails with an error matching [store.ErrFenced] (the chain moved
// on). It returns the advanced seq.
//
// Most callers want [Fencer.StrictTx], which does the bookkeeping. Calling
// this directly, pass a [tenure.ChainWrite] begun before the transaction
// and end it once the outcome is known: Commit(seq) after the commit
// succeeded, Abort() otherwise, including when the commit's outcome is
// unknown. Until then the holder's renewals that find the chain moved on
// wait for the write instead of taking it for a clone's.
//
// It locks the lease row until the transaction ends; renewals and
// takeovers of the lease wait for it, so keep the transaction short next
// to the TTL.
func (f *Fencer) CheckLeaseStrict(ctx context.Context, q Querier, c store.ChainWrite) (int64, error) {
	if q == nil {
		return 0, fmt.Errorf("pgfence: strict check: %w: querier is nil; pass the transaction that makes the write", store.ErrInvalid)
	}
	if err := store.ValidateChainWrite(c); err != nil {
		return 0, fmt.Errorf("pgfence: strict check: %w", err)
	}
	name, tok, h, seq := c.Name(), c.Token(), c.Holder(), c.Seq()
	var next int64
	err := q.QueryRow(ctx, f.strictSQL, name, int64(tok), h.Label, h.Instance, seq).Scan(&next)
	if err != nil {
		return 0, interpretError(fmt.Sprintf("strict check of lease %q", name), name, tok, err)
	}
	return next, nil
}

// StrictTx runs fn in a transaction begun on db after a strict check of l,
// commits it, and keeps l's renewal chain in step: the write waits for a
// renewal in flight, holds the next one back until it ends, and the client
// learns the new seq only once the commit succeeded. A rolled-back write
// therefore costs nothing; a commit whose outcome is unknown costs at most
// the tenure (the cheap side). fn's error rolls the transaction back and is
// returned as is; a refused check is the [store.ErrFenced] of
// [Fencer.CheckLeaseStrict]: stop working under this tenure.
func (f *Fencer) StrictTx(ctx context.Context, db Beginner, l *tenure.Lease, fn func(ctx context.Context, tx pgx.Tx) error) error {
	if db == nil || fn == nil {
		return fmt.Errorf("pgfence: strict transaction: %w: db, lease and fn are required", store.ErrInvalid)
	}
	return f.strict(ctx, l, func(ctx context.Context) (txn, error) {
		tx, err := db.Begin(ctx)
		if err != nil {
			return nil, err
		}
		return pgxTxn{tx}, nil
	}, func(ctx context.Context, tx txn) error { return fn(ctx, tx.(pgxTxn).Tx) })
}

// txn is a transaction the strict bookkeeping runs in: pgx's or
// database/sql's.
type txn interface {
	Querier
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
}

type pgxTxn struct{ pgx.Tx }

// strict is the bookkeeping of [Fencer.StrictTx] and [Fencer.StrictSQLTx]:
// begin a chain write, begin the transaction, check, run fn, commit, and
// tell the chain write how it ended.
func (f *Fencer) strict(ctx context.Context, l *tenure.Lease, begin func(context.Context) (txn, error), fn func(context.Context, txn) error) (err error) {
	if l == nil {
		return fmt.Errorf("pgfence: strict transaction: %w: db, lease and fn are required", store.ErrInvalid)
	}
	w, err := l.BeginChainWrite()
	if err != nil {
		return fmt.Errorf("pgfence: strict transaction on lease %q: %w", l.Name(), err)
	}
	committed := int64(0)
	defer func() {
		if committed > 0 {
			w.Commit(committed)
		} else {
			w.Abort()
		}
	}()
	tx, err := begin(ctx)
	if err != nil {
		return interpretError("begin strict transaction", w.Name(), w.Token(), err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }() // After Commit a no-op; after a failure the failure is the error to report.
	seq, err := f.CheckLeaseStrict(ctx, tx, w)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return interpretError("commit strict transaction", w.Name(), w.Token(), err)
	}
	committed = seq
	return nil
}

// validate checks what every helper gets: a querier, and a resource (or
// lease name) and token that pass [fence.ValidateWrite], the rule every
// fence applies.
func validate(q Querier, resource string, tok store.Token) error {
	if q == nil {
		return fmt.Errorf("%w: querier is nil; pass the transaction that makes the write", store.ErrInvalid)
	}
	return fence.ValidateWrite(resource, tok)
}
