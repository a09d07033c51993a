package pgadvisory

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/tenure-dev/tenure/store"

	"github.com/jackc/pgx/v5"

	"github.com/tenure-dev/tenure/internal/pgkit"
)

// MaxKeyLen is the longest key, in bytes.
const MaxKeyLen = 255

// closeTimeout bounds the close of a connection whose session may hold a
// lock.
const closeTimeout = 5 * time.Second

// trySQL takes the lock if it is free and otherwise reports a backend that
// holds it (0 when it was released in between), in one round trip. The
// CTE is evaluated once, before the select list.
const trySQL = `WITH l AS MATERIALIZED (SELECT %s($1::bigint) AS got)
SELECT got, CASE WHEN got THEN 0 ELSE coalesce((
	SELECT pid FROM pg_catalog.pg_locks
	WHERE locktype = 'advisory' AND granted AND objsubid = 1
	  AND database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = current_database())
	  AND classid = (($1::bigint >> 32) & 4294967295)::oid
	  AND objid = ($1::bigint & 4294967295)::oid
	  AND pid <> pg_backend_pid()
	LIMIT 1), 0) END
FROM l`

var (
	trySessionSQL = fmt.Sprintf(trySQL, "pg_try_advisory_lock")
	tryXactSQL    = fmt.Sprintf(trySQL, "pg_try_advisory_xact_lock")
)

// ID returns the bigint PostgreSQL locks for key: the first 8 bytes of
// SHA-256 of key, big-endian, as a two's-complement int64. The package
// documentation shows the same computation in SQL.
func ID(key string) int64 {
	sum := sha256.Sum256([]byte(key))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// HeldError reports a lock held by another session.
type HeldError struct {
	// Key is the key asked for, ID its lock id.
	Key string
	ID  int64
	// PID is the backend process id of a session holding the lock, or 0
	// when it could not be told (the holder released it in between, or a
	// lock_timeout ran out while waiting).
	PID uint32
}

func (e *HeldError) Error() string {
	if e.PID == 0 {
		return fmt.Sprintf("pgadvisory: lock %q (id %d) is held by another session", e.Key, e.ID)
	}
	return fmt.Sprintf("pgadvisory: lock %q (id %d) is held by backend pid %d; if that session is stuck, only pg_terminate_backend(%d) frees it",
		e.Key, e.ID, e.PID, e.PID)
}

// Is matches [store.ErrHeld].
func (e *HeldError) Is(target error) bool { return target == store.ErrHeld }

// Guard is a session advisory lock held on one connection. It carries no
// token: see the package documentation for why. Create it with [TryLock] or
// [Lock]; end it with [Guard.Unlock].
type Guard struct {
	conn *pgx.Conn
	key  string
	id   int64

	mu   sync.Mutex
	held bool
}

// Key returns the key the guard was taken with.
func (g *Guard) Key() string { return g.key }

// ID returns the lock id PostgreSQL holds, [ID] of the key.
func (g *Guard) ID() int64 { return g.id }

// TryLock takes the session advisory lock for key on conn if no other
// session holds it, and returns a [*HeldError] (matching [store.ErrHeld])
// at once if one does. It does not wait. If it cannot tell whether it got
// the lock, it closes conn (see the package documentation).
func TryLock(ctx context.Context, conn *pgx.Conn, key string) (*Guard, error) {
	const op = "try lock"
	if err := validate(conn == nil, "connection", key); err != nil {
		return nil, fmt.Errorf("pgadvisory: %s: %w", op, err)
	}
	if err := notAttempted(ctx, op, key); err != nil {
		return nil, err
	}
	id := ID(key)
	var got bool
	var pid int32
	if err := conn.QueryRow(ctx, trySessionSQL, id).Scan(&got, &pid); err != nil {
		return nil, sessionError(ctx, conn, op, key, err)
	}
	if !got {
		return nil, &HeldError{Key: key, ID: id, PID: uint32(pid)}
	}
	return &Guard{conn: conn, key: key, id: id, held: true}, nil
}

// Lock takes the session advisory lock for key on conn, waiting for other
// sessions to release it until ctx ends. When ctx ends first, Lock returns
// an error matching ctx's and conn is closed (pgx closes a connection whose
// context ends mid-statement, and Lock closes it otherwise): the server
// process stops waiting when it notices, at the latest when it gets the
// lock, which it then releases at once. A lock_timeout set on the session
// bounds the wait too, and leaves conn open: the error is then a
// [*HeldError] with PID 0.
func Lock(ctx context.Context, conn *pgx.Conn, key string) (*Guard, error) {
	const op = "lock"
	if err := validate(conn == nil, "connection", key); err != nil {
		return nil, fmt.Errorf("pgadvisory: %s: %w", op, err)
	}
	if err := notAttempted(ctx, op, key); err != nil {
		return nil, err
	}
	id := ID(key)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1::bigint)", id); err != nil {
		return nil, sessionError(ctx, conn, op, key, err)
	}
	return &Guard{conn: conn, key: key, id: id, held: true}, nil
}

