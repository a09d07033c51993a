package pgfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenure-dev/tenure"
)

// SQLQuerier is what the helpers need of a database/sql connection: *sql.Tx,
// *sql.Conn and *sql.DB satisfy it, and so do the wrappers of sqlx and the
// *sql.Tx underneath GORM or ent. Wrap it with [SQL].
//
// The connection must come from pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib: sql.Open("pgx", url), stdlib.OpenDB or
// stdlib.OpenDBFromPool), which passes the server's *pgconn.PgError
// through: that is how the fence functions' refusals (SQLSTATE TF001,
// TF002, TF003) become [store.ErrFenced]. With another driver a refusal is
// still an error, but is not classified.
type SQLQuerier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

var (
	_ SQLQuerier = (*sql.Tx)(nil)
	_ SQLQuerier = (*sql.Conn)(nil)
	_ SQLQuerier = (*sql.DB)(nil)
)

// SQL adapts a database/sql transaction (or connection) to [Querier], so
// that [Fence], [CheckLease], [CheckLeaseStrict] and their [Fencer] methods
// run in it, with the same SQL and the same errors:
//
//	tx, err := db.BeginTx(ctx, nil) // db opened with pgx's stdlib driver
//	...
//	if err := pgfence.Fence(ctx, pgfence.SQL(tx), "invoices", lease.Token()); err != nil {
//		return err // errors.Is(err, store.ErrFenced): superseded; stop
//	}
//
// The adapter's Exec returns an empty command tag. SQL(nil) is nil, which
// the helpers refuse with [store.ErrInvalid].
func SQL(q SQLQuerier) Querier {
	if q == nil {
		return nil
	}
	return sqlQuerier{q}
}

type sqlQuerier struct{ q SQLQuerier }

func (s sqlQuerier) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	_, err := s.q.ExecContext(ctx, query, args...)
	return pgconn.CommandTag{}, err
}

func (s sqlQuerier) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return s.q.QueryRowContext(ctx, query, args...)
}

// SQLBeginner starts database/sql transactions: *sql.DB and *sql.Conn do.
type SQLBeginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

var (
	_ SQLBeginner = (*sql.DB)(nil)
	_ SQLBeginner = (*sql.Conn)(nil)
)

// StrictSQLTx is [Fencer.StrictSQLTx] on the default schema and prefix.
func StrictSQLTx(ctx context.Context, db SQLBeginner, l *tenure.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if defaultErr != nil {
		return defaultErr
	}
	return defaultFencer.StrictSQLTx(ctx, db, l, fn)
}

// StrictSQLTx is [Fencer.StrictTx] for database/sql: it begins the
// transaction on db with default options, checks l strictly in it, runs fn
// with it and commits, keeping l's renewal chain in step exactly as
// StrictTx does. db must use pgx's stdlib driver (see [SQLQuerier]).
func (f *Fencer) StrictSQLTx(ctx context.Context, db SQLBeginner, l *tenure.Lease, fn func(ctx context.Context, tx *sql.Tx) error) error {
	if db == nil || fn == nil {
		return fmt.Errorf("pgfence: strict transaction: %w: db, lease and fn are required", store.ErrInvalid)
	}
	return f.strict(ctx, l, func(ctx context.Context) (txn, error) {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		return sqlTxn{sqlQuerier{tx}, tx}, nil
	}, func(ctx context.Context, tx txn) error { return fn(ctx, tx.(sqlTxn).tx) })
}

// sqlTxn is a database/sql transaction as a [txn]. database/sql binds a
// transaction's context at BeginTx, so Commit and Rollback ignore theirs.
type sqlTxn struct {
	sqlQuerier
	tx *sql.Tx
}

func (t sqlTxn) Commit(context.Context) error   { return t.tx.Commit() }
func (t sqlTxn) Rollback(context.Context) error { return t.tx.Rollback() }
