// Package pgfence is the resource side of tenure's fencing for PostgreSQL:
// Go helpers that run the fence functions [pgstore] installs, inside the
// caller's own transaction, and turn their refusals into
// [store.ErrFenced] (promise P4: the resource decides).
//
// # Which check
//
//   - [Fence] (resource, token): the resource remembers the highest token it
//     accepted and refuses lower ones, and refuses a token the store never
//     issued (above the token sequence of the same schema and prefix).
//     Equal tokens pass, so two clones of one holder (same token) both
//     pass: pair it with the renewal chain, or use the strict check.
//   - [FenceForeign]: Fence for tokens of another store (etcd, Consul,
//     Redis), which the database cannot check; the run-time role is not
//     granted it.
//   - [CheckLease] (lease name, token): the write is accepted only while
//     the lease itself is held with that token by the server's clock, and
//     the lease row stays share-locked until commit, so no takeover can
//     happen between the check and the commit. Needs the leases in the
//     same database as the write.
//   - [StrictTx] (or [CheckLeaseStrict] on a [tenure.ChainWrite]): the
//     lease check plus a compare-and-set on the holder and the renewal seq,
//     which it advances. Of two byte-identical clones only one can ever
//     pass.
//
// # Use
//
//	tx, err := pool.Begin(ctx)
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback(ctx)
//	if err := pgfence.Fence(ctx, tx, "invoices", lease.Token()); err != nil {
//		return err // errors.Is(err, store.ErrFenced): superseded; stop
//	}
//	if _, err := tx.Exec(ctx, "UPDATE invoices SET ..."); err != nil {
//		return err
//	}
//	return tx.Commit(ctx)
//
// The package-level functions use the default schema and prefix (public,
// tenure_). For a store configured otherwise, make a [Fencer] with [New]
// from the same [pgstore.Config].
//
// # database/sql
//
// With database/sql (and sqlx, GORM or ent on top of it) over pgx's stdlib
// driver, wrap the *sql.Tx with [SQL]: every helper that takes a [Querier]
// then runs in it, with the same SQL and the same errors. [StrictSQLTx] is
// [StrictTx] for a *sql.DB or *sql.Conn.
//
//	tx, err := db.BeginTx(ctx, nil) // db := stdlib.OpenDBFromPool(pool), or sql.Open("pgx", url)
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback()
//	if err := pgfence.CheckLease(ctx, pgfence.SQL(tx), "billing", lease.Token()); err != nil {
//		return err // errors.Is(err, store.ErrFenced)
//	}
//	if _, err := tx.ExecContext(ctx, "UPDATE invoices SET ..."); err != nil {
//		return err
//	}
//	return tx.Commit()
//
// Other drivers (lib/pq) run the same SQL, but pgfence cannot read their
// errors: a refusal then matches [store.ErrUnavailable] instead of
// [store.ErrFenced]. Either way the write must be rolled back; use pgx's
// stdlib driver to tell the two apart.
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
//   - After any error the transaction is aborted by PostgreSQL: roll it
//     back.
//   - Missing functions match [store.ErrNotMigrated]; connection failures
//     and timeouts match [store.ErrUnavailable] (the transaction did not
//     commit; roll it back).
//   - A token the store never issued matches [fence.ErrNotIssued] and
//     [store.ErrInvalid], not [store.ErrFenced]: it is a bug or an attack,
//     not a superseded holder, and nothing was changed.
//   - Bad input (empty name, token 0 or below, nil querier) matches
//     [store.ErrInvalid] and sends nothing. A [tenure.Lease] whose Token
//     is 0 is no longer trusted: do not write.
//
// # SQL
//
// The same checks are plain SQL functions, callable from any language in
// any transaction; they raise SQLSTATE TF001 (stale token), TF002 (lease not
// held with this token), TF003 (renewal chain moved on) and TF004 (a token
// never issued). The package documentation of [pgstore] describes them.
//
// # Roles and repair
//
// The functions run as the schema's owner: a role granted what
// [pgstore.Config.GrantSQL] prints calls them and cannot touch the fences,
// leases or token sequence any other way, so a buggy or compromised worker
// can neither rewind a fence nor raise it past the tokens issued. A fence
// poisoned all the same (through FenceForeign, or before the upgrade that
// took the table privileges away) is repaired by the owner with
// [Fencer.Reset] or `tenure fence reset RESOURCE --to N --reason TEXT`;
// every reset is recorded in the fence_resets table with who, when, why,
// and the old and new token.
//
// # Locks and transaction length
//
// Every check locks a row until the transaction ends: the resource's fence
// row ([Fence]), or the lease row ([CheckLease] shares it; [CheckLeaseStrict]
// holds it exclusively). A locked lease row holds off the holder's own
// renewals as well as takeovers, so keep fenced transactions short next to
// the TTL, or the holder may stand down while it waits.
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
// second writer. The tenure is not renewed while a strict transaction is
// open: keep it short next to the TTL.
package pgfence
