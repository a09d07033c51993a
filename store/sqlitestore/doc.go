// Package sqlitestore keeps tenure leases in one SQLite file on the local
// disk: the zero-setup store for one machine, and the default of the tenure
// CLI. It uses the pure-Go modernc.org/sqlite driver, so it needs no cgo and
// no server.
//
//	st, err := sqlitestore.Open(ctx, "/var/lib/myapp/tenure.db", sqlitestore.Config{})
//	if err != nil {
//		return err
//	}
//	defer st.Close()
//	client, err := tenure.New(st, tenure.Config{})
//
// [Store] implements [store.Store] and [store.Lister]. Every write
// (acquire, a whole renew batch, release) is one transaction begun
// IMMEDIATE, so it holds the file's write lock from its first read to its
// commit and processes sharing the file take turns. The file is in WAL
// journal mode (readers never wait for the writer) with synchronous=FULL
// (a committed token survives power loss).
//
// # Clock
//
// The store's clock is the host's wall clock, read in Go inside each write
// transaction after its write lock was taken, and stored as UTC unix
// nanoseconds. There is one clock because there is one host: this store is
// for processes on one machine sharing one local file. Do not put the file
// on a network file system or share it between hosts or containers with
// different clocks: SQLite's locking is not reliable there, and two clocks
// break the single-clock premise of promise P1.
//
// The wall clock can be stepped (by an administrator, by NTP at boot, by a
// VM restored from a snapshot). What a step does:
//
//   - A forward step by J shortens every lease at the store by J. A lease
//     with less than J remaining expires at once and another process may
//     acquire it, with a greater token. Its old holder keeps its own local
//     deadline on the monotonic clock, which the step does not move, so for
//     up to one TTL (minus the safety margin) after its last renewal two
//     processes believe they lead. Fencing keeps the resource correct: once
//     the new holder's token is recorded at a fence, the old holder's writes
//     are refused with [store.ErrFenced]; writes the old holder made before
//     that are ordered before the new tenure. Side effects that check no
//     token may happen twice in that window. The old holder learns of the
//     takeover at its next renewal (the token no longer matches), or sooner
//     when its suspension detector sees wall and monotonic time diverge.
//   - A backward step by J lengthens every lease at the store by J. Nobody
//     leads longer than it believes (holders stand down on their monotonic
//     deadline, promise P1), but a lease whose holder died stays blocked for
//     up to TTL + J, and followers are told a remaining time J too long. It
//     costs availability, never safety.
//
// Tokens do not depend on the clock, so neither step makes a token repeat
// or go down. The AcquiredAt of a [store.Record] is read off the same clock and may
// look out of order after a step; nothing decides on it.
//
// # Token source
//
// Tokens come from a single counter row, tenure_counter, created by the
// first migration and never deleted or lowered (triggers refuse both). A
// new tenure of any lease takes the next value, so tokens are strictly
// increasing across all lease names, across releases, expiries and
// deleted lease rows, and across restarts of every process (promise P2).
// Renewals keep the token and advance seq (promise P6). Release expires the
// lease at once and keeps both the lease row and the counter.
//
// Deleting the file, or restoring an older copy of it, restarts or rewinds
// the counter: tokens handed out afterwards can repeat earlier ones. Fences
// kept in the same file rewind with it and stay consistent with it; fences
// kept elsewhere refuse the repeated tokens until they are reset by hand.
// Treat the file as state, not cache.
//
// # Notify
//
// None: the store does not implement [store.Notifier]. A follower whose
// [Store.Acquire] fails gets a [*store.HeldError] with the remaining time
// by the store's clock and retries at that expiry; a release therefore
// reaches followers at their next aligned retry, not at once.
//
// # Fencing
//
// The same file holds a fence table, tenure_fence(resource, token), with
// the semantics of PostgreSQL's: [Fence] records the highest token each
// resource accepted and refuses a lower one with a [*store.FencedError]
// inside the caller's own transaction. Begin that transaction on
// [Store.DB], write your own tables in the same file in it, and the fence
// check and the write commit together:
//
//	tx, err := st.DB().BeginTx(ctx, nil)
//	if err != nil {
//		return err
//	}
//	defer tx.Rollback()
//	if err := sqlitestore.Fence(ctx, tx, "ledger", lease.Token()); err != nil {
//		return err // errors.Is(err, store.ErrFenced): superseded; stop
//	}
//	if _, err := tx.ExecContext(ctx, "UPDATE ledger SET balance = balance - ?", amount); err != nil {
//		return err
//	}
//	return tx.Commit()
//
// # Failure modes
//
//   - Another process holds the write lock for longer than
//     [Config.BusyTimeout]: the call fails with an error matching
//     [store.ErrUnavailable]. So does a call whose context ends, a full
//     disk and an I/O error. As the [store.Store] contract says, the
//     caller treats the outcome as unknown.
//   - A process that dies mid-transaction leaves nothing half done: SQLite
//     rolls the transaction back, and its leases expire after their TTL.
//   - A path that is a directory, a file that is not a SQLite database, or
//     a directory this user cannot write fails [Open] with an error naming
//     the path and what to do.
//   - A file whose schema is newer than this package (PRAGMA user_version
//     above [SchemaVersion]) fails [Open]; a database missing the tables
//     fails [Fence] with [store.ErrNotMigrated].
//   - Losing, replacing or rewinding the file: see Token source.
//
// Schema changes are applied by [Open] in one IMMEDIATE transaction and
// versioned with PRAGMA user_version, so several processes may open a new
// file at once: the switch to WAL, which SQLite may refuse at once with
// SQLITE_BUSY while another process makes it, is retried within
// [Config.BusyTimeout]. [SchemaSQL] prints the schema for review.
//
// # File location
//
// [Open] takes any path and creates the missing directories (mode 0700) and
// the file (mode 0600); SQLite keeps two companions next to it, path-wal
// and path-shm, so the directory must stay writable. The conventional
// per-user location, and the tenure CLI's default, is
// $XDG_STATE_HOME/tenure/tenure.db, falling back to
// ~/.local/state/tenure/tenure.db; [DefaultPath] computes it. Processes
// that must coordinate have to agree on the path, so services run by
// different users should share an explicit path such as
// /var/lib/NAME/tenure.db.
package sqlitestore
