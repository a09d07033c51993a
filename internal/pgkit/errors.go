package pgkit

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgconn"
)

// Interpreter turns errors from pgx (or from database/sql over pgx's stdlib
// driver, which passes the same *pgconn.PgError through) into tenure's
// errors for one package. It is the classification every package used to
// write for itself; a package with errors of its own (the fence functions'
// SQLSTATEs, a lock_timeout that means "held") handles those first and
// hands the rest to [Interpreter.Error].
type Interpreter struct {
	// Owner starts every message ("pgstore").
	Owner string
	// Migrate is the advice on a missing schema, table, column or function
	// ("run `tenure migrate` (or Store.Migrate) as the schema's owner").
	// Empty: the package keeps no objects of its own, and those SQLSTATEs
	// are ordinary errors.
	Migrate string
	// Grant is the advice on permission denied (42501) ("grant the
	// run-time role what Config.GrantSQL prints"). Empty: none.
	Grant string
	// Unknown qualifies store.ErrUnavailable ("it may have been applied").
	// Empty: none.
	Unknown string
}

// Error classifies err for the call op ("acquire lease \"x\""), keeping err
// in the chain:
//
//   - Missing schema, tables, columns or functions (SQLSTATE 3F000, 42P01,
//     42703, 42883) match [store.ErrNotMigrated], when [Interpreter.Migrate]
//     is set.
//   - A connection that could not be made, or an error pgx guarantees came
//     before anything was sent ([pgconn.SafeToRetry]), matches
//     [store.ErrUnavailable] and says that nothing was applied.
//   - Server-side errors that say the server cannot serve now ([Unavailable])
//     and every other error that is not the server's (transport, context
//     deadline or cancellation) match [store.ErrUnavailable]: the call may
//     have been applied.
//   - A cached statement invalidated by a migration matches
//     [store.ErrUnavailable] too: pgx drops its cache and a retry succeeds.
//   - Any other server error is returned as it is, wrapped with op.
func (in Interpreter) Error(op string, err error) error {
	if err == nil {
		return nil
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) || pgconn.SafeToRetry(err) {
		// No connection, or nothing sent on it: the call was not applied,
		// whatever Unknown says of calls that reached the server.
		return fmt.Errorf("%s: %s: %w (nothing was sent, so nothing was applied): %w", in.Owner, op, store.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return in.unavailable(op, "", err)
	}
	switch code := pgErr.Code; {
	case in.Migrate != "" && NotMigrated(code):
		return fmt.Errorf("%s: %s: %w: %s: %w", in.Owner, op, store.ErrNotMigrated, in.Migrate, err)
	case code == "42501" && in.Grant != "":
		return fmt.Errorf("%s: %s: permission denied; %s: %w", in.Owner, op, in.Grant, err)
	case code == "0A000" && strings.Contains(pgErr.Message, "cached plan must not change result type"):
		// A migration changed a table under a cached prepared statement;
		// pgx has dropped its cache, so the next call succeeds.
		return in.unavailable(op, "the schema changed under a cached statement; retry", err)
	case Unavailable(code):
		return in.unavailable(op, "", err)
	}
	return fmt.Errorf("%s: %s: %w", in.Owner, op, err)
}

func (in Interpreter) unavailable(op, why string, err error) error {
	q := ""
	if in.Unknown != "" {
		q = " (" + in.Unknown + ")"
	}
	if why != "" {
		q += ": " + why
	}
	return fmt.Errorf("%s: %s: %w%s: %w", in.Owner, op, store.ErrUnavailable, q, err)
}

// NotAttempted is the error of a call refused before anything was sent
// because its context was already done (err is ctx.Err()). It matches
// [store.ErrUnavailable] and err.
func (in Interpreter) NotAttempted(op string, err error) error {
	return fmt.Errorf("%s: %s not attempted: %w: %w", in.Owner, op, store.ErrUnavailable, err)
}

// NotMigrated reports the SQLSTATEs of a missing schema (3F000), table
// (42P01), column (42703) or function (42883).
func NotMigrated(code string) bool {
	switch code {
	case "3F000", "42P01", "42703", "42883":
		return true
	}
	return false
}

// Unavailable reports SQLSTATEs meaning "not now" rather than "never".
func Unavailable(code string) bool {
	if len(code) != 5 {
		return false
	}
	switch code[:2] {
	case "08", // connection exception
		"40", // transaction rollback: serialization failure, deadlock
		"53", // insufficient resources: too many connections, out of memory, disk full
		"57", // operator intervention: shutdown, terminated, query cancelled (statement_timeout)
		"58": // system error
		return true
	}
	switch code {
	case "25006", // read_only_sql_transaction: connected to a standby, e.g. mid-failover
		"55P03": // lock_not_available: lock_timeout ran out
		return true
	}
	return false
}

// Code returns the SQLSTATE of the server error in err's chain, or "" when
// there is none.
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
