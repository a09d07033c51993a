// Package pgadvisory guards a short piece of work on one PostgreSQL
// connection with an advisory lock: a schema migration run by whichever
// instance of a service starts first, with the others waiting or skipping.
//
//	conn, err := pgx.Connect(ctx, url) // or pc.Conn() of a pgxpool.Conn you hold
//	g, err := pgadvisory.Lock(ctx, conn, "billing: schema migrations")
//	if err != nil {
//		return err
//	}
//	defer g.Unlock(ctx)
//	_, err = conn.Exec(ctx, migrationSQL) // on the same connection
//
// Inside a transaction, [XactLock] and [TryXactLock] take a lock that
// PostgreSQL releases at commit or rollback; DDL in that same transaction is
// the safest use of all:
//
//	tx, err := conn.Begin(ctx)
//	defer tx.Rollback(ctx)
//	if err := pgadvisory.XactLock(ctx, tx, "billing: schema migrations"); err != nil {
//		return err
//	}
//	// CREATE TABLE ..., INSERT INTO schema_version ...
//	return tx.Commit(ctx)
//
// # Not a lease, and no token
//
// This package is deliberately not a [store.Store] and hands out no
// fencing token, because an advisory lock has neither an expiry nor a
// counter:
//
//   - Its lifetime is the connection's, and a connection's lifetime is not
//     an expiry. A process that is wedged, paused or deadlocked but whose
//     connection stays up holds the lock forever; nothing on the server
//     takes it away until someone runs pg_terminate_backend on its backend.
//     A process cut off by the network holds it until the server's TCP
//     keepalive notices, which by default takes hours.
//   - Nothing counts acquisitions, so nothing can tell the resource that a
//     holder was superseded (promise P4 has nothing to check). A client
//     whose session died may still believe it holds the lock, and go on.
//
// So it must only guard work that runs on the same session as the lock:
// statements on the connection that holds a session lock, or in the
// transaction that holds a transaction lock. If that session ends, the lock
// goes, but so does the session's ability to do the work: the guarded
// statements fail instead of running unguarded. Work anywhere else (another
// connection, another service, a file, an API) is not protected by it; run
// that under a lease from a real [store.Store] and fence it.
//
// # Keys
//
// A lock is named by a string key, hashed to the bigint PostgreSQL locks
// ([ID]): the first 8 bytes of SHA-256 of the key's UTF-8 bytes, read as a
// big-endian two's-complement int64. The same id in SQL, for psql or another
// language:
//
//	('x' || left(encode(sha256(convert_to(key, 'UTF8')), 'hex'), 16))::bit(64)::bigint
//
// Advisory locks belong to one database: the same key in two databases is
// two locks. Other software locking bigints in the same database (migration
// tools pick their own ids) shares the id space; a 64-bit hash makes an
// accidental collision with them unlikely but not impossible.
//
// # Sessions
//
// A session lock ([TryLock], [Lock]) lives on one session, so the
// connection must be one session: pass a *pgx.Conn, never a pool. With a
// pool, acquire a connection, pass its Conn(), and release it to the pool
// only after [Guard.Unlock]. Anything that resets the session (DISCARD ALL,
// pg_advisory_unlock_all) releases the lock behind the [Guard]'s back;
// Unlock then reports [store.ErrNotHeld].
//
// PostgreSQL counts: a session that locks a key twice holds it until it
// unlocks it twice. Each Guard unlocks once.
//
// Whenever a call cannot tell whether the session holds the lock (the
// connection broke mid-call, the context ended while waiting, the server
// cancelled the statement), it closes the connection: a session that might
// hold a lock nobody will release must end, and ending it releases the
// lock. Losing a connection is the cheap side (promise P9).
//
// # Errors
//
//   - A lock held by another session: a [*HeldError] matching
//     [store.ErrHeld], naming the holder's backend pid when it can.
//   - Bad input (nil connection or transaction, empty key): an error
//     matching [store.ErrInvalid]; nothing is sent.
//   - The server could not be reached or did not answer: an error matching
//     [store.ErrUnavailable].
//   - [Guard.Unlock] of a lock the session no longer holds:
//     [store.ErrNotHeld].
package pgadvisory
