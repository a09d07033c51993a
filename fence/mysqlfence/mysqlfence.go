package mysqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tenure-dev/tenure/store"

	"github.com/tenure-dev/tenure"
	"github.com/tenure-dev/tenure/fence"
	"github.com/tenure-dev/tenure/store/mysqlstore"
)

// Querier is what the helpers need of a connection: *sql.Tx, *sql.Conn
// and *sql.DB satisfy it, and so do the wrappers of sqlx and the *sql.Tx
// underneath GORM or ent. Pass the transaction that makes the protected
// write, so the check and the write commit or roll back together. It must
// come from github.com/go-sql-driver/mysql, whose errors carry the
// SQLSTATE the procedures raise.
type Querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ Querier = (*sql.Tx)(nil)
	_ Querier = (*sql.Conn)(nil)
	_ Querier = (*sql.DB)(nil)
)

// Beginner starts transactions: *sql.DB and *sql.Conn do.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ Beginner = (*sql.DB)(nil)
	_ Beginner = (*sql.Conn)(nil)
)

var _ store.ChainWrite = (*tenure.ChainWrite)(nil)

// Fencer calls the fence procedures of one database and table prefix. Its
// methods are safe for concurrent use. The package-level functions use the
// default one (the connection's database, prefix tenure_).
type Fencer struct {
	fenceSQL, checkSQL, strictSQL string
}

// New returns a Fencer for the procedures that [mysqlstore.Store.Migrate]
// installed for cfg. A cfg that [mysqlstore.New] would refuse is refused
// the same way.
func New(cfg mysqlstore.Config) (*Fencer, error) {
	obj, err := cfg.Objects()
	if err != nil {
		return nil, err
	}
	return &Fencer{
		fenceSQL:  "CALL " + obj.Ident(obj.FenceProc) + "(?, ?)",
		checkSQL:  "CALL " + obj.Ident(obj.CheckLeaseProc) + "(?, ?)",
		strictSQL: "CALL " + obj.Ident(obj.CheckLeaseStrictProc) + "(?, ?, ?, ?, ?)",
	}, nil
}

// defaultFencer serves the package-level functions; the default Config is
// always valid, so defaultErr is nil.
var defaultFencer, defaultErr = New(mysqlstore.Config{})

// Fence is [Fencer.Fence] with the default prefix.
func Fence(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.Fence(ctx, q, resource, tok)
}

// CheckLease is [Fencer.CheckLease] with the default prefix.
func CheckLease(ctx context.Context, q Querier, name string, tok store.Token) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.CheckLease(ctx, q, name, tok)
}

// CheckLeaseStrict is [Fencer.CheckLeaseStrict] with the default prefix.
func CheckLeaseStrict(ctx context.Context, q Querier, c store.ChainWrite) (int64, error) {
	if defaultErr != nil {
		return 0, defaultErr
	}
	return defaultFencer.CheckLeaseStrict(ctx, q, c)
}

// StrictTx is [Fencer.StrictTx] with the default prefix.
func StrictTx(ctx context.Context, db Beginner, l *tenure.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.StrictTx(ctx, db, l, fn)
}

// Fence records tok as accepted by resource, in q's transaction: it passes
// when tok is equal to or greater than every token resource accepted
// before, and fails with a [*store.FencedError] (matching
// [store.ErrFenced]) carrying resource, tok and the recorded token when a
// greater one was recorded. It locks the resource's fence row until the
// transaction ends, so fenced writes to one resource commit in token
// order; a transaction that rolls back leaves the fence as it was.
//
// resource is 1 to [store.MaxNameLen] bytes of UTF-8 without control
// characters ([fence.ValidateWrite]); tok must be positive (a [tenure.Lease]
// whose Token is 0 is no longer trusted: do not write). Bad input fails
// with [store.ErrInvalid] before anything is sent.
func (f *Fencer) Fence(ctx context.Context, q Querier, resource string, tok store.Token) error {
	if err := validate(q, resource, tok); err != nil {
		return fmt.Errorf("mysqlfence: fence: %w", err)
	}
	_, err := q.ExecContext(ctx, f.fenceSQL, resource, int64(tok))
	return interpretError(fmt.Sprintf("fence %q", resource), resource, tok, err)
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
		return fmt.Errorf("mysqlfence: check lease: %w", err)
	}
	_, err := q.ExecContext(ctx, f.checkSQL, name, int64(tok))
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
// unknown.
//
// It locks the lease row exclusively until the transaction ends; renewals
// and takeovers of the lease wait for it, so keep the transaction short
// next to the TTL.
func (f *Fencer) CheckLeaseStrict(ctx context.Context, q Querier, c store.ChainWrite) (int64, error) {
	if q == nil {
		return 0, fmt.Errorf("mysqlfence: strict check: %w: querier is nil; pass the transaction that makes the write", store.ErrInvalid)
	}
	if err := store.ValidateChainWrite(c); err != nil {
		return 0, fmt.Errorf("mysqlfence: strict check: %w", err)
	}
	name, tok, h, seq := c.Name(), c.Token(), c.Holder(), c.Seq()
	var next int64
	err := q.QueryRowContext(ctx, f.strictSQL, name, int64(tok), h.Label, h.Instance, seq).Scan(&next)
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
func (f *Fencer) StrictTx(ctx context.Context, db Beginner, l *tenure.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db == nil || fn == nil || l == nil {
		return fmt.Errorf("mysqlfence: strict transaction: %w: db, lease and fn are required", store.ErrInvalid)
	}
	w, err := l.BeginChainWrite()
	if err != nil {
		return fmt.Errorf("mysqlfence: strict transaction on lease %q: %w", l.Name(), err)
	}
	committed := int64(0)
	defer func() {
		if committed > 0 {
			w.Commit(committed)
		} else {
			w.Abort()
		}
	}()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return interpretError("begin strict transaction", w.Name(), w.Token(), err)
	}
	defer func() { _ = tx.Rollback() }() // After Commit a no-op; after a failure the failure is the error to report.
	seq, err := f.CheckLeaseStrict(ctx, tx, w)
	if err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
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
