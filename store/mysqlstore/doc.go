// Package mysqlstore is the MySQL and MariaDB [store.Store], over
// database/sql with github.com/go-sql-driver/mysql (docs/STORES.md lists
// the optional interfaces of package store it implements). It is tested
// against MariaDB 10.11; it needs JSON_TABLE
// and CREATE PROCEDURE IF NOT EXISTS, so MariaDB 10.6 or MySQL 8.0.29 at
// least.
//
//	db, err := sql.Open("mysql", "user:password@tcp(db:3306)/jobs")
//	st, err := mysqlstore.New(db, mysqlstore.Config{})
//	err = st.Migrate(ctx) // once, as the database's owner; or `tenure migrate`
//
// Every operation is one CALL of a stored procedure that
// [Store.Migrate] installs, so it is one round trip and, where it writes,
// one transaction on the server: Acquire locks the lease row (creating it
// when absent), decides, draws a token and answers the holder, token, seq
// and remaining time either way; Renew sends the whole batch as one JSON
// array and renews it with one UPDATE joined to JSON_TABLE, after locking
// exactly the batch's rows by primary key; Release is one UPDATE; Get and
// List read. The statements are prepared once per connection.
//
// # Clock
//
// The store owns time (promise P1): every expiry decision is taken on the
// server by SYSDATE(6), read inside the procedure after the row lock was
// granted, never by the client's clock. Not NOW(6): NOW() is the time the
// statement began (inside a procedure, the time the CALL began), so a
// check that waited for a lock would judge expiry by a reading taken before
// the wait, and a session can set it at will (SET timestamp). SYSDATE(6)
// is read when it is evaluated and ignores SET timestamp. Times are stored
// as microseconds since the Unix epoch (UNIX_TIMESTAMP(SYSDATE(6))), so the
// session's time_zone does not matter, and remaining times are reported
// to the microsecond; the client counts them down on its monotonic clock.
//
// Do not start the server with --sysdate-is-now, which turns SYSDATE into
// NOW. With statement-based binary logging SYSDATE is unsafe to replicate
// (MIXED logging switches those statements to row events; use ROW or
// MIXED).
//
// # Tokens
//
// Tokens come from one counter row in <prefix>tokens, raised by every new
// tenure inside the acquiring transaction (after the lease row is locked)
// to one more than both its value and the lease's last token, so a token is
// greater than every token handed out before it for that name (promise
// P2), across releases, expiries, deleted lease rows and restarts. It is
// not AUTO_INCREMENT, whose counter a deleted row gives back and which
// servers before MySQL 8.0 and MariaDB 10.2.4 reset to MAX(id)+1 on
// restart. One counter serves every lease of a prefix, so tokens of
// different names are comparable but mean nothing across names. Renewals
// keep the token and advance the renewal seq (promise P6); a release keeps
// both the row and the counter. The migration starts the counter above
// every token already in the lease and fence tables. A missing counter row
// (deleted by hand) makes every acquisition fail with
// [store.ErrNotMigrated] rather than start again at 1: insert it again
// with a value above every token ever handed out.
//
// # Notifications
//
// MySQL and MariaDB have no LISTEN/NOTIFY or any other way to push a
// change to a client. What they have is user-level locks (GET_LOCK), which
// a session holds until it frees them or ends, and on which other sessions
// block; the store uses one per lease, a bell, named by a digest of the
// lease table and the lease name ("tenure:" and 40 hex digits; such
// locks are server-wide). Bells are hints only: every acquisition is still
// the acquire procedure's compare-and-set, and a bell that does not ring
// costs what no bell costs, a handover at the expiry the follower was
// told.
//
//   - A store that acquires a lease has one connection of its own (one a
//     store, however many leases it holds) take the lease's bell right
//     after (in the background: the acquisition does not wait for it), and
//     free it while the lease's release is sent (a follower it wakes
//     reaches the lease row after the release's row lock, and one that
//     comes sooner is refused and rung again by the bell's next look, see
//     below), or when a renewal or an acquisition finds the lease not its
//     own.
//   - A subscription ([Store.Subscribe], what a client listens through)
//     blocks a connection on the bell of each lease it follows and the
//     store does not hold, and announces a [store.NoticeChanged] when the
//     bell is freed: the holder released the lease, or its connection
//     ended (the process died: the lease is then still held until its
//     expiry, and the follower, refused, waits for that). The woken
//     follower takes and frees the bell at once, so that every waiter
//     wakes and the next holder can take it. A bell found free (its
//     holder has not taken it yet, or died, or runs a library without
//     bells) is looked at again after 20 ms, doubling to a second, and
//     announced at each of the first looks (about a second's worth), since
//     a release may have come between two of them.
//   - [Store.Listen], for every name, hears only the releases made
//     through this store: no connection could wait for every lease.
//     Followers hear other processes' releases through subscriptions.
//
// A clean handover therefore takes the release, the wake-up (a freed lock,
// within the server) and the follower's acquisition: TestHandoverAtRelease
// shows a follower told the lease is held for a minute taking it over at
// the release, and BenchmarkHandover measures it against the write floor
// (docs/PERFORMANCE.md).
//
// The cost is connections, not requests. A store that holds leases keeps
// one connection more, and a store whose followers wait keeps one
// connection per lease waited for, at most 16 for the store (the leases
// beyond them are taken at their expiry), each asking again once every
// 5 s while nothing happens. They are taken from db's pool and count
// against its limit and the server's max_connections: when db has a limit
// (SetMaxOpenConns), the bells take at most half of it, and none when
// that is fewer than two. Every connection that held or waited on a bell
// is closed rather than returned to the pool, so no other use of db
// inherits a lock. With many waiting processes, every one of them wakes
// at a release and tries (one refused CALL each but the winner's): the
// line orders only the followers that come at an expiry.
//
// # The line
//
// Followers that ask to wait ([store.AcquireParams.Wait], as every
// campaign does) are kept in line, first come first (the waiters table):
// a refusal reports the caller's place, and an
// acquisition takes the winner out of the line. Told the same expiry, the
// first in line comes back at that moment and the others a moment later
// ([store.Handoff] and a small spread), so an expiry costs the store one
// acquisition however many follow. A follower that stops asking is
// forgotten twice its TTL after the expiry it was last told. A released
// lease is free at once: a bell wakes every waiter, not the first in line
// only, so keeping the lease for it would only keep it from a follower
// that asks sooner.
//
// # History
//
// The MySQL store keeps no history ([store.Historian]) yet. It can keep
// exactly what the PostgreSQL store keeps: a history table written by the
// acquire and release procedures (or a trigger that tests the token and
// released columns, since MySQL triggers have no WHEN clause), in the same
// transaction, with an index on (name, at) and a bounded delete of
// expired rows per event. It is not done yet because it needs its own
// migration, procedure changes and grants (see Migrations). Until then, use PostgreSQL or
// SQLite for leases whose history matters, or the holders' own logs.
//
// # Failure modes
//
//   - A call whose reply does not arrive (connection cut after the commit,
//     context deadline, server shutdown) fails with an error matching
//     [store.ErrUnavailable]: it may have been applied. When the context
//     ends the driver closes the connection, but the server may still
//     finish the procedure and commit. The client treats the outcome as
//     unknown (promise P3); the renewal chain (seq) then tells a lost reply
//     from a clone.
//   - Deadlocks, lock wait timeouts, a read-only server, too many
//     connections and interrupted or timed-out statements are
//     [store.ErrUnavailable] too.
//   - The server's wall clock decides expiry. A forward step of that clock
//     expires every lease early by the size of the step: another process
//     can take a lease over while the holder still trusts its old token
//     until its next renewal is refused, at most one renew interval later.
//     Fencing covers that window: [mysqlfence] CheckLease judges expiry by
//     the same clock and refuses the old token at once, and Fence refuses
//     it once the new holder wrote. A backward step makes leases last
//     longer. Run the server with a slewing clock. UNIX_TIMESTAMP of
//     SYSDATE is exact in UTC and fixed-offset time zones; in a time zone
//     with daylight saving time the repeated autumn hour is ambiguous, so
//     run the server (and sessions) in UTC.
//   - Tokens and leases are as durable as InnoDB's commits
//     (innodb_flush_log_at_trx_commit=1 for a crash to lose nothing). With
//     asynchronous replication a failover can lose the last commits: the
//     last counter bump and the lease that carries it, so the new primary
//     may hand an equal token to another holder. Use semi-synchronous
//     replication or Galera when leases must survive a failover.
//   - A lease row locked by a fenced transaction ([mysqlfence]) makes
//     renewals, releases and takeovers of that lease wait for it to end.
//     Keep fenced transactions short next to the TTL.
//   - A renew batch travels as one JSON parameter of up to about 600
//     bytes a lease (names and holders at their longest), so the largest
//     batch ([store.MaxRenewBatch]) needs max_allowed_packet of 8 MB; the
//     default is 16 MB on MariaDB 10.11 and 64 MB on MySQL 8.
//   - A call on a database that was never migrated fails with
//     [store.ErrNotMigrated]; an account without the grants
//     [Config.GrantSQL] lists fails with permission denied.
//   - The procedures run with their definer's rights (SQL SECURITY
//     DEFINER); the definer is the account that ran the migration.
//     Dropping that account breaks every call until the procedures are
//     created again by another.
//
// # Schema
//
// [Store.Migrate] makes the tables and procedures (see Migrations);
// [Config.MigrationSQL] prints the same schema as a script for the mysql
// client; [Config.GrantSQL] prints the grants of a run-time account. With
// the default [Config] the objects are:
//
//   - tenure_leases(name VARBINARY(255) PRIMARY KEY, holder_label,
//     holder_instance, token, seq, acquired_us, renewed_us, expires_us,
//     released, payload): one row per lease name, never deleted by the
//     store.
//     Names and holders are compared as bytes: no collation folds case or
//     ignores trailing spaces.
//   - tenure_tokens(id = 1, value): the token counter.
//   - tenure_fences(resource VARBINARY(255) PRIMARY KEY, token,
//     updated_us): the highest token each fenced resource accepted.
//   - tenure_waiters(name, holder_label, holder_instance, ticket,
//     until_us): the followers waiting in line for each lease (see The
//     line).
//   - the procedures tenure_acquire_or_wait, tenure_renew, tenure_release,
//     tenure_get_lease and tenure_list_leases, tenure_acquire_lease (which
//     libraries from before the line call), and the fence procedures
//     tenure_fence, tenure_check_lease and tenure_check_lease_strict
//     (below);
//   - tenure_migrations and tenure_functions: what Migrate applied and
//     installed (see Migrations).
//
// Every name is [Config.TablePrefix] followed by a fixed suffix, in
// [Config.Database] (the connection's default database when empty). Names
// are put into the SQL once, in [New], always quoted; every value travels
// as a bind parameter.
//
// At run time the store needs only EXECUTE on the eight procedures: no
// privilege on any table, so a worker's credentials can do what the lease
// protocol does and nothing else; they cannot rewrite a lease, a token or
// a fence.
//
// # Migrations
//
// The tables come from numbered migrations (migrations/NNN_name.up.sql,
// written for the mysql client; today one: 001_tables), applied once each
// and recorded in <prefix>migrations. Every procedure lives in a file of
// its own (functions/NAME.sql: DROP PROCEDURE IF EXISTS and CREATE
// PROCEDURE), whose first line is "-- revision N"; the current text of a
// procedure is that file and nothing else. [Store.Migrate] holds a named
// lock (GET_LOCK) of the database and prefix, so concurrent calls wait
// for each other and never apply anything twice; it applies the missing
// migrations, then installs each procedure whose record in
// <prefix>functions (name, revision, SHA-256 of the file) is missing, at
// a lower revision, or at the same revision with another hash, and records
// it. An unchanged procedure is not dropped. One recorded at a higher
// revision was installed by a newer library and is left alone, so an
// older library's Migrate never puts an older body back.
// [Store.SchemaStatus] reads the records and says what Migrate would do
// (`tenure migrate --check`).
//
// MySQL cannot replace a procedure in place: Migrate drops it and creates
// it again, each statement committed by itself. Between the two (a few
// milliseconds) calls of that procedure fail with "does not exist"
// ([store.ErrNotMigrated]): a worker's renewal fails and its tenure ends
// on the cheap side (promise P3), never the other way. Dropping a
// procedure takes away the grants on it, so Migrate reads the accounts
// granted EXECUTE from mysql.procs_priv first and grants it to them again
// after; an account that may not read mysql.procs_priv, or not grant, is
// refused before that procedure is dropped, or told which grants to apply
// again. The printed script of [Config.MigrationSQL] installs every
// procedure whatever is recorded: apply [Config.GrantSQL]'s statements
// after it.
//
// Running binaries and a changed procedure: the new body takes effect for
// every caller once created, including for workers of older libraries,
// which call procedures by name. So a body change must keep its
// procedure's contract (parameters, result columns and their meaning)
// for every library still running; a change of contract is a new
// procedure (a new name, in a file of its own, granted by
// [Config.GrantSQL]), and the old one is dropped, in a migration, only
// once no supported library calls it. A new revision is a new number in
// the file's first line.
//
// Databases migrated before v0.1.0 recorded migrations 001_init,
// 002_payload and 003_line, which created each procedure again whenever it
// changed; 001_tables and functions/ are their squashed result. Migrate
// upgrades such a database in place when it records all three: it forgets
// them, applies 001_tables (which finds its tables there and changes
// nothing), creates every procedure again (the same bodies, with their
// grants carried over) and records this numbering, keeping every lease,
// token and fence. A database that records only some of them is refused,
// with what to do; the printed script does not check for that.
//
// # Fence procedures
//
// Installed by the migration, callable from any language inside the
// caller's own transaction. Package [mysqlfence] calls them from Go.
// MySQL does not roll a transaction back when a procedure raises an error:
// the caller must.
//
//   - <prefix>fence(resource, token): records token as the highest token
//     resource accepted. An equal or greater token passes; a lower one
//     raises SQLSTATE TF001 with the message ending
//     'recorded=<n> offered=<m>'. It locks the resource's fence row until
//     the transaction ends.
//   - <prefix>check_lease(name, token): passes when the lease is held with
//     token by SYSDATE(6) read after the row lock, raises SQLSTATE TF002
//     otherwise ('current=<n> offered=<m> state=absent|superseded|released|expired').
//     It share-locks the lease row until the transaction ends, so a
//     takeover waits for the caller's commit.
//   - <prefix>check_lease_strict(name, token, holder_label,
//     holder_instance, seq): check_lease that also requires holder and seq
//     to match and advances seq, answering one row with the new seq. A
//     mismatch raises SQLSTATE TF003 ('cur=<n> off=<m> cur_seq=<s>
//     off_seq=<r>'). It locks the row exclusively until the transaction
//     ends: of two byte-identical clones only one can pass.
//
// [mysqlfence]: https://pkg.go.dev/github.com/tenure-dev/tenure/fence/mysqlfence
package mysqlstore
