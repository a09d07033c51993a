package pgstore

import (
	"github.com/tenure-dev/tenure/internal/pgkit"
)

// errs is the one place where errors from pgx become tenure's errors
// ([pgkit.Interpreter.Error]):
//
//   - Missing schema, tables, columns or functions (SQLSTATE 3F000, 42P01,
//     42703, 42883) match [store.ErrNotMigrated].
//   - Server-side errors that say the server cannot serve now (connection
//     exceptions, shutdown, query cancelled by a timeout, too many
//     connections, a read-only standby, serialization failures and
//     deadlocks) and every error that is not the server's (transport,
//     context deadline or cancellation) match [store.ErrUnavailable]: the
//     call may have been applied.
//   - A cached statement invalidated by a migration matches
//     [store.ErrUnavailable] too: pgx drops its cache and a retry succeeds.
//   - Any other server error is returned as it is, wrapped with op; a
//     prepared statement missing on the server (26000) or already there
//     (42P05) says what it means through a pooler in transaction mode.
var errs = pgkit.Interpreter{
	Owner:   "pgstore",
	Migrate: "run `tenure migrate` (or Store.Migrate) as the schema's owner",
	Grant:   "the run-time role needs the grants Config.GrantSQL lists, and Migrate needs the schema's owner",
	Unknown: "it may have been applied",
}

// interpretError classifies err for the call op ("acquire lease \"x\"").
func interpretError(op string, err error) error { return errs.Error(op, poolerHint(err)) }
