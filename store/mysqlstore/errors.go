package mysqlstore

import (
	"errors"
	"fmt"

	"github.com/tenure-dev/tenure/store"

	"github.com/go-sql-driver/mysql"
)

// Server error numbers the classification knows.
const (
	erBadDB             = 1049 // unknown database
	erNoSuchTable       = 1146
	erSPDoesNotExist    = 1305 // procedure does not exist
	erProcAccessDenied  = 1370 // execute command denied
	erTableAccessDenied = 1142
	erDBAccessDenied    = 1044
	erAccessDenied      = 1045
	erNoSuchUser        = 1449 // the definer of a procedure does not exist
	erTooManyConns      = 1040
	erConCount          = 1203 // user has too many connections
	erServerShutdown    = 1053
	erLockWaitTimeout   = 1205
	erLockDeadlock      = 1213
	erQueryInterrupted  = 1317
	erOptionPrevents    = 1290 // --read-only
	erReadOnlyTx        = 1792
	erNeedReprepare     = 1615
	erConnectionKilled  = 1927 // MariaDB
	erStatementTimeout  = 1969 // MariaDB max_statement_time
	erQueryTimeout      = 3024 // MySQL max_execution_time
	erSignal            = 1644 // SIGNAL of a procedure
)

// SQLState returns the SQLSTATE of the server error in err's chain, or ""
// when there is none.
func SQLState(err error) string {
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.SQLState == [5]byte{} {
		return ""
	}
	return string(me.SQLState[:])
}

// Interpreter turns errors from go-sql-driver/mysql into tenure's errors
// for one package (mysqlstore, mysqlfence). Error is the one choke point:
//
//   - A missing database, table or procedure (errors 1049, 1146, 1305),
//     and a missing token counter row (SQLSTATE 55000), match
//     [store.ErrNotMigrated].
//   - Server errors that say the server cannot serve now (too many
//     connections, shutdown, lock wait timeout, deadlock, a query
//     interrupted or timed out, a read-only server, a connection killed, a
//     prepared statement to prepare again after a migration) and every
//     error that is not the server's (transport, a bad connection, context
//     deadline or cancellation) match [store.ErrUnavailable]: the call may
//     have been applied.
//   - Any other server error is returned as it is, wrapped with op.
type Interpreter struct {
	// Owner starts every message ("mysqlstore").
	Owner string
	// Migrate is the advice on a missing table or procedure.
	Migrate string
	// Grant is the advice on a denied command.
	Grant string
	// Unknown qualifies store.ErrUnavailable ("it may have been applied").
	Unknown string
}

// Error classifies err for the call op ("acquire lease \"x\""), keeping err
// in the chain.
func (in Interpreter) Error(op string, err error) error {
	if err == nil {
		return nil
	}
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return in.unavailable(op, err)
	}
	switch me.Number {
	case erBadDB, erNoSuchTable, erSPDoesNotExist:
		return fmt.Errorf("%s: %s: %w: %s: %w", in.Owner, op, store.ErrNotMigrated, in.Migrate, err)
	case erProcAccessDenied, erTableAccessDenied, erDBAccessDenied, erAccessDenied:
		return fmt.Errorf("%s: %s: permission denied; %s: %w", in.Owner, op, in.Grant, err)
	case erNoSuchUser:
		return fmt.Errorf("%s: %s: the account that ran the migration, the procedures' definer, no longer exists; run the migration again as an existing account after dropping the procedures, or recreate that account: %w",
			in.Owner, op, err)
	case erTooManyConns, erConCount, erServerShutdown, erLockWaitTimeout, erLockDeadlock, erQueryInterrupted,
		erOptionPrevents, erReadOnlyTx, erNeedReprepare, erConnectionKilled, erStatementTimeout, erQueryTimeout:
		return in.unavailable(op, err)
	}
	if me.Number == erSignal && SQLState(err) == "55000" {
		return fmt.Errorf("%s: %s: %w: the token counter row is missing (someone deleted it); insert it again with a value above every token ever handed out for this prefix: %w",
			in.Owner, op, store.ErrNotMigrated, err)
	}
	return fmt.Errorf("%s: %s: %w", in.Owner, op, err)
}

func (in Interpreter) unavailable(op string, err error) error {
	q := ""
	if in.Unknown != "" {
		q = " (" + in.Unknown + ")"
	}
	return fmt.Errorf("%s: %s: %w%s: %w", in.Owner, op, store.ErrUnavailable, q, err)
}

// errs is the store's own classification.
var errs = Interpreter{
	Owner:   "mysqlstore",
	Migrate: "run `tenure migrate` (or Store.Migrate) as an account that may create tables and procedures",
	Grant:   "the run-time account needs the grants Config.GrantSQL lists, and Migrate needs the rights to create and alter tables and procedures",
	Unknown: "it may have been applied",
}

// interpretError classifies err for the call op.
func interpretError(op string, err error) error { return errs.Error(op, err) }