// Unlock releases the lock. A second call fails with an error matching
// [store.ErrNotHeld], and so does a call after something else on the
// session released the lock (DISCARD ALL, pg_advisory_unlock_all): the
// work the guard was meant to cover may then have run unguarded.
//
// When the server cannot be told, Unlock closes the connection and returns
// an error matching [store.ErrUnavailable]: the server releases the lock
// when it notices the session ended, at once when the connection is
// intact, only after TCP keepalive when the network is cut.
func (g *Guard) Unlock(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		return fmt.Errorf("pgadvisory: unlock %q: %w: it was already unlocked", g.key, store.ErrNotHeld)
	}
	g.held = false
	var released bool
	err := g.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1::bigint)", g.id).Scan(&released)
	if err != nil {
		closeConn(ctx, g.conn)
		return fmt.Errorf("pgadvisory: unlock %q: %w: closed the connection, which releases the lock once the server notices: %w",
			g.key, store.ErrUnavailable, err)
	}
	if !released {
		return fmt.Errorf("pgadvisory: unlock %q: %w: the session no longer held it; something on this connection released it (DISCARD ALL, pg_advisory_unlock_all), so the guarded work may have run unguarded",
			g.key, store.ErrNotHeld)
	}
	return nil
}

// TryXactLock takes the transaction advisory lock for key in tx if no other
// session holds it, and returns a [*HeldError] (matching [store.ErrHeld])
// at once if one does. PostgreSQL releases the lock when tx commits or
// rolls back; there is nothing to unlock. After any other error tx is
// aborted: roll it back.
func TryXactLock(ctx context.Context, tx pgx.Tx, key string) error {
	const op = "try transaction lock"
	if err := validate(tx == nil, "transaction", key); err != nil {
		return fmt.Errorf("pgadvisory: %s: %w", op, err)
	}
	if err := notAttempted(ctx, op, key); err != nil {
		return err
	}
	id := ID(key)
	var got bool
	var pid int32
	if err := tx.QueryRow(ctx, tryXactSQL, id).Scan(&got, &pid); err != nil {
		return interpretError(op, key, err)
	}
	if !got {
		return &HeldError{Key: key, ID: id, PID: uint32(pid)}
	}
	return nil
}

// XactLock takes the transaction advisory lock for key in tx, waiting for
// other sessions to release it until ctx ends (or the session's
// lock_timeout runs out: a [*HeldError] with PID 0). PostgreSQL releases
// the lock when tx commits or rolls back. After any error tx is aborted:
// roll it back.
func XactLock(ctx context.Context, tx pgx.Tx, key string) error {
	const op = "transaction lock"
	if err := validate(tx == nil, "transaction", key); err != nil {
		return fmt.Errorf("pgadvisory: %s: %w", op, err)
	}
	if err := notAttempted(ctx, op, key); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1::bigint)", ID(key)); err != nil {
		return interpretError(op, key, err)
	}
	return nil
}

func validate(nilConn bool, what, key string) error {
	switch {
	case nilConn:
		return fmt.Errorf("%w: %s is nil", store.ErrInvalid, what)
	case key == "":
		return fmt.Errorf("%w: key is empty; name the work the lock guards (e.g. \"billing: schema migrations\")", store.ErrInvalid)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes long; the maximum is %d", store.ErrInvalid, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: key %q is not valid UTF-8", store.ErrInvalid, key)
	}
	return nil
}

// notAttempted refuses a call whose context is already done, before
// anything is sent.
func notAttempted(ctx context.Context, op, key string) error {
	if err := ctx.Err(); err != nil {
		return errs.NotAttempted(fmt.Sprintf("%s %q", op, key), err)
	}
	return nil
}

// sessionError interprets a failed session lock call and closes conn unless
// the server's error shows that the lock was not taken.
func sessionError(ctx context.Context, conn *pgx.Conn, op, key string, err error) error {
	if !notTaken(err) {
		closeConn(ctx, conn)
		return fmt.Errorf("%w (closed the connection: its session might hold the lock)", interpretError(op, key, err))
	}
	return interpretError(op, key, err)
}

// notTaken reports server errors raised before the lock could be granted:
// the statement never ran (a failed transaction, a parse, plan or
// permission error) or the wait was given up (lock_timeout, deadlock).
func notTaken(err error) bool {
	switch code := pgkit.Code(err); {
	case code == "25P02", code == "55P03", code == "40P01":
		return true
	case len(code) == 5 && code[:2] == "42":
		return true
	}
	return false
}

// errs classifies what is not pgadvisory's own. The package keeps no
// objects, so no error means "not migrated".
var errs = pgkit.Interpreter{Owner: "pgadvisory"}

// interpretError is the one place where errors from pgx become tenure's
// errors: a lock_timeout is the lock held by another session, a failed
// transaction must be rolled back, and the rest is [pgkit.Interpreter.Error]
// (transport errors and "not now" SQLSTATEs match [store.ErrUnavailable]).
func interpretError(op, key string, err error) error {
	switch pgkit.Code(err) {
	case "55P03":
		// lock_timeout ran out while waiting: another session holds it.
		return fmt.Errorf("%w (lock_timeout ran out while waiting)", &HeldError{Key: key, ID: ID(key)})
	case "25P02":
		return fmt.Errorf("pgadvisory: %s %q: the transaction had already failed; roll it back and start again: %w", op, key, err)
	}
	return errs.Error(fmt.Sprintf("%s %q", op, key), err)
}

// closeConn ends conn's session, which releases every session lock it
// holds. It must run even when ctx has ended.
func closeConn(ctx context.Context, conn *pgx.Conn) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), closeTimeout)
	defer cancel()
	_ = conn.Close(cctx) // Close always closes the socket; its error only says the goodbye was not sent.
}
