package pgstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5/pgconn"
)

// interpretError is the one place where errors from pgx become tenure's
// errors. op names the call for the message ("acquire lease \"x\"").
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
//   - Any other server error is returned as it is, wrapped with op.
func interpretError(op string, err error) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("pgstore: %s: %w (it may have been applied): %w", op, store.ErrUnavailable, err)
	}
	switch code := pgErr.Code; {
	case code == "3F000" || code == "42P01" || code == "42703" || code == "42883":
		return fmt.Errorf("pgstore: %s: %w: run `tenure migrate` (or Store.Migrate) as the schema's owner: %w",
			op, store.ErrNotMigrated, err)
	case code == "42501":
		return fmt.Errorf("pgstore: %s: permission denied; the run-time role needs the grants Config.GrantSQL lists, and Migrate needs the schema's owner: %w", op, err)
	case code == "0A000" && strings.Contains(pgErr.Message, "cached plan must not change result type"):
		// A migration changed a table under a cached prepared statement;
		// pgx has dropped its cache, so the next call succeeds.
		return fmt.Errorf("pgstore: %s: %w: the schema changed under a cached statement; retry: %w", op, store.ErrUnavailable, err)
	case unavailableCode(code):
		return fmt.Errorf("pgstore: %s: %w (it may have been applied): %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// unavailableCode reports SQLSTATEs meaning "not now" rather than "never".
func unavailableCode(code string) bool {
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

// closedError is returned by calls on a closed store.
func closedError(op string) error {
	return fmt.Errorf("pgstore: %s on a closed store; create a new one with pgstore.New: %w", op, store.ErrClosed)
}
