// Package mysqlfence is the resource side of tenure's fencing for MySQL and
// MariaDB: Go helpers that call the fence procedures [mysqlstore] installs,
// inside the caller's own database/sql transaction, and turn their
// refusals into [store.ErrFenced] (promise P4: the resource decides).
//
// # Which check
//
//   - [Fence] (resource, token): the resource remembers the highest token it
//     accepted and refuses lower ones. Works wherever the token travels,
//     also when the lease lives in another store. Equal tokens pass, so
//     two clones of one holder (same token) both pass: pair it with the
//     renewal chain, or use the strict check.
//   - [CheckLease] (lease name, token): the write is accepted only while
//     the lease itself is held with that token by the server's clock
//     (SYSDATE(6), read after the row lock was granted), and the lease row
//     stays share-locked until commit, so no takeover can happen between
//     the check and the commit. Needs the leases in the same server as the
//     write.
//   - [StrictTx] (or [CheckLeaseStrict] on a [tenure.ChainWrite]): the
//     lease check plus a compare-and-set on the holder and the renewal seq,
//     which it advances. Of two byte-identical clones only one can ever
//     pass.
//
// # Use
//
//	tx, err := db.BeginTx(ctx, nil) // db opened with go-sql-driver/mysql
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback()
//	if err := mysqlfence.Fence(ctx, tx, "invoices", lease.Token()); err != nil {
//		return err // errors.Is(err, store.ErrFenced): superseded; stop
//	}
//	if _, err := tx.ExecContext(ctx, "UPDATE invoices SET ..."); err != nil {
//		return err
//	}
//	return tx.Commit()
//
// The package-level functions use the default prefix (tenure_) in the
// connection's default database. For a store configured otherwise, make a
// [Fencer] with [New] from the same [mysqlstore.Config]. The helpers take a
// [Querier], which *sql.Tx, *sql.Conn and *sql.DB satisfy (and the *sql.Tx
// under sqlx, GORM or ent); the connection must come from
// go-sql-driver/mysql, whose errors carry the SQLSTATE.
//
// # Errors
//
//   - A refusal matches [store.ErrFenced]; errors.As finds a
//     [*store.FencedError]. For [Fence] it carries the resource, the
//     offered token and the recorded one. For [CheckLease] and
//     [CheckLeaseStrict] its Resource is "lease:" followed by the lease
//     name and Recorded is the lease's current token (0 when the lease does
//     not exist); the message says whether the lease was taken over,
//     released or expired, or, for the strict check, that the renewal chain
//     moved on. Never log and carry on (promise P9): roll back and stop
//     working under that token.
//   - Unlike PostgreSQL, MySQL does not abort the transaction when a
//     procedure raises an error: the transaction stays open with its locks
//     and whatever it wrote before the check. Roll it back.
//   - Missing procedures match [store.ErrNotMigrated]; connection failures,
//     deadlocks and lock wait timeouts match [store.ErrUnavailable] (roll
//     the transaction back; a failed commit's outcome is unknown).
//   - Bad input (empty name, token 0 or below, nil querier) matches
//     [store.ErrInvalid] and sends nothing. A [tenure.Lease] whose Token
//     is 0 is no longer trusted: do not write.
//
// # SQL
//
// The same checks are plain stored procedures, callable from any language
// in any transaction; they raise SQLSTATE TF001 (stale token), TF002 (lease
// not held with this token), TF003 (renewal chain moved on) and TF004 (a
// token above the store's counter, never issued: [fence.ErrNotIssued]), a
// class of their own that no server error uses. The package documentation of
// [mysqlstore] describes them.
//
// # Locks and transaction length
//
// Every check locks a row until the transaction ends: the resource's fence
// row ([Fence]), or the lease row ([CheckLease] shares it;
// [CheckLeaseStrict] holds it exclusively). A locked lease row holds off
// the holder's own renewals as well as takeovers, so keep fenced
// transactions short next to the TTL, or the holder may stand down while it
// waits; innodb_lock_wait_timeout (50 s by default) bounds the wait.
//
// # Strict writes and the renewal chain
//
// A strict check advances the lease's renewal seq, the same chain the
// holder's renewals advance. [Fencer.StrictTx] keeps the two apart through
// a [tenure.ChainWrite]: the write waits for a renewal in flight, the next
// renewal waits for the write, and the client learns the new seq only after
// the commit succeeded. So a renewal that finds the chain moved on can only
// have met a clone; a rolled-back write costs nothing; and a commit whose
// outcome is unknown costs at most the tenure (its next renewal fails and
// the client acquires again with a new token), the cheap side, never a
// second writer. A process that calls check_lease_strict without telling
// its client, such as a `tenure run` command, ends its own tenure at the
// next renewal.
package mysqlfence
