package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/tenure-dev/tenure/store"
)

// PoolerError is what [Store.CheckPooler] returns when the pool's
// connections go through a connection pooler (PgBouncer or its like) and
// the store is not set up for one in transaction mode. It matches
// [store.ErrInvalid].
type PoolerError struct {
	// ClientPID is the backend pid the connection was given when it
	// logged in, ServerPID the one the server reports: a pooler hands out
	// a pid of its own making.
	ClientPID, ServerPID uint32
	// Mode is the pool's DefaultQueryExecMode when a pooler in
	// transaction mode cannot pass it (QueryExecModeCacheStatement, pgx's
	// default, and QueryExecModeDescribeExec); zero when it can.
	Mode pgx.QueryExecMode
	// Listen reports that [Config] has neither ListenConfig nor NoListen,
	// so [Store.Listen] would LISTEN through the pooler.
	Listen bool
}

func (e *PoolerError) Error() string {
	var need []string
	if e.Mode != 0 {
		need = append(need, fmt.Sprintf("its DefaultQueryExecMode (%s) prepares named statements, which a pooler in transaction mode loses between transactions: set it to QueryExecModeExec, QueryExecModeSimpleProtocol or QueryExecModeCacheDescribe (default_query_exec_mode=exec in the pool's URL)", e.Mode))
	}
	if e.Listen {
		need = append(need, "Listen would LISTEN through the pooler, which in transaction mode hands the session to another client after each statement: set Config.ListenConfig to a direct connection to the server (through a pooler in session mode, the pool's own will do), or Config.NoListen to wait for expiries without notifications")
	}
	return fmt.Sprintf("pgstore: %v: the pool's connections go through a connection pooler such as PgBouncer (the server's backend pid %d is not the %d the connection was given): %s",
		store.ErrInvalid, e.ServerPID, e.ClientPID, strings.Join(need, "; and "))
}

// Is reports whether target is [store.ErrInvalid].
func (e *PoolerError) Is(target error) bool { return target == store.ErrInvalid }

// errNoListen is what Listen returns with Config.NoListen.
var errNoListen = fmt.Errorf("pgstore: listen: %w: Config.NoListen is set: the store announces releases and acquisitions, but this process does not listen; followers try again at the expiries they are told", store.ErrInvalid)

// CheckPooler asks the server, in one round trip on one of the pool's
// connections, whether that connection is the server's own session or a
// connection pooler's (PgBouncer and its like hand the client a backend
// pid of their own making). Through a pooler it returns a [*PoolerError]
// unless the store is set up for one in transaction mode: the pool's
// DefaultQueryExecMode prepares no named statement (QueryExecModeExec,
// QueryExecModeSimpleProtocol or QueryExecModeCacheDescribe), and
// [Config.ListenConfig] or [Config.NoListen] keeps LISTEN off the pooled
// connections. Call it once after [New] when the pool's URL may name a
// pooler; the tenure command calls it when it opens a store. Other
// errors are the server's, classified as every call's.
func (s *Store) CheckPooler(ctx context.Context) error {
	if err := s.begin(ctx, "check pooler"); err != nil {
		return err
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return interpretError("check pooler", err)
	}
	defer conn.Release()
	client, server, err := backendPIDs(ctx, conn.Conn())
	if err != nil {
		return interpretError("check pooler", err)
	}
	if client == server {
		return nil
	}
	e := &PoolerError{ClientPID: client, ServerPID: server, Listen: s.listenConfig == nil && !s.noListen}
	switch mode := s.pool.Config().ConnConfig.DefaultQueryExecMode; mode {
	case pgx.QueryExecModeCacheStatement, pgx.QueryExecModeDescribeExec:
		e.Mode = mode
	}
	if e.Mode == 0 && !e.Listen {
		return nil
	}
	return e
}

// backendPIDs returns the backend pid conn was given at login and the one
// the server reports: they differ when a pooler stands between.
func backendPIDs(ctx context.Context, conn *pgx.Conn) (client, server uint32, err error) {
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&server); err != nil {
		return 0, 0, err
	}
	return conn.PgConn().PID(), server, nil
}

// pooledListen returns a [*PoolerError] when LISTEN on the pool's
// connections would go through a pooler, nil when it would not.
func (s *Store) pooledListen(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return interpretError("listen", err)
	}
	defer conn.Release()
	client, server, err := backendPIDs(ctx, conn.Conn())
	if err != nil {
		return interpretError("listen", err)
	}
	if client != server {
		return fmt.Errorf("pgstore: listen: %w", &PoolerError{ClientPID: client, ServerPID: server, Listen: true})
	}
	return nil
}

// poolerHint adds to err, a prepared statement missing on the server
// (26000) or in the way of the connection's own (42P05), what it means
// when the pool goes through a pooler in transaction mode; other errors
// it returns unchanged.
func poolerHint(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || (pgErr.Code != "26000" && pgErr.Code != "42P05") {
		return err
	}
	return fmt.Errorf("%w (a connection pooler in transaction mode, such as PgBouncer, loses prepared statements between transactions: set the pool's DefaultQueryExecMode to QueryExecModeExec, default_query_exec_mode=exec in its URL; Store.CheckPooler tells)", err)
}
