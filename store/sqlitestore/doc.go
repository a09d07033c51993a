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
// docs/STORES.md lists the optional interfaces of package store [Store]
// implements.
// Every write (an acquisition, a release, or a whole batch of either or of
// renewals) is one transaction
// begun IMMEDIATE, so it holds the file's write lock from its first read to
// its commit and processes sharing the file take turns. Within one process
// the writes of every Store opened on the same path queue for that lock in
// the order they came, rather than retrying in SQLite's busy handler, which
// sleeps up to 100 ms between tries and lets whoever retries at the right
// moment go first. [Store.Acquire]
// calls made at once by any callers of one Store share transactions, and
// so commits: while two are under way, later ones wait for one to end and
// go together, up to 1,000 to a transaction. The file is in WAL
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
// break the single-clock premise of promise P1. What a step of that clock
// does is under Failure modes.
//
// # Tokens
//
// Tokens come from a single counter row, tenure_counter, created by the
// first migration and never deleted or lowered (triggers refuse both). A
// new tenure of any lease takes the next value, so tokens are strictly
// increasing across all lease names, across releases, expiries and
// deleted lease rows, and across restarts of every process (promise P2).
// Renewals keep the token and advance seq (promise P6). Release expires the
// lease at once and keeps both the lease row and the counter. Tokens do not
// depend on the clock, so no clock step makes a token repeat or go down.
//
// Deleting the file, or restoring an older copy of it, restarts or rewinds
// the counter: tokens handed out afterwards can repeat earlier ones. Fences
// kept in the same file rewind with it and stay consistent with it; fences
// kept elsewhere refuse the repeated tokens until they are reset by hand.
// Treat the file as state, not cache.
//
// # Notifications
//
// [Store.Listen] announces each release ([store.NoticeReleased], naming
// in Next the follower the lease is kept for) and each new tenure
// ([store.NoticeAcquired], with its holder and the TTL it was granted);
// renewals are not announced. Each new tenure and each release stamps its
// lease with the next value of a change counter kept in the counter row,
// and records on the lease what its notice says (migration 005).
//
// A change that a Store commits itself reaches that Store's listeners as
// soon as it has committed, with no poll in between. SQLite cannot push
// the changes of other connections and processes, so Listen also polls,
// cheaply: every [Config.PollInterval] (default [DefaultPollInterval]) it
// reads PRAGMA data_version on a connection of its own, which reads no
// table and moves only when another connection has committed; after a
// commit it reads the leases stamped since the last poll. A follower
// campaigning through a [github.com/tenure-dev/tenure.Client] thus hears
// of a release at once when its holder shares its Store, and within about
// one poll interval when the holder uses another Store or process, instead
// of at the expiry it was told.
//
// Both are there for handover time. Announcing a Store's own commits at
// once costs nothing and makes a handover between two clients of one
// Store about two commits long (3–6 ms measured). Between processes only
// polling helps, and it costs CPU even when nothing happens: the default
// interval was 25 ms, which made the median handover between two
// processes about 18–19 ms, too close to the 20 ms we aim for on a busy
// machine; at 10 ms it is 10–11 ms, for about one percentage point of a
// core more per idle listening process (1.8–2.3% instead of 1–1.6%,
// measured on a busy two-core machine); 5 ms would save 3–4 ms more and
// double that cost. [Config.PollInterval] gives every figure and the
// benchmarks that measure them. Notifications remain an optimisation: a
// follower that misses one still retries at the expiry.
//
// # Line
//
// The store keeps followers that ask to wait ([store.AcquireParams.Wait])
// in line per lease, first come first, in the table tenure_waiters
// (migration 005), written in the refused acquisition's own transaction:
// the refusal commits the follower's place and reports it
// ([store.HeldError].Position). A follower that has not asked again within
// twice its TTL after the expiry it was told is forgotten; one that
// acquires the lease leaves the line. A release keeps the lease for the
// head of the line for [store.Handoff]: meanwhile everyone else is refused
// with a [*store.HeldError] naming that follower in Next, and the release
// notice names it too, so the head tries at once and the others stay back.
// The line only orders followers: an expired lease is free for anyone, and
// a kept lease is free again after [store.Handoff]. Processes sharing the
// file through a tenure older than migration 005 keep no line: their
// changes are announced as [store.NoticeChanged] and keep nothing for the
// head of the line.
//
// # History
//
// [Store] implements [store.Historian] and [store.ForceReleaser]. The
// table tenure_history (migration 003) gets one row per grant (granted on
// an absent or released lease, taken-over on an expired one, with the
// tenure it replaced) and per release (released, or force-released through
// [Store.ForceRelease], which `tenure release --force` calls), written in
// the acquisition's or release's own transaction, so it shows exactly the
// changes that committed. Renewals write nothing. Times are the host clock
// of the transaction. Events are kept for [Config.HistoryRetention] (30
// days by default): each event recorded deletes at most 16 older ones,
// oldest first, through the index on at, so an acquisition's cost stays
// bounded and names that went quiet are cleared too. [Store.History] reads
// through the indexes on (name, at) and at, without the write lock.
//
// # Failure modes
//
//   - A forward step of the host clock by J shortens every lease at the
//     store by J: a lease with less than J remaining expires at once and
//     another process may acquire it, with a greater token, while its old
//     holder, whose local deadline runs on the monotonic clock that the
//     step does not move, keeps trusting its token for up to one renew
//     interval, until its next renewal finds the lease taken (up to its
//     local deadline if that renewal fails), or until its suspension
//     detector sees wall and monotonic time diverge (a renewal that still
//     succeeds reports the store's time, [store.Grant.At], and the holder
//     stands down when that ran ahead of its monotonic time). This is the expensive
//     side: for that window two processes believe they lead. Fencing keeps
//     the resource correct (once the new holder's token is recorded at a
//     fence, the old holder's writes are refused with [store.ErrFenced]);
//     side effects that check no token may happen twice.
//   - A backward step by J lengthens every lease at the store by J. Nobody
//     leads longer than it believes (holders stand down on their monotonic
//     deadline, promise P1), but a lease whose holder died stays blocked for
//     up to TTL + J, and followers are told a remaining time J too long. It
//     costs availability, never safety. The AcquiredAt of a [store.Record]
//     is read off the same clock and may look out of order after a step;
//     nothing decides on it.
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
//   - Losing, replacing or rewinding the file: see Tokens. A listener that
//     finds the change counter rewound reports the empty name (look again
//     at everything) and goes on.
//   - After [Store.Close] every call fails with [store.ErrClosed] and
//     every Listen returns.
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
